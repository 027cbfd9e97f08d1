"""RNG statistics of bac-shoe-v1 (issue 18): deal many shoes, test cards and outcomes.

    .venv/bin/python bench/fairness_stats.py                      # 10,000 shoes, fresh seeds
    .venv/bin/python bench/fairness_stats.py --seed demo --json   # reproducible, as JSON
    make fairness-stats ARGS="--shoes 20000"

Each shoe gets a fresh 32-byte seed (`secrets`, or HMAC-SHA256 of `--seed` and the shoe's
number) and 0-3 player entropy values, hence a client seed; the bac-shoe-v1 stream
(`server.core.fair.Stream`) shuffles it at the table's own seal (`close_betting` of the
shoe's first round), and the shoe is
played through the table's state machine (`server.core.table`: burn, coups, the cut card and
the one more hand) until the table wants a new shoe. A sample of shoes is checked against
`server.core.fair.shuffle`, the committed shuffle itself. Then:

- rank by position: the 13 ranks' counts at each of the N positions;
- rank at the worst position: the same, one position at a time, Bonferroni over N;
- card by position: where each of the N cards of the unshuffled shoe lands;
- outcomes: Banker, Player and Tie counts against the exact probabilities of
  server.core.odds, and each pair bet the same way;
- runs: a Wald-Wolfowitz runs test on the Banker/Player sequence, ties removed.

docs/fairness.md ("RNG statistics") explains the statistics, their degrees of freedom and
the figures measured. The exit status is 1 when a p-value is below `--alpha` (0.001).
"""

from __future__ import annotations

import argparse
import hashlib
import hmac
import itertools
import json
import math
import secrets
import struct
import sys
import time
from collections.abc import Callable, Sequence
from dataclasses import asdict, dataclass, field
from fractions import Fraction
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from server.core.cards import RANKS, Card
from server.core.fair import Stream, canonical_shoe, client_seed, shuffle
from server.core.odds import ShoeComposition, compute_odds
from server.core.roads import pair_code
from server.core.rules import TableRules
from server.core.shoe import RandRange, fisher_yates
from server.core.table import (
    TableState,
    close_betting,
    coup_of,
    deal_next_card,
    open_round,
    settle_round,
)

__all__ = [
    "CHECK_EVERY",
    "PlayedShoe",
    "Tally",
    "TestResult",
    "chi2_sf",
    "fixed_margin_chi_square",
    "main",
    "normal_sf_two_sided",
    "pearson",
    "play_shoe",
    "regularized_gamma_q",
    "runs_test",
    "shoe_inputs",
]

CHECK_EVERY = 100  # every 100th shoe (and the first) is compared with fair.shuffle's
COUP_WINDOW = 6  # a coup's cards lie in the six from its first (P1 B1 P2 B2 P3 B3)
_OUTCOMES = ("B", "P", "T")
_EPS = 1e-15
_TINY = 1e-300


# --- distributions -------------------------------------------------------------------------


def regularized_gamma_q(a: float, x: float) -> float:
    """Q(a, x) = Gamma(a, x) / Gamma(a), the upper regularized incomplete gamma function.

    A series for P = 1 - Q below x = a + 1, a continued fraction (modified Lentz) above
    (Numerical Recipes, 6.2); both converge in O(sqrt(a)) terms, so large a is fine. Raises
    ArithmeticError rather than return a value that did not converge.
    """
    if a <= 0 or x < 0 or math.isnan(x):
        raise ValueError(f"Q(a, x) needs a > 0 and x >= 0, got a={a}, x={x}")
    if x == 0:
        return 1.0
    if math.isinf(x):
        return 0.0
    log_prefix = -x + a * math.log(x) - math.lgamma(a)
    limit = 1000 + int(50 * math.sqrt(a))
    if x < a + 1:
        term = total = 1.0 / a
        ap = a
        for _ in range(limit):
            ap += 1
            term *= x / ap
            total += term
            if abs(term) < abs(total) * _EPS:
                return max(0.0, 1.0 - total * math.exp(log_prefix))
        raise ArithmeticError(f"gamma series did not converge for a={a}, x={x}")
    b = x + 1 - a
    c = 1 / _TINY
    d = 1 / b
    h = d
    for i in range(1, limit):
        an = -i * (i - a)
        b += 2
        d = an * d + b
        d = _TINY if abs(d) < _TINY else d
        c = b + an / c
        c = _TINY if abs(c) < _TINY else c
        d = 1 / d
        delta = d * c
        h *= delta
        if abs(delta - 1) < _EPS:
            return math.exp(log_prefix) * h
    raise ArithmeticError(f"gamma continued fraction did not converge for a={a}, x={x}")


