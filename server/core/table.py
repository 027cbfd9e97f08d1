"""The round state machine, as pure transitions over a plain TableState.

The owner of a table computes the next state and the events it emits from the current one;
a store commits both atomically (checking its fencing token and the state's version), so a
crashed owner's successor resumes from whatever state was last committed. Nothing here reads
a clock or does I/O: `now_ms` and a new shoe's seed come in as arguments.
"""

from __future__ import annotations

from collections.abc import Iterable, Sequence
from dataclasses import dataclass, field, replace
from enum import StrEnum

from server.core import events as ev
from server.core.bets import Bet, BetTotals, Outcome, Payout, settle_bets
from server.core.cards import Card
from server.core.coup import Coup, resolve_coup
from server.core.errors import BetRejected, NotEnoughCards, RejectCode
from server.core.events import EventPayload, RoundResultPayload
from server.core.fair_table import FairShoe, card_proof, commit_shoe, reveal_shoe, seal_shoe
from server.core.roads import pair_code
from server.core.rules import TableRules
from server.core.shoe import MAX_COUP_CARDS, RandRange, Shoe

__all__ = [
    "Phase",
    "TableState",
    "Transition",
    "bare_state",
    "close_betting",
    "coup_of",
    "deal_next_card",
    "entropy_window",
    "open_round",
    "pause_table",
    "publish_totals",
    "refund_bets",
    "restart_table",
    "result_event",
    "result_fields",
    "result_letter",
    "resume_table",
    "round_settled",
    "round_voided",
    "settle_round",
    "verify_bet_window",
    "void_round",
]

RESULT_LETTERS = {"player": "P", "banker": "B", "tie": "T"}


class Phase(StrEnum):
    IDLE = "idle"  # no round yet
    BETTING = "betting"
    DEALING = "dealing"
    SETTLED = "settled"
    VOIDED = "voided"


@dataclass(frozen=True, slots=True)
class TableState:
    table_id: str
    phase: Phase = Phase.IDLE
    round: int = 0
    version: int = 0  # bumped by every committed transition (optimistic concurrency)
    closes_at_ms: int = 0
    shoe: Shoe | None = field(default=None, compare=False)
    shoe_number: int = 0
    round_start: int = 0  # shoe position of this round's first card
    dealt: int = 0  # cards of this round dealt so far
    last_hand: bool = False  # this round is the shoe's last (the cut card is out)
    results: str = ""  # this shoe's results, one letter (B/P/T) per coup, for the roads
    # Beside each letter of `results`, the coup's pairs: one roads.pair_code ("0" none,
    # "1" Player pair, "2" Banker pair, "3" both), for the roads' pair dots.
    pairs: str = ""
    # The owner has paused the table (an operator asked): no round opens until it resumes.
    paused: bool = False
    # The shoe's commitment (docs/fairness.md): its secret seed and, once sealed, its client
    # seed. None for a shoe shuffled before shoes were committed (an older node's state).
    fair: FairShoe | None = field(default=None, compare=False)

    def to_dict(self) -> dict[str, object]:
        return {
            "table_id": self.table_id,
            "phase": self.phase.value,
            "round": self.round,
            "version": self.version,
            "closes_at_ms": self.closes_at_ms,
            "shoe": self.shoe.to_state() if self.shoe else None,
            "shoe_number": self.shoe_number,
            "round_start": self.round_start,
            "dealt": self.dealt,
            "last_hand": self.last_hand,
            "results": self.results,
            "pairs": self.pairs,
            "paused": self.paused,
            "fair": self.fair.to_dict() if self.fair else None,
        }

    @classmethod
    def from_dict(cls, data: dict[str, object]) -> TableState:
        shoe = data.get("shoe")
        results = str(data["results"])
        pairs = data.get("pairs")
        if not isinstance(pairs, str) or len(pairs) != len(results) or pairs.strip("0123"):
            # Stored before pairs were kept (or by a node that drops them): the shoe's rounds
            # so far show no pair; the rounds from now on line up again.
            pairs = "0" * len(results)
        return cls(
            table_id=str(data["table_id"]),
            phase=Phase(str(data["phase"])),
            round=_int(data["round"]),
            version=_int(data["version"]),
            closes_at_ms=_int(data["closes_at_ms"]),
            shoe=Shoe.from_state(shoe) if isinstance(shoe, dict) else None,
            shoe_number=_int(data["shoe_number"]),
            round_start=_int(data["round_start"]),
            dealt=_int(data["dealt"]),
            last_hand=bool(data["last_hand"]),
            results=results,
            pairs=pairs,
            paused=data.get("paused", False) is True,  # states stored before pausing existed
            fair=FairShoe.from_dict(data.get("fair")),  # None: stored before shoes were committed
        )

    def dealt_cards(self) -> list[tuple[str, Card]]:
        """The (hand, card) pairs dealt so far this round, for snapshots."""
        if self.phase not in (Phase.DEALING, Phase.SETTLED) or self.shoe is None:
            return []
        coup = coup_of(self)
        return [(hand.value, card) for hand, card in coup.deal_order[: self.dealt]]


