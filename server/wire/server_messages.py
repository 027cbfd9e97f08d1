"""Every message the server sends a client but the table events (server/wire/table_events.py),
as typed shapes, and the functions that build them: the store, the hub and the session pass
these typed values, and only the codec turns them into bytes.

Each shape is a TypedDict whose keys are in wire order. Optional keys live in a `total=False`
subclass (not NotRequired) because Python 3.11 cannot see NotRequired through `from __future__
import annotations`, and the run-time checker (server/wire/shape_check.py) reads
`__required_keys__`. server/wire/shapes.py is the protocol's index of them.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping, Sequence
from typing import Any, Literal, TypedDict

from server.core.bets import Bet
from server.core.cards import Card
from server.core.events import WinnerName
from server.core.roads import build_roads
from server.core.rules import TableRules
from server.core.table import Phase, TableState
from server.wire.pieces import (
    BetView,
    CardView,
    FairView,
    HandTotals,
    PayoutView,
    RoadsView,
    RulesView,
    TableInfo,
    bet_view,
    card_view,
    fair_view,
    roads_view,
    rules_view,
    table_info,
)
from server.wire.table_events import TableEvent

__all__ = [
    "SERVER_MESSAGES",
    "Balance",
    "BetAccepted",
    "BetRejected",
    "Error",
    "History",
    "HistoryRound",
    "Joined",
    "Left",
    "PhaseName",
    "Pong",
    "Ref",
    "Replay",
    "RoleName",
    "ServerMessage",
    "Settlement",
    "Snapshot",
    "Welcome",
    "balance",
    "bet_accepted",
    "bet_rejected",
    "error",
    "history",
    "history_round",
    "joined",
    "left",
    "pong",
    "recalled_round",
    "replay",
    "settlement",
    "snapshot",
    "time_left_ms",
    "welcome",
]

RoleName = Literal["player", "spectator", "operator"]
PhaseName = Literal["idle", "betting", "dealing", "settled", "voided"]
Ref = str | int  # an echoed client ref: see wire.messages.echo_ref


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
    fair: FairView | None  # the current shoe's commitment and public proofs (docs/fairness.md)


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


class Balance(TypedDict):
    """The player's balance as its operator's wallet acknowledged a credit or cancel."""

    type: Literal["balance"]
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
    | Balance
    | Replay
    | History
    | TableEvent
)

# The shape of each message by its `type`.
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
    "balance": Balance,
    "replay": Replay,
    "history": History,
}


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
        "fair": _fair(state),
    }
    if recovered is not None:
        message["recovered"] = recovered
    return message


def _fair(state: TableState) -> FairView | None:
    """snapshot.fair: the proofs are of the round's cards dealt so far (snapshot.cards)."""
    dealt = len(state.dealt_cards())
    return fair_view(state.shoe_number, state.fair, state.shoe, state.round_start, dealt)


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


def balance(amount: int) -> Balance:
    return {"type": "balance", "balance": amount}


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