def chi2_sf(x: float, df: int) -> float:
    """P(X >= x) for X chi-square with df degrees of freedom: Q(df/2, x/2)."""
    if df < 1:
        raise ValueError(f"df must be at least 1, got {df}")
    return regularized_gamma_q(df / 2, max(x, 0.0) / 2)


def normal_sf_two_sided(z: float) -> float:
    """P(|Z| >= |z|) for a standard normal Z."""
    return math.erfc(abs(z) / math.sqrt(2))


# --- statistics ------------------------------------------------------------------------------


@dataclass(frozen=True, slots=True)
class TestResult:
    """One statistic: its value, degrees of freedom (0 for a z-score) and p-value."""

    __test__ = False  # not a pytest class

    name: str
    statistic: float
    df: int
    p_value: float
    detail: str = ""

    def passed(self, alpha: float) -> bool:
        return self.p_value >= alpha


def pearson(observed: Sequence[float], expected: Sequence[float]) -> float:
    """Pearson's sum of (O - E)^2 / E."""
    if len(observed) != len(expected):
        raise ValueError("observed and expected differ in length")
    return sum((o - e) ** 2 / e for o, e in zip(observed, expected, strict=True))


def fixed_margin_chi_square(
    table: Sequence[Sequence[int]], row_sizes: Sequence[int], col_sizes: Sequence[int], shoes: int
) -> tuple[float, int]:
    """Pearson's statistic for a table summed over `shoes` random permutations, and its df.

    Each shoe is a uniformly random permutation of N cards; a row is a group of cards
    (`row_sizes[g]` of them: a rank, or one card), a column a group of positions
    (`col_sizes[h]`), and the cell counts cards of the row's group at the column's positions.
    Every shoe then adds row_sizes[g] * col_sizes[h] / N to a cell on average, and both
    margins are fixed. With the shoes independent, the centred table is asymptotically normal
    with covariance N / (N - 1) times that of independent multinomial draws (sampling without
    replacement), so the Pearson sum times (N - 1) / N is chi-square with
    (rows - 1) * (cols - 1) degrees of freedom. One shoe alone gives exactly the df.
    """
    size = sum(row_sizes)
    if size != sum(col_sizes) or size < 2:
        raise ValueError("row and column groups must both cover the same N >= 2 cards")
    total = 0.0
    for row, a in zip(table, row_sizes, strict=True):
        for observed, b in zip(row, col_sizes, strict=True):
            expected = shoes * a * b / size
            total += (observed - expected) ** 2 / expected
    df = (len(row_sizes) - 1) * (len(col_sizes) - 1)
    return total * (size - 1) / size, df


@dataclass(frozen=True, slots=True)
class Runs:
    banker: int
    player: int
    runs: int
    expected: float
    variance: float
    z: float
    p_value: float