def _int(value: object) -> int:
    assert isinstance(value, int), value
    return value


@dataclass(frozen=True, slots=True)
class Transition:
    state: TableState
    events: list[EventPayload]


def _advance(state: TableState, **changes: object) -> TableState:
    return replace(state, version=state.version + 1, **changes)  # type: ignore[arg-type]


def open_round(
    state: TableState, rules: TableRules, now_ms: int, window_ms: int, seed: bytes
) -> Transition:
    """Open the next round's betting window. When a new shoe is due, the old one is revealed
    (if it was not yet) and the new one committed (`shoe_committed`) from `seed`, the
    runtime's fresh 32 bytes (unused otherwise): its order exists only from the seal, at the
    close of this window (close_betting)."""
    assert _between_rounds(state) and not state.paused, (state.phase, state.paused)
    events: list[EventPayload] = []
    shoe = Shoe(state.shoe.cards, state.shoe.position, state.shoe.cut_index) if state.shoe else None
    shoe_number, results, pairs, fair = state.shoe_number, state.results, state.pairs, state.fair
    round_no = state.round + 1
    if shoe is None or _new_shoe_due(state, rules, shoe):
        if fair is not None and not fair.revealed:
            events.append(reveal_shoe(fair, shoe_number)[1])
        shoe_number, results, pairs = shoe_number + 1, "", ""
        fair, committed = commit_shoe(seed, rules, shoe_number)
        shoe = None
        events.append(committed)
    last_hand = shoe is not None and shoe.is_last_hand()
    if shoe is not None and last_hand and shoe.position == shoe.cut_index:
        # The cut card came out before the first card of this hand: this hand is the last.
        events.append(ev.cut_card(shoe=shoe_number, last_round=round_no))
    closes_at = now_ms + window_ms
    events.append(
        ev.round_opened(
            closes_at=closes_at,
            shoe=shoe_number,
            last_hand=last_hand,
            rules=rules.name,
        )
    )
    new_state = _advance(
        state,
        phase=Phase.BETTING,
        round=round_no,
        closes_at_ms=closes_at,
        shoe=shoe,
        shoe_number=shoe_number,
        round_start=shoe.position if shoe is not None else 0,
        dealt=0,
        last_hand=last_hand,
        results=results,
        pairs=pairs,
        fair=fair,
    )
    return Transition(new_state, events)


def _new_shoe_due(state: TableState, rules: TableRules, shoe: Shoe) -> bool:
    """Whether the next round needs a new shoe, though this one is still in play."""
    return (
        rules.reshuffle_every_round
        or state.last_hand  # the previous hand was the shoe's last
        or not _coup_fits(shoe, shoe.position)  # never start a coup the shoe cannot finish
        or (state.fair is not None and state.fair.revealed)  # its seed is public
    )


def entropy_window(state: TableState) -> int:
    """The round whose betting window takes players' entropy (its shoe's first, before the
    seal), or 0 when none does: what the stores check Store.add_entropy against."""
    pending = state.fair is not None and not state.fair.sealed
    return state.round if pending and state.phase is Phase.BETTING else 0


def _between_rounds(state: TableState) -> bool:
    return state.phase in (Phase.IDLE, Phase.SETTLED, Phase.VOIDED)


def pause_table(state: TableState) -> Transition:
    """Hold the table between two rounds (an operator's pause): no round opens until
    resume_table. The round in play is never cut short: the owner pauses only once it ended."""
    assert _between_rounds(state) and not state.paused, (state.phase, state.paused)
    return Transition(_advance(state, paused=True), [ev.table_paused()])


def resume_table(state: TableState) -> Transition:
    """Let a paused table open rounds again."""
    assert state.paused, "the table is not paused"
    return Transition(_advance(state, paused=False), [ev.table_resumed()])


def verify_bet_window(state: TableState, round_no: object, now_ms: int) -> None:
    """Raise BetRejected unless a bet for `round_no` may be taken now."""
    if state.phase is not Phase.BETTING or now_ms >= state.closes_at_ms:
        raise BetRejected(RejectCode.BETTING_CLOSED, "betting is closed for this round")
    if type(round_no) is not int or round_no != state.round:
        raise BetRejected(
            RejectCode.WRONG_ROUND, f"round {round_no!r} is not open; {state.round} is"
        )


