"""Scoreboard roads from a sequence of results: Bead Plate, Big Road and the derived roads.

Rules: shared/reference/baccarat.md, "Scoreboard roads". The Big Road is placed on a grid of
six rows with the dragon tail; the derived roads (Big Eye Boy, Small Road, Cockroach Pig) are
computed on the logical Big Road columns (streaks, ties ignored), so the tail never changes them.

Pairs: beside the results, one pair code per coup (`pair_code`: "0" none, "1" Player pair,
"2" Banker pair, "3" both) says whether the first two cards of a hand were of one rank. A Bead
Plate cell carries its coup's pairs; a Big Road cell carries the pairs of the decision it
records (a tie's pairs are on its Bead Plate cell only, as its slash has no cell of its own).
"""

from __future__ import annotations

from collections.abc import Iterable, Sequence
from dataclasses import dataclass
from enum import StrEnum

from server.core.coup import Winner

__all__ = [
    "ROWS",
    "BeadCell",
    "BigRoadCell",
    "Mark",
    "Roads",
    "build_roads",
    "derived_mark",
    "pair_code",
    "pair_flags",
    "parse_results",
    "to_winner",
]

ROWS = 6
_LETTERS = {"B": Winner.BANKER, "P": Winner.PLAYER, "T": Winner.TIE}
# Derived roads and the column offset k they compare against.
_DERIVED = {"big_eye_boy": 1, "small_road": 2, "cockroach_pig": 3}
_PLAYER_PAIR, _BANKER_PAIR = 1, 2  # the bits of a pair code


class Mark(StrEnum):
    """A derived-road mark: regular or choppy, not Banker or Player."""

    RED = "red"
    BLUE = "blue"


@dataclass(frozen=True, slots=True)
class BeadCell:
    row: int
    col: int
    winner: Winner
    player_pair: bool = False  # the coup's Player hand began with a pair
    banker_pair: bool = False

    def to_dict(self) -> dict[str, object]:
        return {
            "row": self.row,
            "col": self.col,
            "winner": self.winner.value,
            "player_pair": self.player_pair,
            "banker_pair": self.banker_pair,
        }


@dataclass(frozen=True, slots=True)
class BigRoadCell:
    row: int
    col: int
    winner: Winner
    ties: int = 0  # ties drawn as a slash with this count on the cell
    player_pair: bool = False  # the decision's coup had a Player pair (its ties' do not count)
    banker_pair: bool = False

    def to_dict(self) -> dict[str, object]:
        return {
            "row": self.row,
            "col": self.col,
            "winner": self.winner.value,
            "ties": self.ties,
            "player_pair": self.player_pair,
            "banker_pair": self.banker_pair,
        }


@dataclass(frozen=True, slots=True)
class Roads:
    bead_plate: tuple[BeadCell, ...]
    big_road: tuple[BigRoadCell, ...]
    big_eye_boy: tuple[Mark, ...]
    small_road: tuple[Mark, ...]
    cockroach_pig: tuple[Mark, ...]

    def to_dict(self) -> dict[str, object]:
        return {
            "bead_plate": [cell.to_dict() for cell in self.bead_plate],
            "big_road": [cell.to_dict() for cell in self.big_road],
            "big_eye_boy": [mark.value for mark in self.big_eye_boy],
            "small_road": [mark.value for mark in self.small_road],
            "cockroach_pig": [mark.value for mark in self.cockroach_pig],
        }


def parse_results(text: str) -> list[Winner]:
    """'BPPBTB' (any case, whitespace ignored) -> winners; ValueError names a bad letter."""
    results = []
    for position, letter in enumerate(text, start=1):
        if letter.isspace():
            continue
        winner = _LETTERS.get(letter.upper())
        if winner is None:
            raise ValueError(
                f"bad result {letter!r} at position {position}: use B (Banker), P (Player), T (Tie)"
            )
        results.append(winner)
    return results


def to_winner(result: Winner | str) -> Winner:
    """A Winner from a Winner, a letter B/P/T, or a Winner value such as 'banker'."""
    if isinstance(result, Winner):
        return result
    letter = _LETTERS.get(result.upper())
    if letter is not None:
        return letter
    try:
        return Winner(result.lower())
    except ValueError:
        raise ValueError(f"bad result {result!r}: use B, P, T or banker, player, tie") from None


def pair_code(player_pair: bool, banker_pair: bool) -> str:
    """One coup's pairs as one character: "0" none, "1" Player, "2" Banker, "3" both."""
    return str((_PLAYER_PAIR if player_pair else 0) | (_BANKER_PAIR if banker_pair else 0))