def runs_test(sequence: str) -> Runs:
    """Wald-Wolfowitz runs test of a B/P sequence (other letters, ties, are dropped first).

    With n1 B and n2 P (n = n1 + n2) the number of runs R has, under independence, mean
    1 + 2 n1 n2 / n and variance 2 n1 n2 (2 n1 n2 - n) / (n^2 (n - 1)); z = (R - mean) / sd,
    two-sided p. Too few runs means streaks, too many means alternation.
    """
    letters = [c for c in sequence if c in "BP"]
    n1, n2 = letters.count("B"), letters.count("P")
    n = n1 + n2
    if n1 == 0 or n2 == 0:
        raise ValueError("the runs test needs both B and P in the sequence")
    runs = 1 + sum(1 for prev, cur in itertools.pairwise(letters) if prev != cur)
    expected = 1 + 2 * n1 * n2 / n
    variance = 2 * n1 * n2 * (2 * n1 * n2 - n) / (n * n * (n - 1))
    z = (runs - expected) / math.sqrt(variance)
    return Runs(n1, n2, runs, expected, variance, z, normal_sf_two_sided(z))


# --- dealing ---------------------------------------------------------------------------------


class _Recording:
    """The bac-shoe-v1 stream as the table's rng, keeping every draw for a replay."""

    def __init__(self, stream: RandRange) -> None:
        self._stream = stream
        self.draws: list[int] = []

    def randrange(self, stop: int, /) -> int:
        value = self._stream.randrange(stop)
        self.draws.append(value)
        return value


class _Replay:
    def __init__(self, draws: list[int]) -> None:
        self._draws = iter(draws)

    def randrange(self, stop: int, /) -> int:
        return next(self._draws)


# open_round wants a seed for each new shoe's commitment; the shoe itself is shuffled at the
# seal by the bench's source (close_betting's `rig`), so any 32 bytes do.
_COMMIT_SEED = bytes(32)


@dataclass(frozen=True, slots=True)
class PlayedShoe:
    """What one shoe gave: where each card of the unshuffled shoe landed, and its coups."""

    order: tuple[int, ...]  # order[p] = index in canonical_shoe of the card at position p
    results: str  # one letter per coup, B/P/T, as the table records it
    pairs: str  # one pair code per coup (roads.pair_code)
    starts: tuple[int, ...]  # each coup's first position


def play_shoe(
    rules: TableRules, rng: RandRange, *, check: tuple[bytes, bytes] | None = None
) -> PlayedShoe:
    """Shuffle a shoe with `rng` at the table's seal and play it as the table does.

    Rounds go open, close, every card, settle (no bets: cards never depend on them) until
    open_round commits a new shoe. `check` = (seed, client seed) also compares the shoe
    with server.core.fair.shuffle's (cards and cut card); AssertionError if they differ.
    """
    recording = _Recording(rng)
    state = open_round(TableState("stats"), rules, 0, 0, _COMMIT_SEED).state
    # The seal shuffles the shoe: with a `rig`, by Fisher-Yates over canonical_shoe driven by
    # `rng`, exactly as the committed stream drives it (the cut card: the rules' one).
    state = close_betting(state, rig=recording).state
    shoe = state.shoe
    assert shoe is not None
    # The same draws replayed over copies of the unshuffled shoe told apart by identity say
    # where each of its cards went (the eight aces of clubs are equal, not the same object).
    canonical = canonical_shoe(rules.decks)
    copies = [Card(card.rank, card.suit) for card in canonical]
    index_of = {id(card): i for i, card in enumerate(copies)}
    fisher_yates(copies, _Replay(recording.draws))
    if copies != shoe.cards:
        raise AssertionError("the replayed order is not the table's shoe")
    order = tuple(index_of[id(card)] for card in copies)
    if check is not None:
        seed, client = check
        cut = rules.cut_card_from_end
        committed = shuffle(seed, client, rules.decks, (cut, cut))
        if list(committed.cards) != shoe.cards or committed.cut_index != shoe.cut_index:
            raise AssertionError("the table's shoe is not fair.shuffle's")
    starts: list[int] = []
    while True:
        assert state.shoe is not None
        starts.append(state.shoe.position)  # after the burn: the coup's first card
        for _ in range(coup_of(state).cards_used):
            state = deal_next_card(state).state
        state = settle_round(state, rules, [])[0].state
        opened = open_round(state, rules, 0, 0, _COMMIT_SEED)
        if any(event["kind"] == "shoe_committed" for event in opened.events):
            break  # the table wants a new shoe: this one is over
        state = close_betting(opened.state).state
    return PlayedShoe(order, state.results, state.pairs, tuple(starts))


