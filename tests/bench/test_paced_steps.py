"""bench/bets.py's paced steps: a step that keeps up but misses the ack p99 is run once more
at the same rate before the steps end; a step that does not keep up ends them at once."""

from __future__ import annotations

from typing import Any

import pytest

from bench import bets


def _scripted(p99s: dict[int, list[float]], behind: frozenset[int] = frozenset()) -> Any:
    """A stand-in for _paced_step: each rate's p99s in turn; `behind`: rates not kept up."""
    tried: list[int] = []

    async def step(conns: Any, round_no: int, rate: int, seconds: float, meters: Any) -> Any:
        tried.append(rate)
        accepted = rate // 2 if rate in behind else rate
        p99 = p99s[rate].pop(0)
        return {"offered_per_s": rate, "accepted_per_s": accepted, "rejected": {}} | {
            "ack_ms": {"p50": 0.5, "p99": p99, "max": p99}
        }

    return step, tried


async def test_one_missed_step_is_run_again_and_a_second_miss_ends_the_steps(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    step, tried = _scripted({2000: [1.0], 4000: [9.0, 2.0], 6000: [7.0, 8.0]})
    monkeypatch.setattr(bets, "_paced_step", step)
    steps, best = await bets._paced([], 1, 2.0, None)  # type: ignore[arg-type]
    assert tried == [2000, 4000, 4000, 6000, 6000]
    assert best == 4000  # its second try passed
    assert [s["retry"] for s in steps] == [False, False, True, False, True]


async def test_a_step_not_kept_up_ends_the_steps_without_a_second_try(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    step, tried = _scripted({2000: [1.0], 4000: [1.0]}, behind=frozenset({4000}))
    monkeypatch.setattr(bets, "_paced_step", step)
    steps, best = await bets._paced([], 1, 2.0, None)  # type: ignore[arg-type]
    assert tried == [2000, 4000] and best == 2000 and len(steps) == 2
