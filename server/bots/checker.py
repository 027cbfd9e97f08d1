"""The round checker: feed it one connection's messages about one table, it says what is wrong.

Pure (no I/O, no clock): it keeps the last seq seen and the cards of each round in the order
they arrived, and checks from the events alone, with the game core, that

* seqs follow one another (a jump is a gap, a repeat a duplicate),
* each `card` comes at the next index, for the hand the tableau says, and is a real card,
* `round_result` says what the cards say (totals, winner, natural, pairs, hands) and comes
  exactly when the coup is complete,
* `round_settled` names the same winner and, when the round's stakes were seen (the last
  `bet_totals`), the same number of bets and total stake,
* a `burn` burns as many cards as the shown card says.

Rounds it did not see from their first card (joined mid-round without the cards, or after a
gap) are not judged: `unchecked` counts them.
"""

from __future__ import annotations

from collections import OrderedDict
from collections.abc import Mapping
from dataclasses import dataclass, field
from enum import StrEnum
from typing import Any

from server.core.cards import RANKS, Card, Suit, card_value
from server.core.coup import Coup, resolve_coup
from server.core.errors import NotEnoughCards
from server.core.table import result_fields

__all__ = ["Problem", "ProblemKind", "RoundView", "TableChecker", "card_from_map"]

KEEP_ROUNDS = 32  # rounds remembered per table: settlements may come a little after the round

Message = Mapping[str, Any]


class ProblemKind(StrEnum):
    MISMATCH = "mismatch"  # something the rules or the bot's own books contradict
    GAP = "gap"  # a seq jumped: events were missed
    DUPLICATE = "duplicate"  # a seq came again
    CONNECT = "connect"  # bots that could not connect, and the reason the server gave


@dataclass(frozen=True, slots=True)
class Problem:
    kind: ProblemKind
    table: str
    detail: str

    def to_dict(self) -> dict[str, str]:
        return {"kind": self.kind.value, "table": self.table, "detail": self.detail}


@dataclass(slots=True)
class RoundView:
    """One round as this connection saw it."""

    round: int
    complete: bool  # every card of the round is known (seen from the start or in a snapshot)
    cards: list[tuple[str, Card]] = field(default_factory=list)
    coup: Coup | None = None  # resolved from the received cards at round_result
    result_seen: bool = False
    voided: bool = False
    settled: bool = False
    opened: bool = False  # saw round_opened: the round was seen from its start
    totals: dict[str, int] | None = None  # the last bet_totals (or the snapshot's)
    totals_bets: int | None = None


def card_from_map(message: Message) -> Card | None:
    """A card from a map's `rank` and `suit` (a card event, a burn's shown card), or None."""
    rank, suit = message.get("rank"), message.get("suit")
    if rank not in RANKS or (suit is not None and suit not in Suit._value2member_map_):
        return None
    return Card(rank, Suit(suit) if suit is not None else None)


