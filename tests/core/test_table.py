"""The round state machine driven by hand: phases, versions, events, cut card, void, persistence."""

from __future__ import annotations

import itertools
import json
import random
from dataclasses import dataclass, field

import pytest

from server.core.bets import Bet, Outcome, Payout, Spot
from server.core.cards import Card, Suit
from server.core.coup import resolve_coup
from server.core.errors import BetRejected, RejectCode
from server.core.events import EventPayload as Payload
from server.core.fair import (
    ALG,
    client_seed,
    commit,
    decode_proof,
    encode_proof,
    shuffle,
    verify_card,
)
from server.core.rules import TableRules, rules_preset
from server.core.table import (
    Phase,
    TableState,
    Transition,
    close_betting,
    coup_of,
    deal_next_card,
    open_round,
    result_letter,
    settle_round,
    verify_bet_window,
    void_round,
)

WINDOW_MS = 15_000
CLASSIC = rules_preset("classic8")
# One deck with the cut card 12 from the back: a shoe lasts a handful of rounds, and 12 cards
# always leave room for the hand after a cut card that comes out mid-hand (5 + 6 <= 12).
TINY = TableRules("tiny", decks=1, cut_card_from_end=12)


@dataclass
class Step:
    name: str  # open, close, deal, settle
    before: TableState
    after: TableState
    events: list[Payload]


@dataclass
class RoundLog:
    steps: list[Step] = field(default_factory=list)
    bets: list[Bet] = field(default_factory=list)
    payouts: list[Payout] = field(default_factory=list)

    @property
    def opened(self) -> TableState:
        return self.steps[0].after

    @property
    def final(self) -> TableState:
        return self.steps[-1].after

    def kinds(self, name: str | None = None) -> list[str]:
        return [e["kind"] for s in self.steps if name in (None, s.name) for e in s.events]

    def card_events(self) -> list[Payload]:
        return [e for s in self.steps for e in s.events if e["kind"] == "card"]


def random_bets(rng: random.Random, round_no: int) -> list[Bet]:
    """Bets come from their own source so they can never steer the shoe's source."""
    return [
        Bet(f"r{round_no}b{i}", rng.choice(["ann", "bo"]), rng.choice(list(Spot)), 100 * (i + 1))
        for i in range(rng.randrange(4))
    ]


def step(log: RoundLog, name: str, before: TableState, transition: Transition) -> TableState:
    log.steps.append(Step(name, before, transition.state, transition.events))
    return transition.state


def play_round(
    state: TableState,
    rules: TableRules,
    rng: random.Random,
    bets: list[Bet] | None = None,
    now_ms: int = 0,
) -> RoundLog:
    """open -> close -> deal until the round_result event -> settle."""
    log = RoundLog(bets=list(bets or []))
    state = step(log, "open", state, open_round(state, rules, now_ms, WINDOW_MS, rng.randbytes(32)))
    state = step(log, "close", state, close_betting(state))
    while "round_result" not in log.kinds("deal"):
        state = step(log, "deal", state, deal_next_card(state))
        assert len(log.steps) < 10, "a coup never takes more than six cards"
    transition, log.payouts = settle_round(state, rules, log.bets)
    step(log, "settle", state, transition)
    return log


def play(
    rules: TableRules, seed: int, rounds: int | None = None, shoes: int | None = None
) -> list[RoundLog]:
    """Play `rounds` rounds, or until shoe number `shoes` + 1 opens (that round is dropped)."""
    rng, bet_rng = random.Random(seed), random.Random(seed + 1)
    state, logs = TableState("t1"), []
    while rounds is None or len(logs) < rounds:
        log = play_round(state, rules, rng, random_bets(bet_rng, state.round + 1))
        if shoes is not None and log.opened.shoe_number > shoes:
            break
        logs.append(log)
        state = log.final
    return logs


def card_of(ev: Payload) -> Card:
    return Card(ev["rank"], Suit(ev["suit"]) if ev["suit"] else None)


@pytest.fixture(scope="module")
def classic_logs() -> list[RoundLog]:
    """Two full 8-deck shoes with the default rules."""
    return play(CLASSIC, seed=5, shoes=2)


@pytest.fixture(scope="module")
def tiny_logs() -> list[RoundLog]:
    """Forty short one-deck shoes."""
    return play(TINY, seed=99, shoes=40)


