"""The shoe: composition, unbiased seeded shuffle, burn, cut card and persisted state."""

from __future__ import annotations

import itertools
import random
from collections import Counter

import pytest
from hypothesis import given
from hypothesis import strategies as st

from server.core.cards import RANKS, Card, Suit, full_deck
from server.core.shoe import MAX_COUP_CARDS, Burn, Shoe, fisher_yates


class ScriptedRandom(random.Random):
    """A source whose randrange answers from a script and records every call."""

    def __init__(self, answers: list[int] | None = None) -> None:
        super().__init__(0)
        self.answers = list(answers or [])
        self.calls: list[int] = []

    def randrange(self, start: int, stop: int | None = None, step: int = 1) -> int:  # type: ignore[override]
        assert stop is None and step == 1, "fisher_yates should call randrange(n)"
        self.calls.append(start)
        answer = self.answers.pop(0) if self.answers else 0
        assert 0 <= answer < start
        return answer

    def random(self) -> float:
        raise AssertionError("fisher_yates must not use random(): float scaling is biased")


def distinct(count: int) -> list[Card]:
    return full_deck()[:count]


@pytest.mark.parametrize("decks", [1, 4, 6, 8])
def test_shuffled_shoe_has_exact_composition(decks: int) -> None:
    """A shuffled shoe holds 52*d cards: every rank of every suit exactly d times."""
    shoe = Shoe.shuffled(decks, 7, random.Random(decks))
    assert len(shoe.cards) == 52 * decks
    assert Counter(shoe.cards) == Counter(full_deck() * decks)
    assert Counter(card.rank for card in shoe.cards) == dict.fromkeys(RANKS, 4 * decks)
    assert shoe.position == 0
    assert shoe.cut_index == 52 * decks - 7


def test_shuffle_is_deterministic_for_a_seed() -> None:
    """The same seed gives the same order; another seed gives another order."""
    a = Shoe.shuffled(8, 7, random.Random(2024)).cards
    b = Shoe.shuffled(8, 7, random.Random(2024)).cards
    c = Shoe.shuffled(8, 7, random.Random(2025)).cards
    assert a == b
    assert a != c
    assert a != full_deck() * 8


def test_shuffle_uses_only_the_injected_source() -> None:
    """Shuffling never touches the global random module's state."""
    before = random.getstate()
    Shoe.shuffled(2, 7, random.Random(1))
    assert random.getstate() == before


def test_fisher_yates_calls_randrange_descending() -> None:
    """fisher_yates draws j = randrange(i + 1) for i from n-1 down to 1, and nothing else."""
    rng = ScriptedRandom()
    cards = distinct(10)
    fisher_yates(cards, rng)
    assert rng.calls == list(range(10, 1, -1))


def test_fisher_yates_reaches_every_order_exactly_once() -> None:
    """The n! randrange answer sequences give n! distinct orders: uniform given randrange."""
    deck = distinct(5)
    orders = Counter()
    for answers in itertools.product(*(range(i + 1) for i in range(4, 0, -1))):
        cards = list(deck)
        fisher_yates(cards, ScriptedRandom(list(answers)))
        orders[tuple(cards)] += 1
    assert len(orders) == 120  # 5!
    assert set(orders.values()) == {1}


def test_fisher_yates_edge_sizes() -> None:
    """Shuffling zero or one card is a no-op that draws nothing."""
    for size in (0, 1):
        rng = ScriptedRandom()
        cards = distinct(size)
        fisher_yates(cards, rng)
        assert cards == distinct(size) and rng.calls == []


def test_shuffle_positions_pass_chi_square() -> None:
    """Over 20000 seeded shuffles of 8 cards, card-by-position counts fit uniform at 99%."""
    size, runs = 8, 20_000
    rng = random.Random(12345)
    deck = distinct(size)
    counts = [[0] * size for _ in range(size)]  # counts[card][position]
    for _ in range(runs):
        cards = list(deck)
        fisher_yates(cards, rng)
        for position, card in enumerate(cards):
            counts[deck.index(card)][position] += 1
    expected = runs / size

    def chi_square(observed: list[int]) -> float:
        return sum((o - expected) ** 2 / expected for o in observed)

    # Card 0 alone over the 8 positions: 7 degrees of freedom; chi2(0.99, 7) = 18.475.
    assert chi_square(counts[0]) < 18.475
    # The whole 8x8 table: every row and every column sums to `runs`, so (8-1)*(8-1) = 49
    # degrees of freedom; chi2(0.99, 49) = 74.919.
    assert chi_square([n for row in counts for n in row]) < 74.919
    assert all(sum(row) == runs for row in counts)


