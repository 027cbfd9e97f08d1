"""bench/fairness_stats.py: its distributions against known values, its statistics on small
hand-worked cases, and its dealing against the table and bac-shoe-v1 on a few shoes."""

from __future__ import annotations

import json
import math
import random

import pytest

from bench.fairness_stats import (
    Tally,
    analyse,
    chi2_sf,
    fixed_margin_chi_square,
    main,
    normal_sf_two_sided,
    pearson,
    play_shoe,
    regularized_gamma_q,
    runs_test,
    shoe_inputs,
)
from server.core.coup import resolve_coup
from server.core.fair import Stream, canonical_shoe, client_seed, shuffle
from server.core.rules import TableRules
from server.core.shoe import MAX_COUP_CARDS
from server.core.table import RESULT_LETTERS

SEED = bytes(range(32))
EIGHT = TableRules("stats", decks=8, cut_card_from_end=7)
ONE = TableRules("stats", decks=1, cut_card_from_end=7)


def even_df_sf(x: float, df: int) -> float:
    """The closed form for even df = 2m: e^(-x/2) * sum_{i<m} (x/2)^i / i!, in logs."""
    half = x / 2
    logs = [i * math.log(half) - math.lgamma(i + 1) - half for i in range(df // 2)]
    top = max(logs)
    return math.exp(top) * math.fsum(math.exp(v - top) for v in logs)


def wilson_hilferty_sf(x: float, df: int) -> float:
    """(x/df)^(1/3) is nearly normal, mean 1 - 2/(9 df), variance 2/(9 df)."""
    z = ((x / df) ** (1 / 3) - (1 - 2 / (9 * df))) / math.sqrt(2 / (9 * df))
    return 0.5 * math.erfc(z / math.sqrt(2))


@pytest.mark.parametrize("x", [0.01, 0.5, 2.0, 7.3, 30.0, 120.0])
def test_chi2_sf_with_two_df_is_the_exponential(x: float) -> None:
    assert chi2_sf(x, 2) == pytest.approx(math.exp(-x / 2), rel=1e-12)


@pytest.mark.parametrize("x", [0.001, 0.2, 1.0, 3.84, 10.0, 40.0])
def test_chi2_sf_with_one_df_is_the_normal_tail(x: float) -> None:
    assert chi2_sf(x, 1) == pytest.approx(math.erfc(math.sqrt(x / 2)), rel=1e-10)


@pytest.mark.parametrize(
    ("df", "x"),
    [(4, 1.0), (12, 5.0), (12, 32.909), (100, 80.0), (100, 140.0), (4980, 4800.0), (4980, 5300.0)],
)
def test_chi2_sf_matches_the_closed_form_for_even_df(df: int, x: float) -> None:
    assert chi2_sf(x, df) == pytest.approx(even_df_sf(x, df), rel=1e-9)


@pytest.mark.parametrize(("x", "df"), [(10.828, 1), (13.816, 2), (32.909, 12), (59.703, 30)])
def test_chi2_sf_at_the_tables_critical_values_for_p_0_001(x: float, df: int) -> None:
    assert chi2_sf(x, df) == pytest.approx(0.001, rel=2e-3)


@pytest.mark.parametrize("sds", [-3.0, -1.0, 0.0, 1.0, 3.3])
def test_chi2_sf_for_the_card_tests_df_agrees_with_wilson_hilferty(sds: float) -> None:
    df = 415 * 415
    x = df + sds * math.sqrt(2 * df)
    assert chi2_sf(x, df) == pytest.approx(wilson_hilferty_sf(x, df), abs=2e-4)


def test_chi2_sf_edges_and_refusals() -> None:
    assert chi2_sf(0.0, 7) == 1.0
    assert chi2_sf(-1.0, 7) == 1.0
    assert chi2_sf(math.inf, 7) == 0.0
    assert regularized_gamma_q(3.0, 0.0) == 1.0
    with pytest.raises(ValueError):
        chi2_sf(1.0, 0)
    with pytest.raises(ValueError):
        regularized_gamma_q(-1.0, 1.0)


def test_normal_sf_two_sided() -> None:
    assert normal_sf_two_sided(1.959963985) == pytest.approx(0.05, rel=1e-8)
    assert normal_sf_two_sided(-3.290526731) == pytest.approx(0.001, rel=1e-8)
    assert normal_sf_two_sided(0.0) == 1.0


def test_runs_test_on_a_worked_sequence_ties_dropped() -> None:
    # BB PP B P BBB P: 6 runs of 6 B and 4 P; mean 1 + 2*24/10, variance 48*38/(100*9).
    runs = runs_test("BBTPPBPTBBBP")
    assert (runs.banker, runs.player, runs.runs) == (6, 4, 6)
    assert runs.expected == pytest.approx(5.8)
    assert runs.variance == pytest.approx(1824 / 900)
    assert runs.z == pytest.approx(0.2 / math.sqrt(1824 / 900))
    assert runs.p_value == pytest.approx(math.erfc(runs.z / math.sqrt(2)))


def test_runs_test_sees_alternation_and_streaks() -> None:
    alternating = runs_test("BP" * 50)
    streaky = runs_test("B" * 50 + "P" * 50)
    assert alternating.runs == 100 and alternating.z > 9 and alternating.p_value < 1e-15
    assert streaky.runs == 2 and streaky.z < -9 and streaky.p_value < 1e-15
    with pytest.raises(ValueError):
        runs_test("BBBTTB")


def test_pearson() -> None:
    assert pearson([10, 20, 30], [20, 20, 20]) == pytest.approx(10.0)
    with pytest.raises(ValueError):
        pearson([1], [1, 2])


def test_fixed_margin_chi_square_on_three_cards() -> None:
    identity = [[1, 0, 0], [0, 1, 0], [0, 0, 1]]
    ones = [1, 1, 1]
    # One shoe: Pearson 6, times (N-1)/N = 2/3 gives exactly the df, (3-1)*(3-1).
    assert fixed_margin_chi_square(identity, ones, ones, 1) == pytest.approx((4.0, 4))
    twice = [[2 * c for c in row] for row in identity]  # the same order twice: 12 * 2/3
    assert fixed_margin_chi_square(twice, ones, ones, 2) == pytest.approx((8.0, 4))
    mixed = [[1, 1, 0], [0, 1, 1], [1, 0, 1]]  # identity + cycle: 1 + 2, times 2/3
    assert fixed_margin_chi_square(mixed, ones, ones, 2) == pytest.approx((2.0, 4))
    with pytest.raises(ValueError):
        fixed_margin_chi_square(identity, ones, [1, 1], 1)


def test_shoe_inputs_are_hmacs_of_the_master_seed_and_fresh_without_one() -> None:
    first, again = shoe_inputs(b"master", 5), shoe_inputs(b"master", 5)
    assert first == again
    assert shoe_inputs(b"master", 6)[0] != first[0]
    assert shoe_inputs(b"other", 5)[0] != first[0]
    counts = {len(shoe_inputs(b"master", n)[1]) for n in range(40)}
    assert counts == {0, 1, 2, 3}  # no entropy (the empty client seed) included
    fresh = shoe_inputs(None, 5)
    assert len(fresh[0]) == 32 and fresh[0] != shoe_inputs(None, 5)[0]


def test_a_played_shoe_is_fair_shuffles_shoe_dealt_by_the_tables_rules() -> None:
    cs = client_seed(["alice", "bob"])
    played = play_shoe(EIGHT, Stream(SEED, cs), check=(SEED, cs))
    committed = shuffle(SEED, cs, 8, (7, 7))
    canonical = canonical_shoe(8)
    assert sorted(played.order) == list(range(416))
    assert tuple(canonical[i] for i in played.order) == committed.cards
    assert played.starts[0] == committed.first_dealt  # the burn comes first
    for letter, start in zip(played.results, played.starts, strict=True):
        coup = resolve_coup(committed.cards[start : start + MAX_COUP_CARDS])
        assert letter == RESULT_LETTERS[coup.winner.value]
    ends = [s + resolve_coup(committed.cards[s : s + 6]).cards_used for s in played.starts]
    assert ends[:-1] == list(played.starts[1:])  # consecutive: nothing skipped
    assert played.starts[-2] < committed.cut_index <= ends[-1]  # played to the cut card
    assert len(played.results) == len(played.pairs) == len(played.starts)


def test_play_shoe_refuses_a_shoe_that_is_not_the_committed_one() -> None:
    cs = client_seed([])
    with pytest.raises(AssertionError, match=r"not fair\.shuffle"):
        play_shoe(EIGHT, Stream(SEED, client_seed(["x"])), check=(SEED, cs))


class _Stuck:
    """A broken source: always 0, so every shoe comes out in the same order."""

    def randrange(self, stop: int, /) -> int:
        return 0


def test_a_broken_shuffle_fails_the_card_tests() -> None:
    tally = Tally.empty(1)
    for _ in range(40):
        tally.add(play_shoe(ONE, _Stuck()))
    results = {t.name: t for t in analyse(tally, 1)}
    assert results["rank by position (13 x 52)"].p_value < 1e-100
    assert results["card by position (52 x 52)"].p_value < 1e-100
    assert not results["card by position (52 x 52)"].passed(0.001)


def test_a_good_shuffle_passes_on_a_small_seeded_run() -> None:
    tally = Tally.empty(1)
    for n in range(60):
        seed, values = shoe_inputs(b"small", n)
        tally.add(play_shoe(ONE, Stream(seed, client_seed(values))))
    results = analyse(tally, 1)
    assert [t.name for t in results][2:] == [
        "card by position (52 x 52)",
        "Banker/Player/Tie",
        "Player pair",
        "Banker pair",
        "runs of Banker/Player",
    ]
    assert all(t.passed(0.001) for t in results), results
    assert tally.shoes == 60 and tally.coups == sum(len(r) for r in tally.results)
    assert sum(tally.outcome_counts.values()) == tally.counted_coups <= tally.coups
    assert sum(tally.cells) == 60 * 52


def test_main_reports_json_reproducibly_and_its_exit_status_says_pass_or_fail(
    capsys: pytest.CaptureFixture[str],
) -> None:
    args = ["--shoes", "12", "--decks", "2", "--seed", "t", "--json", "--quiet"]
    assert main(args) == 0
    first = json.loads(capsys.readouterr().out)
    assert main(args) == 0
    second = json.loads(capsys.readouterr().out)
    assert first["tests"] == second["tests"] and first["outcomes"] == second["outcomes"]
    assert first["shoes"] == 12 and first["decks"] == 2 and first["passed"] is True
    assert first["checked"] == 1  # the first shoe of every CHECK_EVERY
    assert sum(first["outcomes"].values()) == first["counted_coups"]
    assert [t["passed"] for t in first["tests"]] == [True] * 7
    # Every p-value below 1 fails at alpha 1: the exit status is 1.
    assert main([*args[:-2], "--alpha", "1", "--quiet"]) == 1
    assert "FAILED: rank by position" in capsys.readouterr().out


class _Sattolo:
    """Fisher-Yates off by one (j below i, never i itself): a random cyclic order, in which
    no card keeps its place."""

    def __init__(self, seed: int) -> None:
        self._rng = random.Random(seed)

    def randrange(self, stop: int, /) -> int:
        return self._rng.randrange(stop - 1)


def test_an_off_by_one_shuffle_fails_where_each_card_lands() -> None:
    source = _Sattolo(18)
    tally = Tally.empty(1)
    for _ in range(1000):  # the empty diagonal: over 10 standard deviations
        tally.add(play_shoe(ONE, source))
    results = {t.name: t for t in analyse(tally, 1)}
    assert results["card by position (52 x 52)"].p_value < 1e-10
    assert results["Banker/Player/Tie"].passed(0.001)  # the outcomes cannot tell
