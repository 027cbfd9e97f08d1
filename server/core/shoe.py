"""The multi-deck shoe: unbiased shuffle from an injected source, burn, cut card.

Procedure (shared/reference/baccarat.md):
- Shuffle with Fisher-Yates driven by `rng.randrange`, which draws without modulo bias;
  production passes `random.SystemRandom()`.
- Burn at a new shoe: the first card is turned face up and that many more cards are burned
  (10, J, Q, K burn 10).
- Cut card: when it comes out the current hand is finished and one more hand is dealt; if it
  comes out before the first card of a hand, that hand is the last. Both cases reduce to:
  a hand that *starts* at or past the cut card is the last of the shoe.
"""

from __future__ import annotations

import random
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Protocol

from server.core.cards import Card, decode_cards, encode_cards, full_deck

__all__ = ["MAX_COUP_CARDS", "Burn", "RandRange", "Shoe", "burn_count", "fisher_yates"]

MAX_COUP_CARDS = 6


class RandRange(Protocol):
    """A uniform integer source: random.Random, or the committed stream of server.core.fair."""

    def randrange(self, stop: int, /) -> int: ...


def fisher_yates(cards: list[Card], rng: RandRange) -> None:
    """Shuffle in place; each of the n! orders is equally likely given a uniform randrange.

    bac-shoe-v1 (docs/fairness.md) specifies its shuffle as exactly this loop: changing the
    order of the draws changes every committed shoe.
    """
    for i in range(len(cards) - 1, 0, -1):
        j = rng.randrange(i + 1)
        cards[i], cards[j] = cards[j], cards[i]


def burn_count(shown: Card) -> int:
    """How many cards a face-up first card burns: its value, and 10 for a 10 or a face card."""
    return 10 if shown.value == 0 else shown.value


@dataclass(frozen=True, slots=True)
class Burn:
    shown: Card  # the face-up card that says how many to burn
    burned: int  # how many more cards went face down


class Shoe:
    """Cards in dealing order with a read position and the index of the cut card.

    `cut_index` is how many cards lie in front of the cut card. The state is three plain
    values (cards, position, cut_index) so a store can persist it and a new owner can
    continue from exactly the same card.
    """

    __slots__ = ("cards", "cut_index", "position")

    def __init__(self, cards: Sequence[Card], position: int = 0, cut_index: int | None = None):
        self.cards = list(cards)
        self.position = position
        self.cut_index = len(self.cards) if cut_index is None else cut_index
        if not 0 <= self.position <= len(self.cards):
            raise ValueError("shoe position outside the shoe")
        if not 0 <= self.cut_index <= len(self.cards):
            raise ValueError("cut card outside the shoe")

    @classmethod
    def shuffled(cls, decks: int, cut_card_from_end: int, rng: random.Random) -> Shoe:
        cards = full_deck() * decks
        fisher_yates(cards, rng)
        return cls(cards, 0, len(cards) - cut_card_from_end)

    @classmethod
    def from_cards(cls, cards: Sequence[Card], cut_index: int | None = None) -> Shoe:
        """A shoe with a given order, for tests and replays (no cut card unless given)."""
        return cls(cards, 0, cut_index)

    @property
    def remaining(self) -> int:
        return len(self.cards) - self.position

    @property
    def cut_card_out(self) -> bool:
        return self.position >= self.cut_index

    def is_last_hand(self) -> bool:
        """Called before a hand starts: is this the last hand of the shoe?"""
        return self.cut_card_out

    def can_deal_coup(self) -> bool:
        """Whether a full coup (up to six cards) is guaranteed to be in the shoe."""
        return self.remaining >= MAX_COUP_CARDS

    def burn(self) -> Burn:
        shown = self.draw()
        count = min(burn_count(shown), self.remaining)
        self.position += count
        return Burn(shown, count)

    def draw(self) -> Card:
        if self.position >= len(self.cards):
            raise IndexError("the shoe is empty")
        card = self.cards[self.position]
        self.position += 1
        return card

    def peek(self, count: int) -> list[Card]:
        return self.cards[self.position : self.position + count]

    def to_state(self) -> dict[str, object]:
        return {
            "cards": encode_cards(self.cards),
            "position": self.position,
            "cut_index": self.cut_index,
        }

    @classmethod
    def from_state(cls, state: dict[str, object]) -> Shoe:
        cards = state["cards"]
        position, cut_index = state["position"], state["cut_index"]
        assert isinstance(cards, str) and isinstance(position, int)
        assert isinstance(cut_index, int)
        return cls(decode_cards(cards), position, cut_index)