def pair_flags(code: str) -> tuple[bool, bool]:
    """(player_pair, banker_pair) of a pair code; ValueError for anything but 0-3."""
    if code not in ("0", "1", "2", "3"):
        raise ValueError(f"bad pair code {code!r}: use 0 (none), 1 (Player), 2 (Banker), 3 (both)")
    bits = int(code)
    return bool(bits & _PLAYER_PAIR), bool(bits & _BANKER_PAIR)


def derived_mark(columns: Sequence[int], k: int) -> Mark | None:
    """The mark for the entry just added at the foot of the last logical column, or None.

    `columns` are the Big Road streak lengths so far. Rule (baccarat.md): at 1-based row m of
    column n, if m >= 2 compare with column n-k (length p): red unless m == p + 1; if m == 1,
    red if columns n-1 and n-1-k are equally long, else blue. No mark if a column is missing.
    """
    n, m = len(columns) - 1, columns[-1]
    if m >= 2:
        if n - k < 0:
            return None
        return Mark.BLUE if m == columns[n - k] + 1 else Mark.RED
    if n - 1 - k < 0:
        return None
    return Mark.RED if columns[n - 1] == columns[n - 1 - k] else Mark.BLUE


class _BigRoad:
    """Places decisions on the six-row grid and keeps the logical columns beside it."""

    def __init__(self) -> None:
        self.cells: list[tuple[int, int, Winner]] = []
        self.pairs: list[tuple[bool, bool]] = []  # (player_pair, banker_pair) of each cell
        self.ties: list[int] = []
        self.columns: list[int] = []  # logical streak lengths, for the derived roads
        self.occupied: set[tuple[int, int]] = set()
        self.start_col = -1  # grid column where the current streak started
        self.tailing = False  # the current streak has turned right
        self.early_ties = 0  # ties before the first decision: they go on the first cell

    def add_tie(self) -> None:
        if self.ties:
            self.ties[-1] += 1
        else:
            self.early_ties += 1

    def add_decision(self, winner: Winner, pairs: tuple[bool, bool] = (False, False)) -> None:
        row, col = self._next_cell(winner)
        self.occupied.add((row, col))
        self.cells.append((row, col, winner))
        self.pairs.append(pairs)
        self.ties.append(self.early_ties if not self.ties else 0)

    def _next_cell(self, winner: Winner) -> tuple[int, int]:
        if not self.cells or self.cells[-1][2] is not winner:
            self.columns.append(1)
            return self._new_streak()
        self.columns[-1] += 1
        row, col, _ = self.cells[-1]
        # Dragon tail: turn right at the bottom row, or where an earlier tail is below.
        if self.tailing or row + 1 >= ROWS or (row + 1, col) in self.occupied:
            self.tailing = True
            return row, col + 1
        return row + 1, col

    def _new_streak(self) -> tuple[int, int]:
        col = self.start_col + 1
        while (0, col) in self.occupied:  # only when an earlier tail runs along the top row
            col += 1
        self.start_col, self.tailing = col, False
        return 0, col

    def frozen(self) -> tuple[BigRoadCell, ...]:
        return tuple(
            BigRoadCell(row, col, winner, ties, player_pair, banker_pair)
            for (row, col, winner), ties, (player_pair, banker_pair) in zip(
                self.cells, self.ties, self.pairs, strict=True
            )
        )


def build_roads(results: Iterable[Winner | str], pairs: str = "") -> Roads:
    """Every road for these results (Winner values or the letters B/P/T), oldest first.

    `pairs` holds one pair code (see pair_code) per result, in the same order; a result
    without one (a shorter string, or none) had no pair. ValueError for more codes than
    results or a bad code."""
    winners = [to_winner(result) for result in results]
    if len(pairs) > len(winners):
        raise ValueError(f"{len(pairs)} pair codes for {len(winners)} results")
    flags = [pair_flags(code) for code in pairs.ljust(len(winners), "0")]
    bead = tuple(
        BeadCell(i % ROWS, i // ROWS, winner, *flags[i]) for i, winner in enumerate(winners)
    )
    big = _BigRoad()
    derived: dict[str, list[Mark]] = {name: [] for name in _DERIVED}
    for winner, coup_pairs in zip(winners, flags, strict=True):
        if winner is Winner.TIE:
            big.add_tie()
            continue
        big.add_decision(winner, coup_pairs)
        for name, k in _DERIVED.items():
            mark = derived_mark(big.columns, k)
            if mark is not None:
                derived[name].append(mark)
    return Roads(
        bead_plate=bead,
        big_road=big.frozen(),
        big_eye_boy=tuple(derived["big_eye_boy"]),
        small_road=tuple(derived["small_road"]),
        cockroach_pig=tuple(derived["cockroach_pig"]),
    )
