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
    "BurntCard",
    "CardFace",
    "CardPayload",
    "CutCardPayload",
    "EntropyAcceptedPayload",
    "EventKind",
    "EventPayload",
    "HandName",
    "RoundOpenedPayload",
    "RoundResultPayload",
    "RoundSettledPayload",
    "RoundVoidedPayload",
    "ShoeCommittedPayload",
    "ShoeRevealedPayload",
    "ShoeSealedPayload",
    "ShoeShuffledPayload",
    "TablePausedPayload",
    "TableResumedPayload",
    "WinnerName",
    "bet_totals",
    "betting_closed",
    "burn",
    "burnt_card",
    "card",
    "cut_card",
    "entropy_accepted",
    "round_opened",
    "round_result",
    "round_settled",
    "round_voided",
    "shoe_committed",
    "shoe_revealed",
    "shoe_sealed",
    "shoe_shuffled",
    "table_paused",
    "table_resumed",
]

HandName = Literal["player", "banker"]
WinnerName = Literal["player", "banker", "tie"]


class EventKind(StrEnum):
    # The committed shoe (docs/fairness.md): its commitment, the players' entropy, the seal
    # (client seed and Merkle root), and the seed once the shoe is over.
    SHOE_COMMITTED = "shoe_committed"
    ENTROPY_ACCEPTED = "entropy_accepted"
    SHOE_SEALED = "shoe_sealed"
    SHOE_REVEALED = "shoe_revealed"
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


class ShoeCommittedPayload(TypedDict):
    kind: Literal["shoe_committed"]
    shoe: int
    alg: str  # "bac-shoe-v1"
    commitment: str  # hex SHA-256 of the seed


class EntropyAcceptedPayload(TypedDict):
    kind: Literal["entropy_accepted"]
    shoe: int
    value: str  # exactly as it will be published in shoe_sealed


class ShoeSealedPayload(TypedDict):
    kind: Literal["shoe_sealed"]
    shoe: int
    alg: str
    entropy: list[str]  # the accepted values, in the order received
    client_seed: str  # hex
    root: str  # hex Merkle root over the shoe's positions
    cut_from_end: list[int]  # [lo, hi]
    decks: int


class ShoeRevealedPayload(TypedDict):
    kind: Literal["shoe_revealed"]
    shoe: int
    seed: str  # hex: the shoe is over, anyone may recompute it


class ShoeShuffledPayload(TypedDict):
    kind: Literal["shoe_shuffled"]
    shoe: int
    decks: int
    cut_index: int
    cards: int


class BurntCard(TypedDict):
    position: int
    card: CardFace
    salt: str  # hex
    proof: list[str]  # Merkle path, wire steps ("L" or "R" + 64 hex)


class BurnPayload(TypedDict):
    kind: Literal["burn"]
    shoe: int
    shown: CardFace
    burned: int
    position: int  # of the shown card: 0
    salt: str
    proof: list[str]
    burnt: list[BurntCard]  # the cards burned face down, positions 1..burned


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
    position: int  # in the shoe (burns included), from 0: consecutive across the shoe
    salt: str  # hex
    proof: list[str]  # Merkle path against the shoe's root


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
    ShoeCommittedPayload
    | EntropyAcceptedPayload
    | ShoeSealedPayload
    | ShoeRevealedPayload
    | ShoeShuffledPayload
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


def shoe_committed(*, shoe: int, alg: str, commitment: str) -> ShoeCommittedPayload:
    return {"kind": "shoe_committed", "shoe": shoe, "alg": alg, "commitment": commitment}


def entropy_accepted(*, shoe: int, value: str) -> EntropyAcceptedPayload:
    return {"kind": "entropy_accepted", "shoe": shoe, "value": value}


def shoe_sealed(
    *,
    shoe: int,
    alg: str,
    entropy: list[str],
    client_seed: str,
    root: str,
    cut_from_end: list[int],
    decks: int,
) -> ShoeSealedPayload:
    return {
        "kind": "shoe_sealed",
        "shoe": shoe,
        "alg": alg,
        "entropy": entropy,
        "client_seed": client_seed,
        "root": root,
        "cut_from_end": cut_from_end,
        "decks": decks,
    }


def shoe_revealed(*, shoe: int, seed: str) -> ShoeRevealedPayload:
    return {"kind": "shoe_revealed", "shoe": shoe, "seed": seed}


def shoe_shuffled(*, shoe: int, decks: int, cut_index: int, cards: int) -> ShoeShuffledPayload:
    return {
        "kind": "shoe_shuffled",
        "shoe": shoe,
        "decks": decks,
        "cut_index": cut_index,
        "cards": cards,
    }


def burnt_card(*, position: int, card: CardFace, salt: str, proof: list[str]) -> BurntCard:
    return {"position": position, "card": card, "salt": salt, "proof": proof}


def burn(
    *,
    shoe: int,
    shown: CardFace,
    burned: int,
    position: int,
    salt: str,
    proof: list[str],
    burnt: list[BurntCard],
) -> BurnPayload:
    return {
        "kind": "burn",
        "shoe": shoe,
        "shown": shown,
        "burned": burned,
        "position": position,
        "salt": salt,
        "proof": proof,
        "burnt": burnt,
    }


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


def card(
    *,
    hand: HandName,
    index: int,
    rank: str,
    suit: str | None,
    position: int,
    salt: str,
    proof: list[str],
) -> CardPayload:
    return {
        "kind": "card",
        "hand": hand,
        "index": index,
        "rank": rank,
        "suit": suit,
        "position": position,
        "salt": salt,
        "proof": proof,
    }


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