def shoe_inputs(master: bytes | None, number: int) -> tuple[bytes, list[str]]:
    """Shoe `number`'s seed and players' entropy values.

    With a master seed, seed = HMAC-SHA256(master, "seed" || u64(number)) and 0-3 values,
    each the hex of HMAC-SHA256(master, "entropy" || u64(number) || u32(k)) cut to 8-64
    characters; without one, 32 bytes from `secrets` and 0-3 values of `secrets.token_hex`.
    """
    if master is None:
        count = secrets.randbelow(4)
        return secrets.token_bytes(32), [secrets.token_hex(4 + k * 6) for k in range(count)]
    tag = struct.pack(">Q", number)
    seed = hmac.new(master, b"seed" + tag, hashlib.sha256).digest()
    count = seed[0] % 4
    values = []
    for k in range(count):
        digest = hmac.new(master, b"entropy" + tag + struct.pack(">I", k), hashlib.sha256)
        values.append(digest.hexdigest()[: 8 + 18 * k])
    return seed, values


@dataclass(slots=True)
class Tally:
    """Counts accumulated over shoes."""

    size: int
    cells: list[int]  # cells[card * size + position]: card of canonical_shoe at position
    results: list[str] = field(default_factory=list)  # per shoe, in play order
    outcome_counts: dict[str, int] = field(default_factory=lambda: dict.fromkeys(_OUTCOMES, 0))
    player_pairs: int = 0
    banker_pairs: int = 0
    counted_coups: int = 0  # coups with six cards of the shoe from their first (see add)
    coups: int = 0
    shoes: int = 0
    checked: int = 0  # shoes compared with fair.shuffle

    @classmethod
    def empty(cls, decks: int) -> Tally:
        size = 52 * decks
        return cls(size, [0] * (size * size))

    def add(self, shoe: PlayedShoe) -> None:
        size, cells = self.size, self.cells
        for position, card in enumerate(shoe.order):
            cells[card * size + position] += 1
        self.results.append(shoe.results)
        self.coups += len(shoe.results)
        self.shoes += 1
        # The coups tested against the exact odds: those that start at least six cards
        # before the shoe's end. Whether such a coup is dealt is decided by the cards before
        # it, so (optional stopping) its cards are distributed as a full shoe's first six.
        # Nearer the end the table looks at the coup's own cards to see whether it fits.
        both = pair_code(True, True)
        for letter, pair, start in zip(shoe.results, shoe.pairs, shoe.starts, strict=True):
            if start + COUP_WINDOW > size:
                continue
            self.counted_coups += 1
            self.outcome_counts[letter] += 1
            self.player_pairs += pair in (pair_code(True, False), both)
            self.banker_pairs += pair in (pair_code(False, True), both)


# --- the tests -------------------------------------------------------------------------------


def _rank_table(tally: Tally, decks: int) -> tuple[list[list[int]], list[int]]:
    """Rows: the 13 ranks; columns: the positions. And each rank's number of cards."""
    canonical = canonical_shoe(decks)
    size = tally.size
    table = [[0] * size for _ in RANKS]
    sizes = [0] * len(RANKS)
    for card_index, card in enumerate(canonical):
        rank = RANKS.index(card.rank)
        sizes[rank] += 1
        row = table[rank]
        base = card_index * size
        for position in range(size):
            row[position] += tally.cells[base + position]
    return table, sizes