@pytest.mark.parametrize(
    ("rank", "burned"),
    [("A", 1), *((str(v), v) for v in range(2, 10)), ("10", 10), ("J", 10), ("Q", 10), ("K", 10)],
)
def test_burn_shows_first_card_and_burns_its_value(rank: str, burned: int) -> None:
    """Burn turns the first card up and burns that many more; 10/J/Q/K burn 10, an ace 1."""
    shown = Card(rank, Suit.HEARTS)
    shoe = Shoe.from_cards([shown, *distinct(20)])
    burn = shoe.burn()
    assert burn == Burn(shown=shown, burned=burned)
    assert shoe.position == 1 + burned
    assert shoe.draw() == distinct(20)[burned]


def test_burn_never_passes_the_end_of_the_shoe() -> None:
    """A burn larger than the remaining cards burns only what is left."""
    shoe = Shoe.from_cards([Card("9"), Card("2"), Card("3")])
    assert shoe.burn().burned == 2
    assert shoe.remaining == 0


def test_cut_card_marks_the_last_hand() -> None:
    """is_last_hand is false before the cut card and true from cut_index on."""
    shoe = Shoe(distinct(20), position=0, cut_index=10)
    for position in range(21):
        shoe.position = position
        assert shoe.is_last_hand() == (position >= 10)
        assert shoe.cut_card_out == (position >= 10)


def test_can_deal_coup_needs_six_cards() -> None:
    """can_deal_coup is true only while at least six cards remain."""
    shoe = Shoe.from_cards(distinct(10))
    for position in range(11):
        shoe.position = position
        assert shoe.remaining == 10 - position
        assert shoe.can_deal_coup() == (10 - position >= MAX_COUP_CARDS)
    assert MAX_COUP_CARDS == 6


def test_from_cards_keeps_order_and_has_no_cut_card() -> None:
    """from_cards deals in the given order; without a cut index the cut card is the end."""
    cards = distinct(7)
    shoe = Shoe.from_cards(cards)
    assert shoe.cut_index == 7 and shoe.position == 0
    assert shoe.peek(3) == cards[:3]
    assert [shoe.draw() for _ in range(7)] == cards
    assert Shoe.from_cards(cards, cut_index=3).cut_index == 3


def test_from_cards_copies_the_list() -> None:
    """The shoe keeps its own list: later changes to the caller's list do not leak in."""
    cards = distinct(6)
    shoe = Shoe.from_cards(cards)
    cards.reverse()
    assert shoe.cards == distinct(6)


def test_draw_on_empty_shoe_raises() -> None:
    """Drawing past the last card raises IndexError and leaves the position alone."""
    shoe = Shoe.from_cards([Card("A")])
    shoe.draw()
    with pytest.raises(IndexError):
        shoe.draw()
    assert shoe.position == 1


@pytest.mark.parametrize(("position", "cut_index"), [(-1, 0), (4, 0), (0, -1), (0, 4)])
def test_shoe_rejects_positions_outside_the_shoe(position: int, cut_index: int) -> None:
    """Position and cut index must lie within the shoe."""
    with pytest.raises(ValueError):
        Shoe(distinct(3), position, cut_index)


@given(st.integers(1, 8), st.integers(0, 100), st.integers(0, 2**32))
def test_state_round_trip(decks: int, dealt: int, seed: int) -> None:
    """from_state(to_state()) restores the same cards, position and cut index."""
    shoe = Shoe.shuffled(decks, 7, random.Random(seed))
    shoe.position = min(dealt, len(shoe.cards))
    state = shoe.to_state()
    assert isinstance(state["cards"], str) and len(state["cards"]) == 104 * decks
    again = Shoe.from_state(state)
    assert (again.cards, again.position, again.cut_index) == (
        shoe.cards,
        shoe.position,
        shoe.cut_index,
    )
    assert again.peek(6) == shoe.peek(6)