def _totals_event(totals: BetTotals) -> EventPayload:
    return ev.bet_totals(totals=totals.totals, bettors=totals.bettors, bets=totals.bets)


def publish_totals(state: TableState, totals: BetTotals) -> Transition:
    """Show the open round's stakes per spot: spectators see how much, never who."""
    assert state.phase is Phase.BETTING, state.phase
    return Transition(_advance(state), [_totals_event(totals)])


def close_betting(
    state: TableState,
    totals: BetTotals | None = None,
    entropy: Sequence[str] = (),
    rig: RandRange | None = None,
) -> Transition:
    """Close the window; the store refuses every bet from the moment this commits. `totals`,
    when given, are the round's final totals, shown just before the close.

    The close of a new shoe's first window seals it with the players' `entropy` (all the
    store accepted, in order): `shoe_sealed`, `shoe_shuffled` and the `burn` follow
    `betting_closed`, and the coup is dealt from the first card after the burn. The order is
    the committed stream's, whatever the bets. `rig` is FOR TESTS ONLY (see seal_shoe)."""
    assert state.phase is Phase.BETTING, state.phase
    events = [_totals_event(totals)] if totals is not None else []
    events.append(ev.betting_closed())
    if state.fair is None or state.fair.sealed:
        return Transition(_advance(state, phase=Phase.DEALING), events)
    fair, shoe, sealing = seal_shoe(state.fair, state.shoe_number, entropy, rig)
    events += sealing
    last_hand = shoe.is_last_hand()  # a cut card within the burn (tiny shoes, tests)
    if last_hand:
        events.append(ev.cut_card(shoe=state.shoe_number, last_round=state.round))
    changes = {"shoe": shoe, "round_start": shoe.position, "last_hand": last_hand}
    return Transition(_advance(state, phase=Phase.DEALING, fair=fair, **changes), events)


def coup_of(state: TableState) -> Coup:
    """The round's coup: fixed by the shoe's order from the round's first card, never by bets."""
    assert state.shoe is not None
    return resolve_coup(state.shoe.cards[state.round_start : state.round_start + MAX_COUP_CARDS])


def deal_next_card(state: TableState) -> Transition:
    """Deal the round's next card; the last card also emits the round's result."""
    assert state.phase is Phase.DEALING and state.shoe is not None, state.phase
    coup = coup_of(state)
    assert state.dealt < coup.cards_used, "all cards are dealt"
    hand, card = coup.deal_order[state.dealt]
    index = state.round_start + state.dealt
    shoe = Shoe(state.shoe.cards, index + 1, state.shoe.cut_index)
    events: list[EventPayload] = []
    last_hand = state.last_hand
    if index == state.shoe.cut_index and state.dealt > 0:
        # Cut card out mid-hand: finish this hand, deal one more, then a new shoe. If the
        # cards behind the cut cannot finish that one more coup, this hand is the last.
        one_more = _coup_fits(state.shoe, state.round_start + coup.cards_used)
        last_hand = last_hand or not one_more
        last_round = state.round + 1 if one_more else state.round
        events.append(ev.cut_card(shoe=state.shoe_number, last_round=last_round))
    suit = card.suit.value if card.suit else None
    salt, proof = card_proof(state.fair, state.shoe, index)
    events.append(
        ev.card(
            hand=hand.value,
            index=state.dealt,
            rank=card.rank,
            suit=suit,
            position=index,
            salt=salt,
            proof=proof,
        )
    )
    dealt = state.dealt + 1
    results, pairs = state.results, state.pairs
    if dealt == coup.cards_used:
        results += RESULT_LETTERS[coup.winner.value]
        pairs += pair_code(coup.player_pair, coup.banker_pair)
        events.append(result_event(coup))
    next_state = _advance(
        state, shoe=shoe, dealt=dealt, results=results, pairs=pairs, last_hand=last_hand
    )
    return Transition(next_state, events)


def _coup_fits(shoe: Shoe, start: int) -> bool:
    """Whether the coup starting at `start` can be completed from the cards left.

    Checked with the actual cards, not the six-card worst case, so a shoe is used to the
    end; it depends only on the shoe's order, never on the bets.
    """
    try:
        resolve_coup(shoe.cards[start : start + MAX_COUP_CARDS])
    except NotEnoughCards:
        return False
    return True


