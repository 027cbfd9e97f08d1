"""Exact odds of every bet for a shoe composition, by enumerating coups over card values.

Convention (shared/reference/baccarat.md): deal P1 B1 P2 B2 P3 B3 with depletion and weight
all six positions, so every probability is an integer count over N(N-1)...(N-5). The main bets
depend only on card values (0-9, value 0 holding 10/J/Q/K); the pair bets need ranks, and are
counted from rank counts: P(first two cards of a hand share a rank) = sum_r n_r(n_r-1)/(N(N-1)).
"""

from __future__ import annotations

from collections.abc import Iterable, Iterator
from dataclasses import dataclass
from fractions import Fraction

from server.core.bets import Paytable, Spot
from server.core.cards import RANKS, Card, card_value
from server.core.coup import Coup, Winner, banker_draws, player_draws

__all__ = ["COUP_POSITIONS", "Odds", "ShoeComposition", "compute_odds", "house_edges", "shoe_after"]

COUP_POSITIONS = 6  # P1 B1 P2 B2 P3 B3
_PER_DECK = 4  # cards of each rank in one deck
# Stake used to probe Paytable.winnings: its floors (commission in basis points, the
# no-commission half pay) are exact on it, so the edge is the per-unit edge.
_PROBE_STAKE = 20_000
# Unordered two-card values (a <= b) and how many orders each stands for.
_TWO_CARDS = tuple((a, b, 1 if a == b else 2) for a in range(10) for b in range(a, 10))


@dataclass(frozen=True, slots=True)
class ShoeComposition:
    """How many cards of each rank are in the shoe, in RANKS order."""

    rank_counts: tuple[int, ...]

    def __post_init__(self) -> None:
        if len(self.rank_counts) != len(RANKS) or min(self.rank_counts) < 0:
            raise ValueError(f"need {len(RANKS)} non-negative rank counts, got {self.rank_counts}")

    @classmethod
    def full(cls, decks: int) -> ShoeComposition:
        if decks < 1:
            raise ValueError(f"decks must be at least 1, got {decks}")
        return cls((_PER_DECK * decks,) * len(RANKS))

    @property
    def total(self) -> int:
        return sum(self.rank_counts)

    @property
    def value_counts(self) -> tuple[int, ...]:
        """Cards of each baccarat value 0-9."""
        counts = [0] * 10
        for rank, count in zip(RANKS, self.rank_counts, strict=True):
            counts[card_value(rank)] += count
        return tuple(counts)

    def without(self, cards: Iterable[Card]) -> ShoeComposition:
        """The shoe after these cards are dealt; ValueError if a rank runs out."""
        counts = list(self.rank_counts)
        for card in cards:
            index = RANKS.index(card.rank)
            if counts[index] == 0:
                raise ValueError(f"cannot remove {card}: no {card.rank} left in the shoe")
            counts[index] -= 1
        return ShoeComposition(tuple(counts))


def shoe_after(decks: int, dealt: Iterable[Card] = ()) -> ShoeComposition:
    """A full shoe of `decks` decks less the dealt cards; a suited card exists `decks` times."""
    cards = list(dealt)
    for card in set(cards):
        if card.suit is not None and cards.count(card) > decks:
            raise ValueError(f"{cards.count(card)} x {card} dealt, but {decks} decks hold {decks}")
    return ShoeComposition.full(decks).without(cards)


@dataclass(frozen=True, slots=True)
class Odds:
    """Exact probabilities: final totals [player][banker] and the two pair bets."""

    totals: tuple[tuple[Fraction, ...], ...]
    player_pair: Fraction
    banker_pair: Fraction

    def _sum(self, keep: Winner) -> Fraction:
        cells = (
            prob
            for p, row in enumerate(self.totals)
            for b, prob in enumerate(row)
            if _winner(p, b) is keep
        )
        return sum(cells, Fraction(0))

    @property
    def banker(self) -> Fraction:
        return self._sum(Winner.BANKER)

    @property
    def player(self) -> Fraction:
        return self._sum(Winner.PLAYER)

    @property
    def tie(self) -> Fraction:
        return self._sum(Winner.TIE)

    def win_probability(self, spot: Spot) -> Fraction:
        return {
            Spot.BANKER: self.banker,
            Spot.PLAYER: self.player,
            Spot.TIE: self.tie,
            Spot.PLAYER_PAIR: self.player_pair,
            Spot.BANKER_PAIR: self.banker_pair,
        }[spot]


