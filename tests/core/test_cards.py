"""Cards: values, parsing, the fixed deck and the compact two-character encoding."""

from __future__ import annotations

from collections import Counter

import pytest
from hypothesis import given
from hypothesis import strategies as st

from server.core.cards import (
    RANKS,
    Card,
    Suit,
    card_value,
    decode_cards,
    encode_cards,
    full_deck,
    parse_card,
)
from server.core.errors import CardError

# Written out literally so a slip in card_value cannot hide behind itself.
EXPECTED_VALUES = {
    "A": 1,
    "2": 2,
    "3": 3,
    "4": 4,
    "5": 5,
    "6": 6,
    "7": 7,
    "8": 8,
    "9": 9,
    "10": 0,
    "J": 0,
    "Q": 0,
    "K": 0,
}

cards = st.builds(Card, st.sampled_from(RANKS), st.none() | st.sampled_from(list(Suit)))


@pytest.mark.parametrize(("rank", "value"), EXPECTED_VALUES.items())
def test_card_value_per_rank(rank: str, value: int) -> None:
    """A=1, 2-9 face value, 10/J/Q/K=0, both via card_value and Card.value."""
    assert card_value(rank) == value
    assert Card(rank, Suit.SPADES).value == value


def test_ranks_are_the_thirteen_ranks() -> None:
    """RANKS lists exactly the thirteen ranks of a deck."""
    assert set(RANKS) == set(EXPECTED_VALUES)
    assert len(RANKS) == 13


@pytest.mark.parametrize(
    ("text", "expected"),
    [
        ("A", Card("A")),
        ("Kh", Card("K", Suit.HEARTS)),
        ("10c", Card("10", Suit.CLUBS)),
        ("Ts", Card("10", Suit.SPADES)),
        ("t", Card("10")),
        ("1d", Card("A", Suit.DIAMONDS)),
        (" qS ", Card("Q", Suit.SPADES)),
        ("9", Card("9")),
    ],
)
def test_parse_card_accepts_the_documented_forms(text: str, expected: Card) -> None:
    """parse_card reads A/Kh/10c/Ts forms case-insensitively, T and 1 as aliases."""
    assert parse_card(text) == expected


@pytest.mark.parametrize("text", ["", "   ", "X", "11", "0", "Zh", "h", "10x", "AA"])
def test_parse_card_rejects_garbage(text: str) -> None:
    """parse_card raises CardError (a ValueError) for text that names no card."""
    with pytest.raises(CardError):
        parse_card(text)


def test_card_str_and_code() -> None:
    """str() is rank+suit; code is two characters with T for 10 and '-' for no suit."""
    assert str(Card("10", Suit.HEARTS)) == "10h"
    assert str(Card("Q")) == "Q"
    assert Card("10", Suit.HEARTS).code == "Th"
    assert Card("A").code == "A-"


def test_full_deck_is_52_distinct_cards() -> None:
    """full_deck has each rank of each suit exactly once, in a fixed order."""
    deck = full_deck()
    assert len(deck) == 52
    assert len(set(deck)) == 52
    assert Counter(card.rank for card in deck) == dict.fromkeys(RANKS, 4)
    assert deck == full_deck()


def test_decode_rejects_malformed_strings() -> None:
    """decode_cards raises CardError on odd length, unknown rank code or unknown suit mark."""
    for text in ("A", "Xh", "Ax", "10h"):
        with pytest.raises(CardError):
            decode_cards(text)


@given(st.lists(cards, max_size=30))
def test_encode_decode_round_trip(hand: list[Card]) -> None:
    """decode_cards(encode_cards(cards)) gives the same cards, two characters each."""
    text = encode_cards(hand)
    assert len(text) == 2 * len(hand)
    assert decode_cards(text) == hand
    assert encode_cards(tuple(hand)) == text


@given(cards)
def test_parse_str_round_trip(card: Card) -> None:
    """parse_card(str(card)) gives the card back."""
    assert parse_card(str(card)) == card