def result_event(coup: Coup) -> RoundResultPayload:
    """The `round_result` event: what the coup's cards decide."""
    return ev.round_result(
        winner=coup.winner.value,
        player_total=coup.player_total,
        banker_total=coup.banker_total,
        natural=coup.natural,
        player_pair=coup.player_pair,
        banker_pair=coup.banker_pair,
        cards_used=coup.cards_used,
        player=[str(card) for card in coup.player],
        banker=[str(card) for card in coup.banker],
    )


def result_fields(coup: Coup) -> dict[str, object]:
    """The fields of a `round_result` event but its kind (what a client checks them against)."""
    return {key: value for key, value in result_event(coup).items() if key != "kind"}


def result_letter(state: TableState) -> str:
    return RESULT_LETTERS[coup_of(state).winner.value]


def settle_round(
    state: TableState, rules: TableRules, bets: list[Bet]
) -> tuple[Transition, list[Payout]]:
    """Settle every bet of a fully dealt round against its coup."""
    payouts = settle_bets(rules.paytable, bets, _settling_coup(state))
    return round_settled(state, payouts, rules), payouts


def _settling_coup(state: TableState) -> Coup:
    assert state.phase is Phase.DEALING, state.phase
    coup = coup_of(state)
    assert state.dealt == coup.cards_used, "settling before the last card"
    return coup


def round_settled(state: TableState, payouts: list[Payout], rules: TableRules) -> Transition:
    """The transition that ends a fully dealt round, for the payouts settle_bets made of all
    its bets against its coup (settle_round in one go; the table loop in slices). When this
    round was its shoe's last, the shoe's seed is revealed (`shoe_revealed`)."""
    coup = _settling_coup(state)
    staked = sum(p.amount for p in payouts)
    paid = sum(p.credit for p in payouts)
    events: list[EventPayload] = [
        ev.round_settled(winner=coup.winner.value, bets=len(payouts), staked=staked, paid=paid)
    ]
    fair = state.fair
    assert state.shoe is not None
    if fair is not None and not fair.revealed and _new_shoe_due(state, rules, state.shoe):
        fair, revealed = reveal_shoe(fair, state.shoe_number)
        events.append(revealed)
    return Transition(_advance(state, phase=Phase.SETTLED, fair=fair), events)


def refund_bets(bets: Iterable[Bet]) -> list[Payout]:
    """Each bet's stake back, as a push: what voiding a round pays."""
    return [Payout(b.bet_id, b.player, b.spot, b.amount, Outcome.PUSH, b.amount) for b in bets]


def void_round(state: TableState, bets: list[Bet], reason: str) -> tuple[Transition, list[Payout]]:
    """Void an open or dealing round: every stake goes back exactly once."""
    refunds = refund_bets(bets)
    return round_voided(state, refunds, reason), refunds


def round_voided(state: TableState, refunds: list[Payout], reason: str) -> Transition:
    """The transition that voids an open or dealing round, for the refunds refund_bets made
    of all its bets (void_round in one go; the table loop in slices)."""
    assert state.phase in (Phase.BETTING, Phase.DEALING), state.phase
    voided = ev.round_voided(
        reason=reason, bets=len(refunds), refunded=sum(p.credit for p in refunds)
    )
    # The next round starts a fresh shoe: a voided round's cards must not be reused. This
    # one is over: its seed is revealed (sealed or not).
    events: list[EventPayload] = [voided]
    fair = state.fair
    if fair is not None and not fair.revealed:
        fair, revealed = reveal_shoe(fair, state.shoe_number)
        events.append(revealed)
    return Transition(_advance(state, phase=Phase.VOIDED, last_hand=True, fair=fair), events)


def bare_state(header: TableState) -> TableState:
    """Only what a store keeps outside its state blob (phase, round, version, shoe number):
    what a table whose blob cannot be read or stepped is restarted from. No shoe."""
    return TableState(
        header.table_id,
        phase=header.phase,
        round=header.round,
        version=header.version,
        shoe_number=header.shoe_number,
    )


def restart_table(bare: TableState, refunds: list[Payout], reason: str) -> Transition:
    """Start a table over from its bare state (see bare_state). A round being dealt is voided
    and every stake of it refunded (`refunds`: refund_bets of all its bets), once (the
    commit is fenced and versioned); a settled or voided one stays as it is. Either way the
    next round shuffles a new shoe. A round still taking bets must be closed first
    (close_betting), so that the refunds are of all its bets."""
    assert bare.shoe is None and bare.phase is not Phase.BETTING, bare.phase
    if bare.phase is Phase.DEALING:
        return round_voided(bare, refunds, reason)
    assert not refunds, "a settled or voided round has nothing left to refund"
    # No shoe: open_round shuffles a new one. Nothing to refund: the round was paid or voided.
    return Transition(_advance(bare, last_hand=True), [])
