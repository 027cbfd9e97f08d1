"""Exact odds: the published tables of shared/reference/baccarat.md and a brute-force check."""

from __future__ import annotations

from collections import Counter
from fractions import Fraction
from itertools import permutations

import pytest

from server.core.bets import Paytable, Spot
from server.core.cards import RANKS, Card, parse_card
from server.core.coup import resolve_coup
from server.core.odds import ShoeComposition, compute_odds, house_edges, shoe_after

# decks, P(Banker), P(Player), P(Tie); edge Banker 5%, Player, Tie 8:1, Tie 9:1 (percent)
PUBLISHED = [
    (8, "0.4585974226", "0.4462466093", "0.0951559680",
     "1.057906", "1.235081", "14.359629", "4.844032"),
    (6, "0.4586527188", "0.4462785698", "0.0950687113",
     "1.055849", "1.237415", "14.438160", "4.931289"),
    (4, "0.4587614762", "0.4463403499", "0.0948981739",
     "1.051695", "1.242113", "14.591643", "5.101826"),
]  # fmt: skip


def _close(exact: Fraction, published: str, digits: int) -> bool:
    """True if `exact` rounds to the published decimal at that many digits."""
    return abs(exact - Fraction(published)) <= Fraction(1, 2 * 10**digits)


@pytest.mark.parametrize(
    ("decks", "banker", "player", "tie", "e_banker", "e_player", "e_tie8", "e_tie9"), PUBLISHED
)
def test_published_table(
    decks: int,
    banker: str,
    player: str,
    tie: str,
    e_banker: str,
    e_player: str,
    e_tie8: str,
    e_tie9: str,
) -> None:
    """Probabilities match to 10 digits and edges to the published 6 decimals of a percent."""
    odds = compute_odds(ShoeComposition.full(decks))
    assert _close(odds.banker, banker, 10)
    assert _close(odds.player, player, 10)
    assert _close(odds.tie, tie, 10)
    edges = house_edges(odds, Paytable())
    assert _close(edges[Spot.BANKER] * 100, e_banker, 6)
    assert _close(edges[Spot.PLAYER] * 100, e_player, 6)
    assert _close(edges[Spot.TIE] * 100, e_tie8, 6)
    assert _close(house_edges(odds, Paytable(tie_pays=9))[Spot.TIE] * 100, e_tie9, 6)


def test_probabilities_sum_to_one() -> None:
    """Banker, Player and Tie cover every coup exactly."""
    odds = compute_odds(ShoeComposition.full(8))
    assert odds.banker + odds.player + odds.tie == 1


def test_pairs_eight_decks() -> None:
    """Each pair bet wins 31/415 of the time with 8 decks; at 11:1 the edge is 10.361446%."""
    odds = compute_odds(ShoeComposition.full(8))
    assert odds.player_pair == odds.banker_pair == Fraction(31, 415)
    edges = house_edges(odds, Paytable())
    assert edges[Spot.PLAYER_PAIR] == edges[Spot.BANKER_PAIR] == Fraction(43, 415)
    assert _close(edges[Spot.PLAYER_PAIR] * 100, "10.361446", 6)


def test_pairs_need_ranks_not_values() -> None:
    """A 10 and a King share a value but are no pair: pairs are counted by rank."""
    odds = compute_odds(ShoeComposition.full(1))
    assert odds.player_pair == Fraction(13 * 4 * 3, 52 * 51)


def test_no_commission_banker_edge() -> None:
    """No-commission Banker (1:2 on a winning 6) has a 1.458104% edge with 8 decks."""
    edges = house_edges(compute_odds(ShoeComposition.full(8)), Paytable(no_commission=True))
    assert _close(edges[Spot.BANKER] * 100, "1.458104", 6)


def test_commission_rate_moves_the_banker_edge() -> None:
    """Without commission a 1:1 Banker bet favours the player by P(B) - P(P)."""
    odds = compute_odds(ShoeComposition.full(8))
    edges = house_edges(odds, Paytable(banker_commission_bp=0))
    assert edges[Spot.BANKER] == odds.player - odds.banker


def test_dealt_cards_change_the_odds() -> None:
    """Removing dealt cards gives a new exact distribution that still sums to one."""
    full = compute_odds(ShoeComposition.full(8))
    dealt = [parse_card(text) for text in ["Kh", "5", "3d", "9", "9s", "8"]]
    shoe = shoe_after(8, dealt)
    assert shoe.total == 416 - 6
    odds = compute_odds(shoe)
    assert odds.banker + odds.player + odds.tie == 1
    assert (odds.banker, odds.player, odds.tie) != (full.banker, full.player, full.tie)
    assert odds.player_pair != full.player_pair


def test_removing_every_eight_and_nine_changes_the_odds() -> None:
    """With every 8 and 9 gone from one deck the odds move away from the full shoe."""
    dealt = [Card(rank) for rank in ("8", "9") for _ in range(4)]
    odds = compute_odds(shoe_after(1, dealt))
    assert odds.banker + odds.player + odds.tie == 1
    assert odds.banker != compute_odds(ShoeComposition.full(1)).banker


def _brute_force(ranks: list[str], paytable: Paytable) -> tuple[Counter[object], int]:
    """Outcome counts over every ordered choice of six cards, via resolve_coup."""
    cards = [Card(rank) for rank in ranks]
    counts: Counter[object] = Counter()
    total = 0
    for order in permutations(cards, 6):
        coup = resolve_coup(order)
        total += 1
        counts[(coup.player_total, coup.banker_total)] += 1
        counts[("pair", "player")] += coup.player_pair
        counts[("pair", "banker")] += coup.banker_pair
        for spot in Spot:
            winnings = paytable.winnings(spot, 20_000, coup)
            counts[("win", spot)] += -20_000 if winnings is None else winnings
    return counts, total


@pytest.mark.parametrize("paytable", [Paytable(), Paytable(no_commission=True, tie_pays=9)])
def test_enumeration_agrees_with_resolve_coup(paytable: Paytable) -> None:
    """On a small shoe, value enumeration equals dealing every permutation through the tableau."""
    ranks = ["A", "A", "K", "10", "5", "5", "6", "3"]
    counts, total = _brute_force(ranks, paytable)
    shoe = ShoeComposition(tuple(ranks.count(rank) for rank in RANKS))
    odds = compute_odds(shoe)
    for p in range(10):
        for b in range(10):
            assert odds.totals[p][b] == Fraction(counts[(p, b)], total)
    assert odds.player_pair == Fraction(counts[("pair", "player")], total)
    assert odds.banker_pair == Fraction(counts[("pair", "banker")], total)
    edges = house_edges(odds, paytable)
    for spot in Spot:
        assert edges[spot] == -Fraction(counts[("win", spot)], total * 20_000)


def test_removing_more_cards_than_exist_is_an_error() -> None:
    """A rank that runs out, or a suited card dealt more often than there are decks, is refused."""
    with pytest.raises(ValueError, match="no K left"):
        shoe_after(1, [Card("K")] * 5)
    with pytest.raises(ValueError, match=r"2 x Kh dealt, but 1 decks hold 1"):
        shoe_after(1, [parse_card("Kh"), parse_card("Kh")])


def test_shoe_needs_six_cards_and_a_deck() -> None:
    """Odds need at least six cards in the shoe, and a shoe at least one deck."""
    with pytest.raises(ValueError, match="at least 6"):
        compute_odds(ShoeComposition((1,) * 5 + (0,) * 8))
    with pytest.raises(ValueError, match="at least 1"):
        ShoeComposition.full(0)
    with pytest.raises(ValueError, match="13 non-negative"):
        ShoeComposition((1, 2))