def test_first_round_commits_then_seals_shuffles_and_burns() -> None:
    """The first open_round commits shoe 1 (its order does not exist yet) and opens round 1;
    the close of that window seals the shoe with the entropy, shuffles and burns, each card
    shown or burned with a proof against the root."""
    seed = random.Random(1).randbytes(32)
    transition = open_round(TableState("t1"), CLASSIC, 1_000, WINDOW_MS, seed)
    state, events = transition.state, transition.events
    assert events == [
        {"kind": "shoe_committed", "shoe": 1, "alg": ALG, "commitment": commit(seed)},
        {
            "kind": "round_opened",
            "closes_at": 1_000 + WINDOW_MS,
            "shoe": 1,
            "last_hand": False,
            "rules": "classic8",
        },
    ]
    assert (state.phase, state.round, state.version, state.shoe_number) == (
        Phase.BETTING,
        1,
        1,
        1,
    )
    assert state.shoe is None and state.fair is not None and not state.fair.sealed
    assert state.closes_at_ms == 1_000 + WINDOW_MS
    closing = close_betting(state, None, ["lucky 7", "hello"])
    state = closing.state
    kinds = [e["kind"] for e in closing.events]
    assert kinds == ["betting_closed", "shoe_sealed", "shoe_shuffled", "burn"]
    _, sealed, shuffled, burn = closing.events
    shoe = shuffle(seed, client_seed(["lucky 7", "hello"]), 8, (7, 7))
    assert sealed == {
        "kind": "shoe_sealed",
        "shoe": 1,
        "alg": ALG,
        "entropy": ["lucky 7", "hello"],
        "client_seed": client_seed(["lucky 7", "hello"]).hex(),
        "root": shoe.root.hex(),
        "cut_from_end": [7, 7],
        "decks": 8,
    }
    assert shuffled == {
        "kind": "shoe_shuffled",
        "shoe": 1,
        "decks": 8,
        "cut_index": 416 - 7,
        "cards": 416,
    }
    assert state.shoe is not None and state.shoe.cards == list(shoe.cards)
    assert burn["shown"] == {"rank": shoe.cards[0].rank, "suit": shoe.cards[0].suit}
    assert burn["burned"] == (shoe.cards[0].value or 10) == len(burn["burnt"])
    shown = [(0, shoe.cards[0], burn["salt"], burn["proof"])]
    for burnt in burn["burnt"]:
        face = burnt["card"]
        card = Card(face["rank"], Suit(face["suit"]) if face["suit"] else None)
        shown.append((burnt["position"], card, burnt["salt"], burnt["proof"]))
    assert [position for position, *_ in shown] == list(range(1 + burn["burned"]))
    for position, card, salt, proof in shown:
        assert card == shoe.cards[position]
        assert verify_card(shoe.root, position, card, bytes.fromhex(salt), decode_proof(proof), 416)
    assert state.round_start == state.shoe.position == 1 + burn["burned"]
    assert (state.dealt, state.results, state.last_hand) == (0, "", False)


def test_every_transition_bumps_version_by_one(classic_logs: list[RoundLog]) -> None:
    """Each transition returns a state whose version is exactly one more than before."""
    version = 0
    for log in classic_logs:
        for s in log.steps:
            assert s.before.version == version
            assert s.after.version == version + 1
            version += 1


def test_phase_sequence_and_round_numbers(classic_logs: list[RoundLog]) -> None:
    """Rounds go BETTING -> DEALING (per card) -> SETTLED, numbered 1, 2, 3, ..."""
    for number, log in enumerate(classic_logs, start=1):
        names = [s.name for s in log.steps]
        phases = [s.after.phase for s in log.steps]
        used = len(log.card_events())
        assert names == ["open", "close"] + ["deal"] * used + ["settle"]
        assert phases == [Phase.BETTING] + [Phase.DEALING] * (used + 1) + [Phase.SETTLED]
        assert {s.after.round for s in log.steps} == {number}
        assert [s.after.dealt for s in log.steps if s.name == "deal"] == list(range(1, used + 1))


