"""Coup resolution: golden coups for every cell of the tableau, naturals, pairs and properties."""

from __future__ import annotations

import pytest
from hypothesis import given
from hypothesis import strategies as st

from server.core.cards import RANKS, Card, Suit
from server.core.coup import Coup, Hand, Winner, banker_draws, player_draws, resolve_coup
from server.core.errors import NotEnoughCards

# The Banker's tableau when the Player drew, written out from the reference sheet, not derived
# from the code: row = Banker's two-card total, column = value of the Player's third card 0-9.
# D = Banker draws, S = Banker stands.
#                   p: 0123456789
BANKER_TABLEAU = {
    0: "DDDDDDDDDD",
    1: "DDDDDDDDDD",
    2: "DDDDDDDDDD",
    3: "DDDDDDDDSD",  # 3 draws unless the Player's third is 8
    4: "SSDDDDDDSS",  # 4 draws on 2-7
    5: "SSSSDDDDSS",  # 5 draws on 4-7
    6: "SSSSSSDDSS",  # 6 draws on 6-7
    7: "SSSSSSSSSS",  # 7 stands
}
# When the Player stood on 6 or 7 the Banker draws on 0-5 and stands on 6-7.
#                   b: 01234567
BANKER_AFTER_PLAYER_STOOD = "DDDDDDSS"

SUITS = list(Suit)


def rank_of(value: int) -> str:
    """A rank with the given baccarat value (K for 0, A for 1)."""
    return {0: "K", 1: "A"}.get(value, str(value))


def two_cards(total: int, suit: Suit) -> tuple[Card, Card]:
    """Two cards whose baccarat total is `total`, never a pair (K and Q make 0)."""
    return Card("Q" if total == 0 else "K", suit), Card(rank_of(total), suit)


def deal(player: tuple[Card, Card], banker: tuple[Card, Card], *rest: Card) -> list[Card]:
    """Cards in shoe order P1 B1 P2 B2 then the draws."""
    return [player[0], banker[0], player[1], banker[1], *rest]


def expected_winner(player_total: int, banker_total: int) -> Winner:
    if player_total > banker_total:
        return Winner.PLAYER
    if banker_total > player_total:
        return Winner.BANKER
    return Winner.TIE


def test_two_cards_helper_makes_the_total() -> None:
    """The test helper builds every two-card total 0-9 without a pair."""
    for total in range(10):
        first, second = two_cards(total, Suit.CLUBS)
        assert (first.value + second.value) % 10 == total
        assert first.rank != second.rank


def test_tableau_table_matches_reference_rule_text() -> None:
    """The literal tableau above encodes the reference's sentence (guards typos in the table)."""
    assert BANKER_TABLEAU[3][8] == "S" and BANKER_TABLEAU[3].count("S") == 1
    assert [c for c, mark in enumerate(BANKER_TABLEAU[4]) if mark == "D"] == list(range(2, 8))
    assert [c for c, mark in enumerate(BANKER_TABLEAU[5]) if mark == "D"] == list(range(4, 8))
    assert [c for c, mark in enumerate(BANKER_TABLEAU[6]) if mark == "D"] == [6, 7]


@pytest.mark.parametrize("banker_total", range(8))
@pytest.mark.parametrize("third", range(10))
def test_banker_draws_agrees_with_literal_tableau(banker_total: int, third: int) -> None:
    """banker_draws(b, p) matches the literal tableau cell for b in 0-7, p in 0-9."""
    assert banker_draws(banker_total, third) == (BANKER_TABLEAU[banker_total][third] == "D")


@pytest.mark.parametrize("banker_total", range(8))
@pytest.mark.parametrize("third", range(10))
def test_golden_coup_every_tableau_cell(banker_total: int, third: int) -> None:
    """A dealt coup draws or stands the Banker's third card exactly as the tableau cell says."""
    player_start = (banker_total + third) % 6  # any non-natural drawing total 0-5
    banker_third = Card(rank_of(4), Suit.SPADES)
    cards = deal(
        two_cards(player_start, Suit.HEARTS),
        two_cards(banker_total, Suit.DIAMONDS),
        Card(rank_of(third), Suit.CLUBS),
        banker_third,
        Card("9", Suit.HEARTS),  # never used: a coup takes at most six cards
    )
    coup = resolve_coup(cards)
    draws = BANKER_TABLEAU[banker_total][third] == "D"

    assert not coup.natural
    assert len(coup.player) == 3 and coup.player[2] == cards[4]
    assert coup.player_total == (player_start + third) % 10
    assert coup.cards_used == (6 if draws else 5)
    if draws:
        assert coup.banker == (cards[1], cards[3], banker_third)
        assert coup.banker_total == (banker_total + 4) % 10
    else:
        assert coup.banker == (cards[1], cards[3])
        assert coup.banker_total == banker_total
    assert coup.winner is expected_winner(coup.player_total, coup.banker_total)


