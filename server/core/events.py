"""Table event kinds and their payloads (past tense: what happened), one typed definition each.

A payload is a TypedDict whose keys are in wire order, built only by the constructor of its
kind below (keyword-only, so every call site names each field): mypy --strict then refuses a
field the definition does not have, or one it misses, wherever an event is built. They are
plain dicts at run time, so the codec encodes them as they are. The wire adds the envelope
(type, table, seq, round, ts: server/wire/envelope.py) when the store appends the event, and
server/wire/shapes.py declares each event as that envelope followed by its payload.

Optional keys would live in a `total=False` subclass (not NotRequired) because Python 3.11
cannot see NotRequired through `from __future__ import annotations`; no payload has one.
"""

from __future__ import annotations

from collections.abc import Mapping
from enum import StrEnum
from typing import Literal, TypedDict

__all__ = [
    "BetTotalsPayload",
    "BettingClosedPayload",
    "BurnPayload",
    "CardFace",
    "CardPayload",
    "CutCardPayload",
    "EventKind",
    "EventPayload",
    "HandName",
    "RoundOpenedPayload",
    "RoundResultPayload",
    "RoundSettledPayload",
    "RoundVoidedPayload",
    "ShoeShuffledPayload",
    "TablePausedPayload",
    "TableResumedPayload",
    "WinnerName",
    "bet_totals",
    "betting_closed",
    "burn",
    "card",
    "cut_card",
    "round_opened",
    "round_result",
    "round_settled",
    "round_voided",
    "shoe_shuffled",
    "table_paused",
    "table_resumed",
]

HandName = Literal["player", "banker"]
WinnerName = Literal["player", "banker", "tie"]


class EventKind(StrEnum):
    SHOE_SHUFFLED = "shoe_shuffled"
    BURN = "burn"
    CUT_CARD = "cut_card"
    ROUND_OPENED = "round_opened"
    BET_TOTALS = "bet_totals"  # the round's stakes per spot, never who placed them
    BETTING_CLOSED = "betting_closed"
    CARD = "card"
    ROUND_RESULT = "round_result"
    ROUND_SETTLED = "round_settled"
    ROUND_VOIDED = "round_voided"
    TABLE_PAUSED = "table_paused"  # an operator paused the table: no round opens until resumed
    TABLE_RESUMED = "table_resumed"


class CardFace(TypedDict):
    rank: str
    suit: str | None


class ShoeShuffledPayload(TypedDict):
    kind: Literal["shoe_shuffled"]
    shoe: int
    decks: int
    cut_index: int
    cards: int


class BurnPayload(TypedDict):
    kind: Literal["burn"]
    shoe: int
    shown: CardFace
    burned: int


class CutCardPayload(TypedDict):
    kind: Literal["cut_card"]
    shoe: int
    last_round: int


class RoundOpenedPayload(TypedDict):
    kind: Literal["round_opened"]
    closes_at: int
    shoe: int
    last_hand: bool
    rules: str


class BetTotalsPayload(TypedDict):
    kind: Literal["bet_totals"]
    totals: dict[str, int]  # spot -> minor units, only spots with money on them
    bettors: int  # distinct players
    bets: int


class BettingClosedPayload(TypedDict):
    kind: Literal["betting_closed"]


class CardPayload(TypedDict):
    kind: Literal["card"]
    hand: HandName
    index: int  # position in the round's deal order, from 0
    rank: str
    suit: str | None


class RoundResultPayload(TypedDict):
    kind: Literal["round_result"]
    winner: WinnerName
    player_total: int
    banker_total: int
    natural: bool
    player_pair: bool
    banker_pair: bool
    cards_used: int
    player: list[str]
    banker: list[str]


class RoundSettledPayload(TypedDict):
    kind: Literal["round_settled"]
    winner: WinnerName
    bets: int
    staked: int
    paid: int


class RoundVoidedPayload(TypedDict):
    kind: Literal["round_voided"]
    reason: str
    bets: int
    refunded: int


class TablePausedPayload(TypedDict):
    kind: Literal["table_paused"]  # no round opens until table_resumed


class TableResumedPayload(TypedDict):
    kind: Literal["table_resumed"]


EventPayload = (
    ShoeShuffledPayload
    | BurnPayload
    | CutCardPayload
    | RoundOpenedPayload
    | BetTotalsPayload
    | BettingClosedPayload
    | CardPayload
    | RoundResultPayload
    | RoundSettledPayload
    | RoundVoidedPayload
    | TablePausedPayload
    | TableResumedPayload
)

# --- constructors: one per kind, the keys in wire order ----------------------------------------


def shoe_shuffled(*, shoe: int, decks: int, cut_index: int, cards: int) -> ShoeShuffledPayload:
    return {
        "kind": "shoe_shuffled",
        "shoe": shoe,
        "decks": decks,
        "cut_index": cut_index,
        "cards": cards,
    }


def burn(*, shoe: int, shown: CardFace, burned: int) -> BurnPayload:
    return {"kind": "burn", "shoe": shoe, "shown": shown, "burned": burned}


def cut_card(*, shoe: int, last_round: int) -> CutCardPayload:
    return {"kind": "cut_card", "shoe": shoe, "last_round": last_round}


def round_opened(*, closes_at: int, shoe: int, last_hand: bool, rules: str) -> RoundOpenedPayload:
    return {
        "kind": "round_opened",
        "closes_at": closes_at,
        "shoe": shoe,
        "last_hand": last_hand,
        "rules": rules,
    }


def bet_totals(*, totals: Mapping[str, int], bettors: int, bets: int) -> BetTotalsPayload:
    """Only the spots with money on them are shown."""
    spots = {spot: amount for spot, amount in totals.items() if amount > 0}
    return {"kind": "bet_totals", "totals": spots, "bettors": bettors, "bets": bets}


def betting_closed() -> BettingClosedPayload:
    return {"kind": "betting_closed"}


def card(*, hand: HandName, index: int, rank: str, suit: str | None) -> CardPayload:
    return {"kind": "card", "hand": hand, "index": index, "rank": rank, "suit": suit}


def round_result(
    *,
    winner: WinnerName,
    player_total: int,
    banker_total: int,
    natural: bool,
    player_pair: bool,
    banker_pair: bool,
    cards_used: int,
    player: list[str],
    banker: list[str],
) -> RoundResultPayload:
    return {
        "kind": "round_result",
        "winner": winner,
        "player_total": player_total,
        "banker_total": banker_total,
        "natural": natural,
        "player_pair": player_pair,
        "banker_pair": banker_pair,
        "cards_used": cards_used,
        "player": player,
        "banker": banker,
    }


def round_settled(*, winner: WinnerName, bets: int, staked: int, paid: int) -> RoundSettledPayload:
    return {"kind": "round_settled", "winner": winner, "bets": bets, "staked": staked, "paid": paid}


def round_voided(*, reason: str, bets: int, refunded: int) -> RoundVoidedPayload:
    return {"kind": "round_voided", "reason": reason, "bets": bets, "refunded": refunded}


def table_paused() -> TablePausedPayload:
    return {"kind": "table_paused"}


def table_resumed() -> TableResumedPayload:
    return {"kind": "table_resumed"}