def test_event_kinds_in_order(classic_logs: list[RoundLog]) -> None:
    """Events: [shuffle, burn] at a new shoe, opened, closed, cards, result, settled."""
    for log in classic_logs:
        kinds = [k for k in log.kinds() if k != "cut_card"]
        used = len(log.card_events())
        new_shoe = log.opened.shoe_number != log.steps[0].before.shoe_number
        last = log.final.last_hand
        assert kinds == [
            *(["shoe_committed"] if new_shoe else []),
            "round_opened",
            "betting_closed",
            *(["shoe_sealed", "shoe_shuffled", "burn"] if new_shoe else []),
            *["card"] * used,
            "round_result",
            "round_settled",
            *(["shoe_revealed"] if last else []),
        ]
        assert log.kinds("deal")[-1] == "round_result"
        assert 4 <= used <= 6
    assert classic_logs[0].kinds()[:2] == ["shoe_committed", "round_opened"]


def test_cards_come_from_the_shoe_in_order(classic_logs: list[RoundLog]) -> None:
    """The cards dealt are the shoe's cards from round_start on, and their coup is the result."""
    for log in classic_logs:
        state = log.final
        assert state.shoe is not None
        dealt = [card_of(ev) for ev in log.card_events()]
        start = log.steps[1].after.round_start  # a new shoe's first round starts at its seal
        assert dealt == state.shoe.cards[start : start + len(dealt)]
        assert state.shoe.position == start + len(dealt)
        coup = resolve_coup(dealt)
        assert [(h.value, c) for h, c in coup.deal_order] == [
            (ev["hand"], card_of(ev)) for ev in log.card_events()
        ]
        assert [ev["index"] for ev in log.card_events()] == list(range(len(dealt)))
        result = next(e for e in log.steps[-2].events if e["kind"] == "round_result")
        assert result["winner"] == coup.winner.value
        assert result["cards_used"] == coup.cards_used == len(dealt)
        assert (result["player_total"], result["banker_total"]) == (
            coup.player_total,
            coup.banker_total,
        )


def test_rounds_in_a_shoe_follow_each_other(classic_logs: list[RoundLog]) -> None:
    """Within a shoe each round starts at the card after the previous round's last card."""
    for prev, log in itertools.pairwise(classic_logs):
        if log.opened.shoe_number == prev.final.shoe_number:
            assert prev.final.shoe is not None
            assert log.opened.round_start == prev.final.shoe.position


def test_results_string_grows_one_letter_per_round(classic_logs: list[RoundLog]) -> None:
    """results gains the round's B/P/T letter at its last card and restarts with a new shoe."""
    letters = {"player": "P", "banker": "B", "tie": "T"}
    for log in classic_logs:
        before = log.opened.results
        result = next(e for e in log.steps[-2].events if e["kind"] == "round_result")
        assert log.final.results == before + letters[result["winner"]]
        assert result_letter(log.final) == letters[result["winner"]]
        assert len(log.final.results) == sum(
            1
            for other in classic_logs[: classic_logs.index(log) + 1]
            if other.opened.shoe_number == log.opened.shoe_number
        )


def test_pairs_grow_with_the_results(classic_logs: list[RoundLog]) -> None:
    """Each round's result adds its pair code beside its letter (Player pair 1, Banker 2,
    both 3, none 0), from the round_result's flags; a new shoe starts both afresh."""
    seen = set()
    for log in classic_logs:
        before = log.opened
        assert len(before.pairs) == len(before.results)
        result = next(e for e in log.steps[-2].events if e["kind"] == "round_result")
        code = str(int(result["player_pair"]) + 2 * int(result["banker_pair"]))
        assert log.final.pairs == before.pairs + code
        seen.add(code)
        if log.steps[0].before.shoe_number != before.shoe_number:
            assert before.pairs == before.results == ""
    assert seen == {"0", "1", "2", "3"}  # two shoes hold every kind


def test_a_state_stored_without_pairs_loads_and_lines_up_again(
    classic_logs: list[RoundLog],
) -> None:
    """A state stored before pairs were kept (or one whose pairs do not fit its results)
    reads as no pairs so far; the next result's code then sits beside its letter."""
    state = next(
        log.final for log in classic_logs if len(log.final.results) >= 3 and not log.final.last_hand
    )
    stored = state.to_dict()
    del stored["pairs"]
    old = TableState.from_dict(stored)
    assert old.pairs == "0" * len(state.results) and old.results == state.results
    for bad in ("", "0", "x" * len(state.results), None):
        assert TableState.from_dict({**stored, "pairs": bad}).pairs == old.pairs
    final = play_round(old, CLASSIC, random.Random(1)).final
    assert len(final.pairs) == len(final.results)
    assert final.pairs[: len(old.pairs)] == old.pairs