class TableChecker:
    """Everything one connection checks about one table's stream."""

    def __init__(self, table: str) -> None:
        self.table = table
        self.last_seq: int | None = None
        self.epoch: str | None = None
        self.live = False  # between `joined` and the next (re)join: events are live
        self.rounds: OrderedDict[int, RoundView] = OrderedDict()
        self.checked = 0  # rounds whose result was judged
        self.unchecked = 0  # results seen without all the round's cards
        self.resyncs = 0  # snapshots with recovered: false
        self.missed_events = 0  # events skipped over by gaps
        self.completed = 0  # rounds ended (settled/voided) that were seen from round_opened

    # --- helpers ----------------------------------------------------------------------------
    def _problem(self, kind: ProblemKind, detail: str) -> Problem:
        return Problem(kind, self.table, detail)

    def _mismatch(self, round_no: object, detail: str) -> Problem:
        return self._problem(ProblemKind.MISMATCH, f"round {round_no}: {detail}")

    def _view(self, round_no: int, complete: bool) -> RoundView:
        view = self.rounds.get(round_no)
        if view is None:
            view = self.rounds[round_no] = RoundView(round_no, complete)
            while len(self.rounds) > KEEP_ROUNDS:
                self.rounds.popitem(last=False)
        return view

    def view(self, round_no: int) -> RoundView | None:
        return self.rounds.get(round_no)

    # --- join answers ---------------------------------------------------------------------
    def on_join_sent(self) -> None:
        self.live = False  # catch-up events until `joined`

    def on_snapshot(self, message: Message) -> list[Problem]:
        """A snapshot replaces what came before: seq, epoch and the current round."""
        if message.get("recovered") is False:
            self.resyncs += 1
        self.last_seq = int(message["seq"])
        self.epoch = message.get("epoch", self.epoch)
        round_no, phase = message.get("round", 0), message.get("phase")
        if phase in ("betting", "dealing", "settled"):
            self.rounds.pop(round_no, None)
            view = self._view(round_no, complete=True)
            problems = []
            for index, shown in enumerate(message.get("cards") or []):
                card = card_from_map(shown)
                if card is None:
                    problems.append(self._mismatch(round_no, f"snapshot card {index} {shown!r}"))
                    view.complete = False
                else:
                    view.cards.append((str(shown.get("hand")), card))
            view.settled = phase == "settled"
            view.result_seen = phase == "settled"
            if isinstance(message.get("totals"), dict):
                view.totals = dict(message["totals"])  # its bet count is not given
                view.totals_bets = None
            return problems
        return []

    def on_joined(self, message: Message) -> list[Problem]:
        self.epoch = message.get("epoch", self.epoch)
        self.live = True
        seq = message.get("seq")
        if self.last_seq is not None and seq != self.last_seq:
            kind = ProblemKind.GAP if isinstance(seq, int) and seq > self.last_seq else None
            detail = f"joined at seq {seq} after seq {self.last_seq}"
            if kind is ProblemKind.GAP:
                assert isinstance(seq, int)
                self.missed_events += seq - self.last_seq
                self.last_seq = seq
                for view in self.rounds.values():
                    view.complete = False
                return [self._problem(ProblemKind.GAP, detail)]
            return [self._problem(ProblemKind.MISMATCH, detail)]
        if self.last_seq is None and isinstance(seq, int):
            self.last_seq = seq
        return []

    # --- events -----------------------------------------------------------------------------
    def on_event(self, event: Message) -> list[Problem]:
        """Check one table event; a duplicate is reported and otherwise ignored."""
        seq = event.get("seq")
        if not isinstance(seq, int) or not isinstance(event.get("round"), int):
            return [self._mismatch(event.get("round"), f"event without int seq/round: {event!r}")]
        problems: list[Problem] = []
        if self.last_seq is not None:
            if seq <= self.last_seq:
                return [self._problem(ProblemKind.DUPLICATE, f"seq {seq} after {self.last_seq}")]
            if seq > self.last_seq + 1:
                self.missed_events += seq - self.last_seq - 1
                problems.append(self._problem(ProblemKind.GAP, f"seq {seq} after {self.last_seq}"))
                for view in self.rounds.values():
                    view.complete = False  # what was missed may hold cards or stakes
        self.last_seq = seq
        handler = _HANDLERS.get(str(event.get("kind")))
        if handler is not None:
            problems += handler(self, event)
        return problems

    def _opened(self, event: Message) -> list[Problem]:
        self.rounds.pop(event["round"], None)
        view = self._view(event["round"], complete=True)
        view.opened = True
        return []

    def _bet_totals(self, event: Message) -> list[Problem]:
        view = self._view(event["round"], complete=False)
        totals = event.get("totals")
        if not isinstance(totals, dict) or not all(
            type(v) is int and v >= 0 for v in totals.values()
        ):
            return [self._mismatch(event["round"], f"bet_totals totals {totals!r}")]
        view.totals = dict(totals)
        view.totals_bets = event.get("bets")
        return []

    def _burn(self, event: Message) -> list[Problem]:
        shown = event.get("shown")
        card = card_from_map(shown) if isinstance(shown, dict) else None
        if card is None:
            return [self._mismatch(event["round"], f"burn shows {shown!r}")]
        expected = card_value(card.rank) or 10  # 10, J, Q, K burn 10
        if event.get("burned") != expected:
            detail = f"burn shows {card} but burns {event.get('burned')}, not {expected}"
            return [self._mismatch(event["round"], detail)]
        return []

    def _card_dealt(self, event: Message) -> list[Problem]:
        round_no = event["round"]
        view = self._view(round_no, complete=False)
        card = card_from_map(event)
        if card is None:
            view.complete = False
            return [self._mismatch(round_no, f"not a card: {event.get('rank')!r}")]
        problems = []
        if view.result_seen:
            problems.append(self._mismatch(round_no, f"card {card} after round_result"))
        if view.complete and event.get("index") != len(view.cards):
            detail = f"card index {event.get('index')}, expected {len(view.cards)}"
            problems.append(self._mismatch(round_no, detail))
        view.cards.append((str(event.get("hand")), card))
        return problems

    def _result(self, event: Message) -> list[Problem]:
        round_no = event["round"]
        view = self._view(round_no, complete=False)
        view.result_seen = True
        if not view.complete:
            self.unchecked += 1
            return []
        self.checked += 1
        cards = [card for _, card in view.cards]
        try:
            coup = resolve_coup(cards)
        except NotEnoughCards:
            return [self._mismatch(round_no, f"round_result after only {len(cards)} cards")]
        view.coup = coup
        problems = []
        if coup.cards_used != len(cards):
            detail = f"{len(cards)} cards dealt, the coup uses {coup.cards_used}"
            problems.append(self._mismatch(round_no, detail))
        hands = [hand for hand, _ in view.cards[: coup.cards_used]]
        if hands != [hand.value for hand, _ in coup.deal_order]:
            problems.append(self._mismatch(round_no, f"cards dealt to hands {hands}"))
        expected = result_fields(coup)
        for name, value in expected.items():
            if event.get(name) != value:
                detail = f"round_result {name} {event.get(name)!r}, the cards say {value!r}"
                problems.append(self._mismatch(round_no, detail))
        return problems

    def _settled(self, event: Message) -> list[Problem]:
        round_no = event["round"]
        view = self._view(round_no, complete=False)
        view.settled = True
        self.completed += view.opened
        problems = []
        if view.coup is not None and event.get("winner") != view.coup.winner.value:
            detail = f"round_settled winner {event.get('winner')!r}, cards say {view.coup.winner}"
            problems.append(self._mismatch(round_no, detail))
        problems += self._stakes(view, event)
        return problems

    def _stakes(self, view: RoundView, event: Message) -> list[Problem]:
        """The round's total stake and bet count, as the last `bet_totals` said them."""
        if view.totals is None:
            return []
        staked, bets = sum(view.totals.values()), view.totals_bets
        problems = []
        if event.get("staked") != staked:
            detail = f"round_settled staked {event.get('staked')!r}, the bets seen add to {staked}"
            problems.append(self._mismatch(view.round, detail))
        if bets is not None and event.get("bets") != bets:
            detail = f"round_settled bets {event.get('bets')!r}, {bets} seen"
            problems.append(self._mismatch(view.round, detail))
        return problems

    def _voided(self, event: Message) -> list[Problem]:
        view = self._view(event["round"], complete=False)
        view.voided = True
        view.settled = True
        self.completed += view.opened
        return []


_HANDLERS = {
    "round_opened": TableChecker._opened,
    "bet_totals": TableChecker._bet_totals,
    "burn": TableChecker._burn,
    "card": TableChecker._card_dealt,
    "round_result": TableChecker._result,
    "round_settled": TableChecker._settled,
    "round_voided": TableChecker._voided,
}