@pytest.mark.parametrize("player_total", [6, 7])
@pytest.mark.parametrize("banker_total", range(8))
def test_golden_coup_player_stands(player_total: int, banker_total: int) -> None:
    """Player stands on 6-7; then the Banker draws on 0-5 and stands on 6-7."""
    banker_third = Card("3", Suit.SPADES)
    cards = deal(
        two_cards(player_total, Suit.HEARTS),
        two_cards(banker_total, Suit.CLUBS),
        banker_third,
        Card("9", Suit.HEARTS),
    )
    coup = resolve_coup(cards)
    draws = BANKER_AFTER_PLAYER_STOOD[banker_total] == "D"

    assert coup.player == (cards[0], cards[2])
    assert coup.player_total == player_total
    assert coup.cards_used == (5 if draws else 4)
    if draws:
        assert coup.banker == (cards[1], cards[3], banker_third)
        assert coup.banker_total == (banker_total + 3) % 10
        assert coup.deal_order[4] == (Hand.BANKER, banker_third)
    else:
        assert coup.banker_total == banker_total
    assert coup.winner is expected_winner(coup.player_total, coup.banker_total)


@pytest.mark.parametrize("natural", [8, 9])
@pytest.mark.parametrize("other", range(10))
@pytest.mark.parametrize("natural_side", [Hand.PLAYER, Hand.BANKER])
def test_golden_coup_naturals(natural: int, other: int, natural_side: Hand) -> None:
    """A two-card 8 or 9 on either side is a natural: both stand, even the other on 0-5."""
    nat, rest = two_cards(natural, Suit.HEARTS), two_cards(other, Suit.CLUBS)
    player, banker = (nat, rest) if natural_side is Hand.PLAYER else (rest, nat)
    cards = deal(player, banker, Card("5", Suit.SPADES), Card("5", Suit.DIAMONDS))
    coup = resolve_coup(cards)

    p_total = natural if natural_side is Hand.PLAYER else other
    b_total = other if natural_side is Hand.PLAYER else natural
    assert coup.natural
    assert coup.cards_used == 4
    assert (len(coup.player), len(coup.banker)) == (2, 2)
    assert (coup.player_total, coup.banker_total) == (p_total, b_total)
    assert coup.winner is expected_winner(p_total, b_total)


def test_natural_needs_only_four_cards() -> None:
    """A natural resolves from exactly four cards without NotEnoughCards."""
    coup = resolve_coup([Card("9"), Card("2"), Card("K"), Card("3")])
    assert coup.natural and coup.winner is Winner.PLAYER and coup.cards_used == 4


def test_deal_order_is_p1_b1_p2_b2_p3_b3() -> None:
    """deal_order alternates Player and Banker in shoe order, with the third cards last."""
    cards = [Card(rank, Suit.SPADES) for rank in ("A", "2", "K", "Q", "3", "4", "5")]
    coup = resolve_coup(cards)  # Player 1 draws 3, Banker 2 draws: six cards
    assert coup.deal_order == (
        (Hand.PLAYER, cards[0]),
        (Hand.BANKER, cards[1]),
        (Hand.PLAYER, cards[2]),
        (Hand.BANKER, cards[3]),
        (Hand.PLAYER, cards[4]),
        (Hand.BANKER, cards[5]),
    )
    assert coup.cards_used == 6
    assert coup.player == (cards[0], cards[2], cards[4])
    assert coup.banker == (cards[1], cards[3], cards[5])
    assert (coup.player_total, coup.banker_total) == (4, 6)
    assert coup.winner is Winner.BANKER


@pytest.mark.parametrize(
    ("ranks", "player_pair", "banker_pair"),
    [
        (("7", "2", "7", "3"), True, False),
        (("7", "2", "6", "2"), False, True),
        (("4", "J", "4", "J"), True, True),
        (("10", "K", "K", "Q"), False, False),  # 10-value ranks differ: no pair
        (("A", "2", "3", "4", "A"), False, False),  # a third card never makes a pair
    ],
)
def test_pairs_are_first_two_cards_of_same_rank(
    ranks: tuple[str, ...], player_pair: bool, banker_pair: bool
) -> None:
    """A pair is the first two cards of a hand with the same rank, whatever their suits."""
    cards = [Card(rank, SUITS[i % 4]) for i, rank in enumerate(ranks)] + [Card("K")] * 2
    coup = resolve_coup(cards)
    assert (coup.player_pair, coup.banker_pair) == (player_pair, banker_pair)