def test_settle_reports_stakes_and_payouts(classic_logs: list[RoundLog]) -> None:
    """round_settled counts the bets, their stakes and what was paid back, per the payouts."""
    for log in classic_logs:
        settled = log.steps[-1].events[0]
        assert settled["bets"] == len(log.bets) == len(log.payouts)
        assert settled["staked"] == sum(b.amount for b in log.bets)
        assert settled["paid"] == sum(p.credit for p in log.payouts)
        assert settled["winner"] == coup_of(log.final).winner.value
        assert log.steps[1].events[0] == {"kind": "betting_closed"}


def test_bets_never_change_the_cards() -> None:
    """Two tables on the same shoe seed but different bets deal identical cards."""
    rng_a, rng_b = random.Random(5), random.Random(5)
    state_a = state_b = TableState("t")
    for number in range(1, 30):
        bets = [Bet(f"b{number}", "x", Spot.BANKER, 500_000)]
        log_a = play_round(state_a, CLASSIC, rng_a, bets)
        log_b = play_round(state_b, CLASSIC, rng_b, [])
        assert log_a.card_events() == log_b.card_events()
        state_a, state_b = log_a.final, log_b.final


def test_cut_card_ends_the_shoe_after_one_more_hand(tiny_logs: list[RoundLog]) -> None:
    """One cut_card event per shoe; after it comes out the hand finishes, one more, new shoe."""
    shoes: dict[int, list[RoundLog]] = {}
    for log in tiny_logs:
        shoes.setdefault(log.opened.shoe_number, []).append(log)
    assert sorted(shoes) == list(range(1, 41))
    modes = set()
    for logs in shoes.values():
        cut_events = [
            (i, s, e)
            for i, log in enumerate(logs)
            for s in log.steps
            for e in s.events
            if e["kind"] == "cut_card"
        ]
        assert len(cut_events) == 1
        i, s, cut = cut_events[0]
        shoe = s.before.shoe or s.after.shoe
        assert shoe is not None
        if s.name == "open":
            # Cut card before the first card of a hand: that hand is the last.
            modes.add("before")
            assert s.after.round_start == shoe.cut_index
            last = i
        else:
            # Cut card out mid-hand: this hand finishes and one more is dealt.
            modes.add("mid")
            index = logs[i].card_events()[s.before.dealt]["index"]
            assert index == s.before.dealt > 0
            assert s.before.round_start + s.before.dealt == shoe.cut_index
            last = i + 1
        assert len(logs) == last + 1, "the shoe ends right after its last hand"
        assert cut["last_round"] == logs[last].opened.round
        assert [log.opened.last_hand for log in logs] == [False] * last + [True]
    assert modes == {"before", "mid"}


def test_default_rules_play_whole_shoes(classic_logs: list[RoundLog]) -> None:
    """An 8-deck shoe plays ~80 hands with one cut card; the next shoe follows its last hand."""
    shoe_one = [log for log in classic_logs if log.opened.shoe_number == 1]
    assert len(shoe_one) > 60  # ~400 cards at ~4.9 a coup
    cuts = [k for log in shoe_one for k in log.kinds() if k == "cut_card"]
    assert len(cuts) == 1
    last = shoe_one[-1].final.shoe
    assert last is not None and last.position >= last.cut_index
    assert classic_logs[len(shoe_one)].opened.shoe_number == 2


@pytest.mark.parametrize("cut", [0, 3])
def test_never_starts_a_coup_the_shoe_cannot_finish(cut: int) -> None:
    """With little or no room behind the cut card every round still completes from one shoe."""
    logs = play(TableRules("edge", decks=1, cut_card_from_end=cut), seed=3, shoes=15)
    for log in logs:
        shoe = log.final.shoe
        assert shoe is not None and shoe.position <= len(shoe.cards)
        assert len(log.card_events()) >= 4


