"""Cards: ranks, suits, baccarat values, and the compact text form stores keep."""

from __future__ import annotations

from dataclasses import dataclass
from enum import StrEnum

from server.core.errors import CardError

__all__ = [
    "RANKS",
    "Card",
    "Suit",
    "card_value",
    "decode_cards",
    "encode_cards",
    "full_deck",
    "parse_card",
]

# Ranks in their display form; "10" is the only two-character rank.
RANKS: tuple[str, ...] = ("A", "2", "3", "4", "5", "6", "7", "8", "9", "10", "J", "Q", "K")
_RANK_ALIASES = {"T": "10", "1": "A"}
# One character per rank for the compact shoe encoding ("T" stands for 10).
_RANK_CODE = {rank: ("T" if rank == "10" else rank) for rank in RANKS}
_CODE_RANK = {code: rank for rank, code in _RANK_CODE.items()}


class Suit(StrEnum):
    CLUBS = "c"
    DIAMONDS = "d"
    HEARTS = "h"
    SPADES = "s"


def card_value(rank: str) -> int:
    """Baccarat value: A=1, 2-9 face value, 10/J/Q/K=0."""
    if rank == "A":
        return 1
    if rank in ("10", "J", "Q", "K"):
        return 0
    return int(rank)


@dataclass(frozen=True, slots=True)
class Card:
    """One card; suit is None for cards given without one (CLI input, value-only tests)."""

    rank: str
    suit: Suit | None = None

    @property
    def value(self) -> int:
        return card_value(self.rank)

    @property
    def code(self) -> str:
        """Two characters (rank code + suit, or '-' for no suit): the store and replay form."""
        return _RANK_CODE[self.rank] + (self.suit.value if self.suit else "-")

    def __str__(self) -> str:
        return self.rank + (self.suit.value if self.suit else "")


def parse_card(text: str) -> Card:
    """Parse 'A', 'Kh', '10c', 'Ts' (case-insensitive); raise CardError naming the problem."""
    raw = text.strip().upper()
    if not raw:
        raise CardError("empty card")
    suit: Suit | None = None
    if raw[-1] in "CDHS" and len(raw) > 1:
        suit = Suit(raw[-1].lower())
        raw = raw[:-1]
    rank = _RANK_ALIASES.get(raw, raw)
    if rank not in RANKS:
        raise CardError(f"bad card {text!r}: rank must be one of A 2-9 10 J Q K (T for 10)")
    return Card(rank, suit)


def full_deck() -> list[Card]:
    """One 52-card deck in a fixed order (suit-major)."""
    return [Card(rank, suit) for suit in Suit for rank in RANKS]


def encode_cards(cards: list[Card] | tuple[Card, ...]) -> str:
    return "".join(card.code for card in cards)


def decode_cards(text: str) -> list[Card]:
    """Inverse of encode_cards; raises CardError on a malformed string."""
    if len(text) % 2:
        raise CardError("card string has odd length")
    cards = []
    for i in range(0, len(text), 2):
        rank = _CODE_RANK.get(text[i])
        mark = text[i + 1]
        if rank is None or (mark != "-" and mark not in "cdhs"):
            raise CardError(f"bad card code {text[i : i + 2]!r}")
        cards.append(Card(rank, None if mark == "-" else Suit(mark)))
    return cards