def analyse(tally: Tally, decks: int) -> list[TestResult]:
    """Every statistic of the run, in the order the report shows them."""
    size, shoes = tally.size, tally.shoes
    tests: list[TestResult] = []

    ranks, rank_sizes = _rank_table(tally, decks)
    stat, df = fixed_margin_chi_square(ranks, rank_sizes, [1] * size, shoes)
    tests.append(
        TestResult(
            f"rank by position ({len(RANKS)} x {size})",
            stat,
            df,
            chi2_sf(stat, df),
            "Pearson x (N-1)/N over every position's rank counts",
        )
    )

    worst_p, worst_position, worst_stat = 1.0, 0, 0.0
    for position in range(size):
        observed = [row[position] for row in ranks]
        expected = [shoes * n / size for n in rank_sizes]
        position_stat = pearson(observed, expected)
        p = chi2_sf(position_stat, len(RANKS) - 1)
        if p < worst_p:
            worst_p, worst_position, worst_stat = p, position, position_stat
    tests.append(
        TestResult(
            "rank at the worst position",
            worst_stat,
            len(RANKS) - 1,
            min(1.0, worst_p * size),
            f"position {worst_position}: p {worst_p:.3g} before Bonferroni over {size}",
        )
    )

    cells = tally.cells
    table = [cells[card * size : (card + 1) * size] for card in range(size)]
    stat, df = fixed_margin_chi_square(table, [1] * size, [1] * size, shoes)
    tests.append(
        TestResult(
            f"card by position ({size} x {size})",
            stat,
            df,
            chi2_sf(stat, df),
            "where each card of the unshuffled shoe lands",
        )
    )

    odds = compute_odds(ShoeComposition.full(decks))
    n = tally.counted_coups
    probabilities = {"B": odds.banker, "P": odds.player, "T": odds.tie}
    observed = [tally.outcome_counts[k] for k in _OUTCOMES]
    expected = [float(n * probabilities[k]) for k in _OUTCOMES]
    stat = pearson(observed, expected)
    shares = ", ".join(
        f"{k} {o / n:.5f} (exact {float(probabilities[k]):.5f})"
        for k, o in zip(_OUTCOMES, observed, strict=True)
    )
    tests.append(TestResult("Banker/Player/Tie", stat, 2, chi2_sf(stat, 2), shares))
    for name, count, p_pair in (
        ("Player pair", tally.player_pairs, odds.player_pair),
        ("Banker pair", tally.banker_pairs, odds.banker_pair),
    ):
        stat = _binary_chi_square(count, n, p_pair)
        detail = f"{count / n:.5f} (exact {float(p_pair):.5f})"
        tests.append(TestResult(name, stat, 1, chi2_sf(stat, 1), detail))

    runs = runs_test("".join(tally.results))
    tests.append(
        TestResult(
            "runs of Banker/Player",
            runs.z,
            0,
            runs.p_value,
            f"{runs.runs} runs, expected {runs.expected:.1f} (B {runs.banker}, P {runs.player})",
        )
    )
    return tests


def _binary_chi_square(count: int, n: int, p: Fraction) -> float:
    return pearson([count, n - count], [float(n * p), float(n * (1 - p))])


# --- the command -----------------------------------------------------------------------------


def deal(
    shoes: int,
    rules: TableRules,
    master: bytes | None,
    *,
    progress: Callable[[int, float], None] | None = None,
    check_every: int = CHECK_EVERY,
) -> Tally:
    """Deal and play `shoes` shoes through bac-shoe-v1 and the table, and count."""
    tally = Tally.empty(rules.decks)
    started = time.perf_counter()
    for number in range(shoes):
        seed, values = shoe_inputs(master, number)
        client = client_seed(values)
        check = (seed, client) if number % check_every == 0 else None
        tally.add(play_shoe(rules, Stream(seed, client), check=check))
        tally.checked += check is not None
        if progress is not None:
            progress(number + 1, time.perf_counter() - started)
    return tally