@pytest.mark.parametrize("total", range(10))
def test_ties_on_equal_totals(total: int) -> None:
    """Equal final totals are a Tie, naturals included."""
    # Both sides get the same two cards: a natural for 8/9, standing for 6/7, and otherwise
    # both draw a K (value 0), keeping the totals equal.
    player, banker = two_cards(total, Suit.HEARTS), two_cards(total, Suit.CLUBS)
    coup = resolve_coup(deal(player, banker, Card("K"), Card("K")))
    assert coup.player_total == coup.banker_total == total
    assert coup.winner is Winner.TIE


def test_player_draws_on_0_to_5_only() -> None:
    """player_draws is true for 0-5 and false for 6-7."""
    assert [player_draws(t) for t in range(8)] == [True] * 6 + [False] * 2


@pytest.mark.parametrize(
    ("ranks", "needed"),
    [
        (("A", "2", "3"), 4),
        (("A", "2", "3", "4"), 5),  # Player 4 draws
        (("6", "A", "K", "2"), 5),  # Player stands on 6, Banker 3 draws
        (("A", "2", "3", "4", "6"), 6),  # Player's third is 6: Banker on 6 draws
    ],
)
def test_not_enough_cards_names_the_card_needed(ranks: tuple[str, ...], needed: int) -> None:
    """NotEnoughCards is raised when the rules call for a missing card; it names that card."""
    cards = [Card(rank) for rank in ranks]
    with pytest.raises(NotEnoughCards, match=rf"needs card {needed}\b"):
        resolve_coup(cards)


@pytest.mark.parametrize("count", range(4))
def test_fewer_than_four_cards_raise(count: int) -> None:
    """A coup always needs the four opening cards; fewer raise NotEnoughCards."""
    with pytest.raises(NotEnoughCards, match=rf"only {count} given"):
        resolve_coup([Card("A")] * count)


def test_coup_to_dict() -> None:
    """to_dict gives ranks, suited card strings, totals, winner and cards_used."""
    cards = [Card("9", Suit.HEARTS), Card("10", Suit.SPADES), Card("K"), Card("10", Suit.CLUBS)]
    assert resolve_coup(cards).to_dict() == {
        "player": ["9", "K"],
        "banker": ["10", "10"],
        "player_cards": ["9h", "K"],
        "banker_cards": ["10s", "10c"],
        "player_total": 9,
        "banker_total": 0,
        "winner": "player",
        "natural": True,
        "player_pair": False,
        "banker_pair": True,
        "cards_used": 4,
    }


card_st = st.builds(Card, st.sampled_from(RANKS), st.sampled_from(SUITS))
six_cards = st.lists(card_st, min_size=6, max_size=6)


@given(six_cards)
def test_any_six_cards_resolve_to_a_valid_coup(cards: list[Card]) -> None:
    """Any six cards resolve: 4-6 cards used, totals 0-9, deal order is the shoe order."""
    coup = resolve_coup(cards)
    assert 4 <= coup.cards_used <= 6
    assert 0 <= coup.player_total <= 9 and 0 <= coup.banker_total <= 9
    assert [card for _, card in coup.deal_order] == cards[: coup.cards_used]
    assert len(coup.player) + len(coup.banker) == coup.cards_used
    assert coup.player_total == sum(c.value for c in coup.player) % 10
    assert coup.banker_total == sum(c.value for c in coup.banker) % 10
    assert coup.winner is expected_winner(coup.player_total, coup.banker_total)
    assert coup.natural == (coup.cards_used == 4 and max(coup.player_total, coup.banker_total) >= 8)


@given(six_cards, st.lists(card_st, max_size=5))
def test_same_cards_same_coup(cards: list[Card], extra: list[Card]) -> None:
    """The coup is a function of the card order alone; cards past the coup change nothing."""
    coup = resolve_coup(cards)
    assert resolve_coup(list(cards)) == coup
    assert resolve_coup(tuple(cards) + tuple(extra)) == coup
    assert isinstance(coup, Coup)


@given(six_cards, st.lists(st.sampled_from(SUITS) | st.none(), min_size=6, max_size=6))
def test_suits_do_not_affect_the_result(cards: list[Card], suits: list[Suit | None]) -> None:
    """Changing suits keeps the winner, totals, pairs and number of cards."""
    resuited = [Card(card.rank, suit) for card, suit in zip(cards, suits, strict=True)]
    a, b = resolve_coup(cards), resolve_coup(resuited)
    assert (a.winner, a.player_total, a.banker_total, a.cards_used, a.natural) == (
        b.winner,
        b.player_total,
        b.banker_total,
        b.cards_used,
        b.natural,
    )
    assert (a.player_pair, a.banker_pair) == (b.player_pair, b.banker_pair)