def test_reshuffle_every_round() -> None:
    """With reshuffle_every_round each round shuffles, burns and starts a new shoe and road."""
    rules = TableRules("jog", decks=1, reshuffle_every_round=True)
    logs = play(rules, seed=11, rounds=12)
    for number, log in enumerate(logs, start=1):
        assert log.kinds("open") == ["shoe_committed", "round_opened"]
        assert log.kinds("close") == ["betting_closed", "shoe_sealed", "shoe_shuffled", "burn"]
        assert log.kinds("settle") == ["round_settled", "shoe_revealed"]
        assert log.opened.shoe_number == number
        assert len(log.final.results) == 1
    assert len({tuple(log.final.shoe.cards) for log in logs if log.final.shoe}) == 12


def test_verify_bet_window() -> None:
    """Bets are taken only in BETTING before closes_at and only for the open round."""
    idle = TableState("t")
    with pytest.raises(BetRejected) as rejected:
        verify_bet_window(idle, 1, 0)
    assert rejected.value.code is RejectCode.BETTING_CLOSED

    state = open_round(idle, TINY, 1_000, WINDOW_MS, random.Random(2).randbytes(32)).state
    verify_bet_window(state, 1, 1_000)
    verify_bet_window(state, 1, 1_000 + WINDOW_MS - 1)
    for late in (1_000 + WINDOW_MS, 10**12):
        with pytest.raises(BetRejected) as rejected:
            verify_bet_window(state, 1, late)
        assert rejected.value.code is RejectCode.BETTING_CLOSED
    for other in (0, 2, "1", None):
        with pytest.raises(BetRejected) as rejected:
            verify_bet_window(state, other, 1_000)
        assert rejected.value.code is RejectCode.WRONG_ROUND

    dealing = close_betting(state).state
    with pytest.raises(BetRejected) as rejected:
        verify_bet_window(dealing, 1, 1_000)
    assert rejected.value.code is RejectCode.BETTING_CLOSED


@pytest.mark.parametrize("dealt", [None, 0, 2, 4])
def test_void_round_refunds_every_stake_once(dealt: int | None) -> None:
    """void_round in BETTING or mid-deal refunds each bet's exact stake and forces a new shoe."""
    state = open_round(TableState("t"), TINY, 0, WINDOW_MS, random.Random(8).randbytes(32)).state
    bets = [Bet(f"b{i}", f"p{i % 2}", spot, 100 + i) for i, spot in enumerate(Spot)]
    if dealt is not None:
        state = close_betting(state).state
        for _ in range(dealt):
            state = deal_next_card(state).state
    transition, refunds = void_round(state, bets, "dealer error")
    assert transition.state.phase is Phase.VOIDED
    assert transition.state.version == state.version + 1
    assert refunds == [
        Payout(b.bet_id, b.player, b.spot, b.amount, Outcome.PUSH, b.amount) for b in bets
    ]
    assert state.fair is not None
    assert transition.events == [
        {"kind": "round_voided", "reason": "dealer error", "bets": 5, "refunded": 510},
        {"kind": "shoe_revealed", "shoe": 1, "seed": state.fair.seed.hex()},
    ]
    reopened = open_round(transition.state, TINY, 0, WINDOW_MS, random.Random(9).randbytes(32))
    assert reopened.events[0]["kind"] == "shoe_committed"
    assert reopened.state.shoe_number == 2 and reopened.state.round == 2


def test_void_round_not_allowed_after_settle(classic_logs: list[RoundLog]) -> None:
    """A settled round cannot be voided (that would refund twice)."""
    with pytest.raises(AssertionError):
        void_round(classic_logs[0].final, [], "late")


def json_round_trip(state: TableState) -> TableState:
    return TableState.from_dict(json.loads(json.dumps(state.to_dict())))


def test_state_round_trip_at_every_step(tiny_logs: list[RoundLog]) -> None:
    """to_dict/from_dict (through JSON) keeps every field and the shoe at every step."""
    states = [TableState("t1")] + [s.after for log in tiny_logs[:12] for s in log.steps]
    for state in states:
        again = json_round_trip(state)
        assert again == state  # every field except the shoe (compare=False)
        if state.shoe is None:
            assert again.shoe is None
        else:
            assert again.shoe is not None
            assert again.shoe.cards == state.shoe.cards
            assert (again.shoe.position, again.shoe.cut_index) == (
                state.shoe.position,
                state.shoe.cut_index,
            )
        assert again.dealt_cards() == state.dealt_cards()