def compute_odds(shoe: ShoeComposition) -> Odds:
    """Enumerate every coup from this shoe, exactly; needs at least six cards."""
    n = shoe.total
    if n < COUP_POSITIONS:
        raise ValueError(f"the shoe has {n} cards; odds need at least {COUP_POSITIONS}")
    denominator = n * (n - 1) * (n - 2) * (n - 3) * (n - 4) * (n - 5)
    weights = _coup_weights(list(shoe.value_counts), n)
    pair = Fraction(sum(c * (c - 1) for c in shoe.rank_counts), n * (n - 1))
    totals = tuple(tuple(Fraction(w, denominator) for w in row) for row in weights)
    return Odds(totals=totals, player_pair=pair, banker_pair=pair)


def house_edges(odds: Odds, paytable: Paytable) -> dict[Spot, Fraction]:
    """Expected loss per unit staked on each spot (a push counts as a staked, returned bet)."""
    return {spot: _edge(odds, paytable, spot) for spot in Spot}


def _edge(odds: Odds, paytable: Paytable, spot: Spot) -> Fraction:
    expected = Fraction(0)
    for prob, coup in _scenarios(odds, spot):
        winnings = paytable.winnings(spot, _PROBE_STAKE, coup)
        expected += prob * (-_PROBE_STAKE if winnings is None else winnings)
    return -expected / _PROBE_STAKE


def _scenarios(odds: Odds, spot: Spot) -> Iterator[tuple[Fraction, Coup]]:
    if spot in (Spot.PLAYER_PAIR, Spot.BANKER_PAIR):
        won = odds.win_probability(spot)
        yield won, _probe(0, 0, pair=True)
        yield 1 - won, _probe(0, 0, pair=False)
        return
    for p, row in enumerate(odds.totals):
        for b, prob in enumerate(row):
            if prob:
                yield prob, _probe(p, b, pair=False)


def _probe(player_total: int, banker_total: int, *, pair: bool) -> Coup:
    """A stand-in Coup: Paytable.winnings reads only the winner, the totals and the pairs."""
    return Coup(
        player=(),
        banker=(),
        player_total=player_total,
        banker_total=banker_total,
        winner=_winner(player_total, banker_total),
        natural=False,
        player_pair=pair,
        banker_pair=pair,
        deal_order=(),
    )


def _winner(player_total: int, banker_total: int) -> Winner:
    if player_total > banker_total:
        return Winner.PLAYER
    return Winner.BANKER if banker_total > player_total else Winner.TIE


def _coup_weights(counts: list[int], n: int) -> list[list[int]]:
    """Ways (out of n(n-1)...(n-5)) to end on each [player][banker] total.

    The weight of the first four cards is a product of falling counts per value, the same in
    any order, so each hand's two cards are taken unordered with a multiplicity.
    """
    grid = [[0] * 10 for _ in range(10)]
    for p1, p2, p_orders in _TWO_CARDS:
        w_player = p_orders * _take(counts, p1) * _take(counts, p2)
        for b1, b2, b_orders in _TWO_CARDS if w_player else ():
            weight = w_player * b_orders * _take(counts, b1) * _take(counts, b2)
            if weight:
                _finish(counts, n - 4, (p1 + p2) % 10, (b1 + b2) % 10, weight, grid)
            counts[b1] += 1
            counts[b2] += 1
        counts[p1] += 1
        counts[p2] += 1
    return grid


def _take(counts: list[int], value: int) -> int:
    """How many cards of this value are left, then remove one (the caller puts it back).

    A count may dip below zero only in a branch whose weight is already zero.
    """
    count = counts[value]
    counts[value] -= 1
    return max(count, 0)


def _finish(
    counts: list[int], left: int, player: int, banker: int, weight: int, grid: list[list[int]]
) -> None:
    """Add every way to complete the coup from two-card totals, with `left` cards remaining."""
    if player >= 8 or banker >= 8:  # a natural: both stand
        grid[player][banker] += weight * left * (left - 1)
    elif not player_draws(player):
        _banker_turn(counts, left, 2, player, banker, None, weight, grid)
    else:
        for p3 in range(10):
            if counts[p3] > 0:
                count = counts[p3]
                counts[p3] -= 1
                final = (player + p3) % 10
                _banker_turn(counts, left - 1, 1, final, banker, p3, weight * count, grid)
                counts[p3] += 1


def _banker_turn(
    counts: list[int],
    left: int,
    slots: int,
    player: int,
    banker: int,
    player_third: int | None,
    weight: int,
    grid: list[list[int]],
) -> None:
    """The Banker's tableau; `slots` positions (of six) remain, filled from `left` cards."""
    if not banker_draws(banker, player_third):
        grid[player][banker] += weight * (left if slots == 1 else left * (left - 1))
        return
    rest = 1 if slots == 1 else left - 1  # the unused sixth position after the Banker's third
    row = grid[player]
    for b3 in range(10):
        if counts[b3] > 0:
            row[(banker + b3) % 10] += weight * counts[b3] * rest
