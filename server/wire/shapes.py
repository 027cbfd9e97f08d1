"""Every server-to-client message and every table event, as typed shapes: the protocol's one
definition (docs/protocol.md describes these; mypy checks the code that builds them).

Each shape is a TypedDict whose keys are in wire order; the constructor functions below build
them, so the store, the hub and the session pass typed values and only the codec turns them
into bytes. Optional keys live in a `total=False` subclass (not NotRequired) because Python
3.11 cannot see NotRequired through `from __future__ import annotations`, and the runtime
checker (server/wire/shape_check.py) reads `__required_keys__`.

A table event is an envelope (type, table, seq, round, ts) followed by a payload that starts
with `kind`. Each payload is defined and built in the core (server/core/events.py, re-exported
here); server/wire/envelope.py puts the envelope in front of it when a store appends it.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping, Sequence
from typing import Any, Literal, TypedDict, cast

from server.core.bets import Bet, Payout
from server.core.cards import Card
from server.core.coup import Hand
from server.core.events import (
    BettingClosedPayload,
    BetTotalsPayload,
    BurnPayload,
    CardFace,
    CardPayload,
    CutCardPayload,
    EventPayload,
    HandName,
    RoundOpenedPayload,
    RoundResultPayload,
    RoundSettledPayload,
    RoundVoidedPayload,
    ShoeShuffledPayload,
    TablePausedPayload,
    TableResumedPayload,
    WinnerName,
)
from server.core.roads import Roads, build_roads
from server.core.rules import TableRules
from server.core.table import Phase, TableState

__all__ = [
    "EVENTS",
    "EVENT_PAYLOADS",
    "SERVER_MESSAGES",
    "BeadCell",
    "BetAccepted",
    "BetRejected",
    "BetTotalsEvent",
    "BetTotalsPayload",
    "BetView",
    "BettingClosedEvent",
    "BettingClosedPayload",
    "BigRoadCell",
    "BurnEvent",
    "BurnPayload",
    "CardEvent",
    "CardFace",
    "CardPayload",
    "CardView",
    "CutCardEvent",
    "CutCardPayload",
    "Error",
    "EventPayload",
    "HandTotals",
    "History",
    "HistoryRound",
    "Joined",
    "Left",
    "PayoutView",
    "Pong",
    "Replay",
    "RoadsView",
    "RoleName",
    "RoundOpenedEvent",
    "RoundOpenedPayload",
    "RoundResultEvent",
    "RoundResultPayload",
    "RoundSettledEvent",
    "RoundSettledPayload",
    "RoundVoidedEvent",
    "RoundVoidedPayload",
    "RulesView",
    "ServerMessage",
    "Settlement",
    "ShoeShuffledEvent",
    "ShoeShuffledPayload",
    "Snapshot",
    "TableEvent",
    "TableInfo",
    "TablePausedEvent",
    "TablePausedPayload",
    "TableResumedEvent",
    "TableResumedPayload",
    "Welcome",
    "bet_accepted",
    "bet_rejected",
    "bet_view",
    "card_view",
    "error",
    "history",
    "history_round",
    "joined",
    "left",
    "payout_view",
    "pong",
    "recalled_round",
    "replay",
    "roads_view",
    "rules_view",
    "settlement",
    "snapshot",
    "table_info",
    "time_left_ms",
    "welcome",
]

RoleName = Literal["player", "spectator", "operator"]
PhaseName = Literal["idle", "betting", "dealing", "settled", "voided"]
SpotName = Literal["player", "banker", "tie", "player_pair", "banker_pair"]
OutcomeName = Literal["win", "lose", "push"]
MarkName = Literal["red", "blue"]
Ref = str | int  # an echoed client ref: see wire.messages.echo_ref

# --- pieces ------------------------------------------------------------------------------------


class RulesView(TypedDict):
    name: str  # the rules' key (the preset's): what round_opened.rules says
    title: str  # the table's name for players
    decks: int
    cut_card_from_end: int
    reshuffle_every_round: bool
    banker_commission_bp: int
    no_commission: bool
    tie_pays: int
    pair_pays: int
    limits: dict[str, list[int]]  # spot -> [minimum, maximum]
    description: str


class _TableId(TypedDict):
    id: str


class TableInfo(_TableId, RulesView):
    """welcome.tables[]: the table id, then its rules."""


class CardView(TypedDict):
    hand: HandName
    rank: str
    suit: str | None


class BeadCell(TypedDict):
    row: int
    col: int
    winner: WinnerName
    player_pair: bool  # the coup's first two Player cards were of one rank
    banker_pair: bool


class BigRoadCell(TypedDict):
    row: int
    col: int
    winner: WinnerName
    ties: int
    player_pair: bool  # the decision's coup (not its ties') had a Player pair
    banker_pair: bool


class RoadsView(TypedDict):
    bead_plate: list[BeadCell]
    big_road: list[BigRoadCell]
    big_eye_boy: list[MarkName]
    small_road: list[MarkName]
    cockroach_pig: list[MarkName]


class BetView(TypedDict):
    bet_id: str
    spot: SpotName
    amount: int


class PayoutView(TypedDict):
    bet_id: str
    spot: SpotName
    amount: int
    outcome: OutcomeName
    credit: int


class HandTotals(TypedDict):
    player: int
    banker: int


# --- table events ------------------------------------------------------------------------------


class _Envelope(TypedDict):
    type: Literal["event"]
    table: str
    seq: int  # 1, 2, 3, ... per table, no gaps
    round: int
    ts: int  # ms, the store's clock


class ShoeShuffledEvent(_Envelope, ShoeShuffledPayload): ...


class BurnEvent(_Envelope, BurnPayload): ...


class CutCardEvent(_Envelope, CutCardPayload): ...


class RoundOpenedEvent(_Envelope, RoundOpenedPayload): ...


class BetTotalsEvent(_Envelope, BetTotalsPayload): ...


class BettingClosedEvent(_Envelope, BettingClosedPayload): ...


class CardEvent(_Envelope, CardPayload): ...


class RoundResultEvent(_Envelope, RoundResultPayload): ...


class RoundSettledEvent(_Envelope, RoundSettledPayload): ...


class RoundVoidedEvent(_Envelope, RoundVoidedPayload): ...


class TablePausedEvent(_Envelope, TablePausedPayload): ...


class TableResumedEvent(_Envelope, TableResumedPayload): ...


TableEvent = (
    ShoeShuffledEvent
    | BurnEvent
    | CutCardEvent
    | RoundOpenedEvent
    | BetTotalsEvent
    | BettingClosedEvent
    | CardEvent
    | RoundResultEvent
    | RoundSettledEvent
    | RoundVoidedEvent
    | TablePausedEvent
    | TableResumedEvent
)

# --- server messages ---------------------------------------------------------------------------


class _Welcome(TypedDict):
    type: Literal["welcome"]
    player: str | None  # None for an anonymous spectator
    name: str | None  # the display name the token gives; None for an anonymous spectator
    balance: int | None  # None for a spectator (no wallet)
    tables: list[TableInfo]
    encoding: str
    node: str
    role: RoleName


class Welcome(_Welcome, total=False):
    token: str  # demo/guest mode: a signed guest token to reconnect as the same player


class _Snapshot(TypedDict):
    type: Literal["snapshot"]
    table: str
    seq: int  # the last event the state includes
    epoch: str  # the event history's epoch; changes when the history is recreated
    phase: PhaseName
    round: int
    closes_at: int
    time_left_ms: int
    cards: list[CardView]
    shoe: int
    last_hand: bool
    paused: bool  # an operator paused the table: no round opens until table_resumed
    results: str
    roads: RoadsView
    bets: list[BetView]  # this player's bets this round
    totals: dict[str, int]  # everyone's stakes this round, per spot with money on it
    bettors: int
    balance: int | None  # None for a spectator
    rules: RulesView


class Snapshot(_Snapshot, total=False):
    recovered: bool  # only on a join with `since`: False = that since could not be served


class Joined(TypedDict):
    type: Literal["joined"]
    table: str
    seq: int
    epoch: str


class Left(TypedDict):
    type: Literal["left"]
    table: str


class Pong(TypedDict):
    type: Literal["pong"]
    ref: Ref | None
    ts: int


class _Error(TypedDict):
    type: Literal["error"]
    code: str
    message: str


class Error(_Error, total=False):
    ref: Ref


class BetAccepted(TypedDict):
    type: Literal["bet_accepted"]
    table: str
    round: int
    bet_id: str
    spot: str
    amount: int
    balance: int


class BetRejected(TypedDict):
    type: Literal["bet_rejected"]
    bet_id: str
    table: str
    code: str
    message: str


class Settlement(TypedDict):
    type: Literal["settlement"]
    table: str
    round: int
    payouts: list[PayoutView]
    balance: int


class Replay(TypedDict):
    type: Literal["replay"]
    table: str
    round: int
    events: list[TableEvent]  # at most --max-replay-events, oldest first
    more: bool  # the round has more events: ask again with `after` = the last seq here


class HistoryRound(TypedDict):
    table: str
    round: int
    time: int  # ms, when the round was settled (or voided)
    bets: list[BetView]
    cards: list[CardView]  # every card, in deal order
    totals: HandTotals  # the hands' point totals
    winner: WinnerName | None  # None: the round was voided (every bet a push)
    payouts: list[PayoutView]
    balance_after: int


class History(TypedDict):
    type: Literal["history"]
    rounds: list[HistoryRound]  # newest first


ServerMessage = (
    Welcome
    | Snapshot
    | Joined
    | Left
    | Pong
    | Error
    | BetAccepted
    | BetRejected
    | Settlement
    | Replay
    | History
    | TableEvent
)

# The shape of each message by its `type`, and of each event by its `kind`.
SERVER_MESSAGES: dict[str, type] = {
    "welcome": Welcome,
    "snapshot": Snapshot,
    "joined": Joined,
    "left": Left,
    "pong": Pong,
    "error": Error,
    "bet_accepted": BetAccepted,
    "bet_rejected": BetRejected,
    "settlement": Settlement,
    "replay": Replay,
    "history": History,
}
EVENTS: dict[str, type] = {
    "shoe_shuffled": ShoeShuffledEvent,
    "burn": BurnEvent,
    "cut_card": CutCardEvent,
    "round_opened": RoundOpenedEvent,
    "bet_totals": BetTotalsEvent,
    "betting_closed": BettingClosedEvent,
    "card": CardEvent,
    "round_result": RoundResultEvent,
    "round_settled": RoundSettledEvent,
    "round_voided": RoundVoidedEvent,
    "table_paused": TablePausedEvent,
    "table_resumed": TableResumedEvent,
}
EVENT_PAYLOADS: dict[str, type] = {
    "shoe_shuffled": ShoeShuffledPayload,
    "burn": BurnPayload,
    "cut_card": CutCardPayload,
    "round_opened": RoundOpenedPayload,
    "bet_totals": BetTotalsPayload,
    "betting_closed": BettingClosedPayload,
    "card": CardPayload,
    "round_result": RoundResultPayload,
    "round_settled": RoundSettledPayload,
    "round_voided": RoundVoidedPayload,
    "table_paused": TablePausedPayload,
    "table_resumed": TableResumedPayload,
}

# --- constructors: pieces ----------------------------------------------------------------------


def rules_view(rules: TableRules) -> RulesView:
    return {
        "name": rules.name,
        "title": rules.title,
        "decks": rules.decks,
        "cut_card_from_end": rules.cut_card_from_end,
        "reshuffle_every_round": rules.reshuffle_every_round,
        "banker_commission_bp": rules.paytable.banker_commission_bp,
        "no_commission": rules.paytable.no_commission,
        "tie_pays": rules.paytable.tie_pays,
        "pair_pays": rules.paytable.pair_pays,
        "limits": {
            spot.value: [limit.minimum, limit.maximum] for spot, limit in rules.limits.spots.items()
        },
        "description": rules.description,
    }


def table_info(table_id: str, rules: TableRules) -> TableInfo:
    return {"id": table_id, **rules_view(rules)}


def card_view(hand: str, card: Card) -> CardView:
    """One dealt card; `hand` may be a core Hand or its value (the wire gets the plain value)."""
    return {"hand": Hand(hand).value, **_face(card)}


def _face(card: Card) -> CardFace:
    return {"rank": card.rank, "suit": card.suit.value if card.suit else None}


def roads_view(roads: Roads) -> RoadsView:
    return cast(RoadsView, roads.to_dict())  # Roads.to_dict is this shape, cell for cell


def bet_view(bet: Bet) -> BetView:
    return {"bet_id": bet.bet_id, "spot": bet.spot.value, "amount": bet.amount}


def payout_view(payout: Payout) -> PayoutView:
    return cast(PayoutView, payout.to_dict())


# --- constructors: messages --------------------------------------------------------------------


def welcome(
    player: str | None,
    balance: int | None,
    tables: Mapping[str, TableRules],
    encoding: str,
    node: str,
    role: RoleName,
    token: str | None = None,
    name: str | None = None,
) -> Welcome:
    message: Welcome = {
        "type": "welcome",
        "player": player,
        "name": name,
        "balance": balance,
        "tables": [table_info(table_id, rules) for table_id, rules in tables.items()],
        "encoding": encoding,
        "node": node,
        "role": role,
    }
    if token is not None:
        message["token"] = token
    return message


def time_left_ms(state: TableState, now_ms: int) -> int:
    """What is left of the betting window at `now_ms` (0 outside it)."""
    if state.phase is not Phase.BETTING:
        return 0
    return max(0, state.closes_at_ms - now_ms)


def snapshot(
    table: str,
    seq: int,
    epoch: str,
    state: TableState,
    now_ms: int,
    rules: TableRules,
    bets: Iterable[Bet] = (),
    totals: Mapping[str, int] | None = None,
    bettors: int = 0,
    balance: int | None = None,
    recovered: bool | None = None,
) -> Snapshot:
    """A table's state for one connection: `bets` and `balance` are that player's."""
    message: Snapshot = {
        "type": "snapshot",
        "table": table,
        "seq": seq,
        "epoch": epoch,
        "phase": state.phase.value,
        "round": state.round,
        "closes_at": state.closes_at_ms,
        "time_left_ms": time_left_ms(state, now_ms),
        "cards": [card_view(hand, card) for hand, card in state.dealt_cards()],
        "shoe": state.shoe_number,
        "last_hand": state.last_hand,
        "paused": state.paused,
        "results": state.results,
        "roads": roads_view(build_roads(state.results, state.pairs)),
        "bets": [bet_view(bet) for bet in bets],
        "totals": dict(totals or {}),
        "bettors": bettors,
        "balance": balance,
        "rules": rules_view(rules),
    }
    if recovered is not None:
        message["recovered"] = recovered
    return message


def joined(table: str, seq: int, epoch: str) -> Joined:
    return {"type": "joined", "table": table, "seq": seq, "epoch": epoch}


def left(table: str) -> Left:
    return {"type": "left", "table": table}


def pong(ref: Ref | None, ts: int) -> Pong:
    return {"type": "pong", "ref": ref, "ts": ts}


def error(code: str, message: str, ref: Ref | None = None) -> Error:
    reply: Error = {"type": "error", "code": code, "message": message}
    if ref is not None:
        reply["ref"] = ref
    return reply


def bet_accepted(
    table: str, round_no: int, bet_id: str, spot: str, amount: int, balance: int
) -> BetAccepted:
    return {
        "type": "bet_accepted",
        "table": table,
        "round": round_no,
        "bet_id": bet_id,
        "spot": spot,
        "amount": amount,
        "balance": balance,
    }


def bet_rejected(bet_id: str, table: str, code: str, message: str) -> BetRejected:
    return {
        "type": "bet_rejected",
        "bet_id": bet_id,
        "table": table,
        "code": code,
        "message": message,
    }


def settlement(
    table: str, round_no: int, payouts: Sequence[PayoutView], balance: int
) -> Settlement:
    return {
        "type": "settlement",
        "table": table,
        "round": round_no,
        "payouts": list(payouts),
        "balance": balance,
    }


def replay(table: str, round_no: int, events: Sequence[TableEvent], more: bool) -> Replay:
    return {
        "type": "replay",
        "table": table,
        "round": round_no,
        "events": list(events),
        "more": more,
    }


def history_round(
    table: str,
    round_no: int,
    time_ms: int,
    bets: Iterable[Bet],
    cards: Iterable[tuple[str, Card]],
    totals: HandTotals,
    winner: WinnerName | None,
    payouts: Sequence[PayoutView],
    balance_after: int,
) -> HistoryRound:
    return {
        "table": table,
        "round": round_no,
        "time": time_ms,
        "bets": [bet_view(bet) for bet in bets],
        "cards": [card_view(hand, card) for hand, card in cards],
        "totals": totals,
        "winner": winner,
        "payouts": list(payouts),
        "balance_after": balance_after,
    }


def recalled_round(record: Mapping[str, Any]) -> HistoryRound:
    """A store's game-recall record (Wallet.history) as the wire shows it: the hands' totals
    in one map (0 and 0 for a voided round, whose winner is None)."""
    return {
        "table": record["table"],
        "round": record["round"],
        "time": record["time"],
        "bets": list(record["bets"]),
        "cards": list(record["cards"]),
        "totals": {
            "player": record["player_total"] or 0,
            "banker": record["banker_total"] or 0,
        },
        "winner": record["winner"],
        "payouts": list(record["payouts"]),
        "balance_after": record["balance_after"],
    }


def history(rounds: Sequence[HistoryRound]) -> History:
    return {"type": "history", "rounds": list(rounds)}