def test_restored_state_continues_identically() -> None:
    """A successor resuming from the persisted state mid-deal deals the same cards."""
    state = open_round(TableState("t"), CLASSIC, 0, WINDOW_MS, random.Random(4).randbytes(32)).state
    state = deal_next_card(close_betting(state).state).state
    restored = json_round_trip(state)
    while state.dealt < coup_of(state).cards_used:
        a, b = deal_next_card(state), deal_next_card(restored)
        assert a.events == b.events
        state, restored = a.state, b.state


def test_dealt_cards_during_dealing() -> None:
    """dealt_cards lists the (hand, card) pairs dealt so far: none while betting, all at the end."""
    state = open_round(TableState("t"), CLASSIC, 0, WINDOW_MS, random.Random(6).randbytes(32)).state
    assert state.dealt_cards() == []
    state = close_betting(state).state
    assert state.dealt_cards() == []
    order = [(hand.value, card) for hand, card in coup_of(state).deal_order]
    for count in range(1, len(order) + 1):
        transition = deal_next_card(state)
        state = transition.state
        card_ev = next(e for e in transition.events if e["kind"] == "card")
        assert state.dealt_cards() == order[:count]
        assert (card_ev["hand"], card_of(card_ev)) == order[count - 1]
    settled = settle_round(state, CLASSIC, [])[0].state
    assert settled.dealt_cards() == order


def test_transitions_do_not_mutate_their_input() -> None:
    """Transitions are pure: the input state and its shoe are unchanged and can be replayed."""
    start = TableState("t")
    opened = open_round(start, CLASSIC, 0, WINDOW_MS, random.Random(3).randbytes(32)).state
    assert opened.shoe is None and opened.fair is not None
    dealing = close_betting(opened).state
    assert opened.shoe is None and not opened.fair.sealed
    assert dealing.shoe is not None
    position = dealing.shoe.position
    first, second = deal_next_card(dealing), deal_next_card(dealing)
    assert first.events == second.events and first.state == second.state
    assert dealing.shoe.position == position
    assert start.shoe is None and start.version == 0


def test_transitions_refuse_the_wrong_phase(classic_logs: list[RoundLog]) -> None:
    """Out-of-order transitions are bugs and fail an assertion."""
    log = classic_logs[0]
    betting, settled = log.opened, log.final
    dealing_first = log.steps[2].before  # dealing, no card yet
    dealing_done = log.steps[-1].before  # every card dealt, not settled
    rng = random.Random(0)
    with pytest.raises(AssertionError):
        open_round(betting, CLASSIC, 0, WINDOW_MS, rng.randbytes(32))
    with pytest.raises(AssertionError):
        close_betting(settled)
    with pytest.raises(AssertionError):
        deal_next_card(betting)
    with pytest.raises(AssertionError):
        deal_next_card(dealing_done)
    with pytest.raises(AssertionError):
        settle_round(dealing_first, CLASSIC, [])
    with pytest.raises(AssertionError):
        settle_round(betting, CLASSIC, [])


def test_cut_card_announcement_holds_with_default_rules() -> None:
    """With classic8, the round a cut_card event names as last is the shoe's last round dealt."""
    logs = play(CLASSIC, seed=1, shoes=5)
    last_round: dict[int, int] = {}
    announced: dict[int, int] = {}
    for log in logs:
        shoe = log.opened.shoe_number
        last_round[shoe] = log.opened.round
        for ev in (e for s in log.steps for e in s.events if e["kind"] == "cut_card"):
            announced[shoe] = ev["last_round"]
    assert announced == last_round


def test_a_seed_used_with_other_rules_gives_that_rules_shoe() -> None:
    """Seals are computed once per shoe and node and kept: the same seed under other rules
    (another number of decks or cut card) still gets the shoe those rules fix."""
    seed = random.Random(12).randbytes(32)
    for rules in (CLASSIC, TINY, CLASSIC):
        state = close_betting(open_round(TableState("t"), rules, 0, WINDOW_MS, seed).state).state
        expected = shuffle(seed, client_seed([]), rules.decks, (rules.cut_card_from_end,) * 2)
        assert state.shoe is not None and state.shoe.cards == list(expected.cards)
        card = deal_next_card(state).events[-1]
        assert card["kind"] == "card" and card["position"] == expected.first_dealt
        proof = expected.proof(expected.first_dealt)
        assert (card["salt"], card["proof"]) == (proof.salt.hex(), encode_proof(proof.path))