def _progress_printer(total: int, every: int) -> Callable[[int, float], None]:
    def show(done: int, elapsed: float) -> None:
        if done % every and done != total:
            return
        left = elapsed / done * (total - done)
        print(
            f"  {done:>7,}/{total:,} shoes  {elapsed:7.1f} s  ~{left:5.0f} s left",
            file=sys.stderr,
            flush=True,
        )

    return show


def _report_text(report: dict[str, object], tests: list[TestResult], alpha: float) -> str:
    lines = [
        f"bac-shoe-v1 RNG statistics: {report['shoes']:,} shoes of {report['decks']} decks "
        f"(cut card {report['cut_card_from_end']} from the end), {report['coups']:,} coups "
        f"({report['counted_coups']:,} against the exact odds), seeds {report['seeds']}, "
        f"{report['checked']} shoes checked against fair.shuffle, {report['elapsed_s']} s",
        f"{'statistic':<30} {'value':>12} {'df':>7} {'p-value':>9}  at alpha {alpha:g}",
    ]
    for test in tests:
        df = str(test.df) if test.df else "z"
        verdict = "pass" if test.passed(alpha) else "FAIL"
        lines.append(
            f"{test.name:<30} {test.statistic:>12.3f} {df:>7} {test.p_value:>9.4f}  {verdict}"
            f"  {test.detail}"
        )
    failed = [t.name for t in tests if not t.passed(alpha)]
    lines.append("all passed" if not failed else "FAILED: " + ", ".join(failed))
    return "\n".join(lines)


def parse_args(argv: Sequence[str] | None) -> argparse.Namespace:
    parser = argparse.ArgumentParser(description=(__doc__ or "").splitlines()[0])
    parser.add_argument("--shoes", type=int, default=10_000, help="shoes to deal (10000)")
    parser.add_argument("--seed", help="reproducible run: per-shoe seeds are HMACs of this")
    parser.add_argument("--decks", type=int, default=8, help="decks per shoe (8)")
    parser.add_argument("--cut", type=int, default=7, help="cards behind the cut card (7)")
    parser.add_argument("--alpha", type=float, default=0.001, help="fail below this p (0.001)")
    parser.add_argument("--json", action="store_true", help="print the report as JSON")
    parser.add_argument("--progress-every", type=int, default=1000, help="shoes per line")
    parser.add_argument("--quiet", action="store_true", help="no progress on stderr")
    args = parser.parse_args(argv)
    if args.shoes < 1:
        parser.error("--shoes must be at least 1")
    return args


def main(argv: Sequence[str] | None = None) -> int:
    args = parse_args(argv)
    rules = TableRules("stats", decks=args.decks, cut_card_from_end=args.cut)
    master = None if args.seed is None else args.seed.encode("utf-8")
    progress = None if args.quiet else _progress_printer(args.shoes, args.progress_every)
    started = time.perf_counter()
    tally = deal(args.shoes, rules, master, progress=progress)
    dealt_s = time.perf_counter() - started
    tests = analyse(tally, args.decks)
    elapsed = time.perf_counter() - started
    report: dict[str, object] = {
        "alg": "bac-shoe-v1",
        "shoes": tally.shoes,
        "decks": args.decks,
        "cut_card_from_end": args.cut,
        "seeds": "secrets" if master is None else f"HMAC of --seed {args.seed!r}",
        "coups": tally.coups,
        "counted_coups": tally.counted_coups,
        "outcomes": dict(tally.outcome_counts),
        "player_pairs": tally.player_pairs,
        "banker_pairs": tally.banker_pairs,
        "checked": tally.checked,
        "dealing_s": round(dealt_s, 1),
        "elapsed_s": round(elapsed, 1),
        "alpha": args.alpha,
        "tests": [asdict(t) | {"passed": t.passed(args.alpha)} for t in tests],
        "passed": all(t.passed(args.alpha) for t in tests),
    }
    if args.json:
        print(json.dumps(report, indent=2))
    else:
        print(_report_text(report, tests, args.alpha))
    return 0 if report["passed"] else 1


if __name__ == "__main__":
    sys.exit(main())
