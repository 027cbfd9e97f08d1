"""bench/cores.py and the report's new tables on a hand-made run: the work per worker core,
what a larger machine needs, the generator named when it was the limit, collector pauses."""

from __future__ import annotations

import math
from typing import Any

import pytest

from bench.cores import needs, per_core, problems, scaling_rows, section_lines
from bench.report import gc_problems, section


def _gc(cpu_max: float, processes: int = 1) -> dict[str, Any]:
    one = {"count": 3, "full": 1, "max_ms": cpu_max + 1, "cpu_max_ms": cpu_max, "p99_ms": 2.0}
    return {**one, "cpu_p99_ms": 2.0, "full_max_ms": cpu_max, "missing": 0} | {
        "processes": [{"pid": 10 + i, **one} for i in range(processes)]
    }


def _bets(site: str, workers: list[float], generator: float = 0.2) -> dict[str, Any]:
    step = {
        "offered_per_s": 8_000,
        "accepted_per_s": 8_000,
        "ack_ms": {"p50": 1.0, "p99": 4.0, "max": 6.0},
        "rejected": {},
        "worker_cores": [w / 2 for w in workers],
        "redis_cores": 0.2,
        "generator_cpu": generator,
    }
    return {
        "site": site,
        "clients": 100,
        "bets_per_s": 16_000.0,
        "ack_ms": {"p50": 6.0, "p99": 10.0, "max": 20.0},
        "rejected": {},
        "server_cpu": sum(workers),
        "redis_cpu": 0.4,
        "worker_cores": workers,
        "redis_cores": 0.4,
        "generator_cpu": generator,
        "node_us_per_bet": 35.0,
        "redis_us_per_bet": 27.0,
        "paced": [step, {**step, "offered_per_s": 10_000, "ack_ms": {"p50": 2.0, "p99": 9.0}}],
        "best_paced_per_s": 8_000,
        "gc": _gc(5.0, len(workers)),
    }


def _fanout(engine: str, n: int, workers: list[float], generator: float = 0.25) -> dict[str, Any]:
    return {
        "engine": engine,
        "spectators": n,
        "connected": n,
        "connect_s": 1.0,
        "rss_per_conn_kib": 15.0,
        "latency_ms": {"p50": 10.0, "p99": 20.0, "max": 30.0},
        "first_ms": {"p50": 1.0, "p99": 2.0},
        "spread_ms": {"p50": 8.0, "p99": 9.0},
        "server_us_per_delivery": 8.0,
        "deliveries_per_s": 40_000,
        "worker_cores": workers,
        "redis_cores": 0.02 * len(workers),
        "generator_cpu": generator,
        "gc": _gc(25.0 if engine == "redisw2" else 4.0, len(workers)),
    }


RUN: dict[str, Any] = {
    "kind": "full",
    "date": "today",
    "command": "bench/run.py",
    "machine": {
        "cpu": "x",
        "cores": 2,
        "memory_gib": 1,
        "kernel": "k",
        "python": "3",
        "websockets": "w",
        "python-socketio": "s",
        "aiohttp": "a",
        "redis-server": "r",
        "pinned": True,
        "load_average": [0.1, 0.1, 0.1],
    },
    "bets": [_bets("memory", [1.0]), _bets("redis", [0.5]), _bets("redisw2", [0.4, 0.4])],
    "fanout": [
        _fanout("redis", 1_000, [0.32]),
        _fanout("redis", 10_000, [0.32]),
        _fanout("redisw2", 10_000, [0.2, 0.2], generator=0.95),
    ],
    "collector": {
        "mode": "after",
        "spectators": {
            "size": 10_000,
            "load_average": [0.2, 0.2, 0.2],
            "joins": {"count": 9, "full": 2, "max_ms": 30.0, "cpu_max_ms": 17.0, "p99_ms": 16.0}
            | {"cpu_p99_ms": 15.0},
            "window": {"count": 0, "full": 0, "max_ms": 0.0, "cpu_max_ms": 0.0, "p99_ms": 0.0}
            | {"cpu_p99_ms": 0.0},
        },
        "bets": {"size": 65_000, "error": "RuntimeError('boom')"},
    },
    "skipped": [],
}


def test_work_per_worker_core_is_the_work_over_the_cores_the_workers_used() -> None:
    rows = {(r["kind"], r["site"]): r for r in scaling_rows(RUN)}
    assert rows[("bets, closed loop", "redis")]["per_worker_core"] == 32_000  # 16,000 / 0.5
    assert rows[("bets, closed loop", "redisw2")]["per_worker_core"] == 20_000  # / (0.4 + 0.4)
    paced = rows[("bets, paced, ack p99 ≤ 5 ms", "redisw2")]
    assert paced["per_s"] == 8_000 and paced["per_worker_core"] == 20_000  # / (0.2 + 0.2)
    assert paced["workers"] == 2 and paced["total_cores"] == pytest.approx(0.8)
    assert ("bets, closed loop", "memory") not in rows  # not a scaling site
    fanout = rows[("fan-out, 10,000 spectators", "redisw2")]
    assert fanout["per_worker_core"] == 100_000 and fanout["limit"] == "generator: a problem"


def test_a_larger_machine_is_sized_by_the_worse_site_and_not_by_a_generator_bound_run() -> None:
    figures = per_core(RUN)
    assert figures["bet_per_worker_core"] == 20_000  # redisw2's, lower than redis's 32,000
    assert figures["redis_per_bet"] == pytest.approx(0.2 / 8_000)
    # fan-out: only redis at 10,000 (redisw2's run was generator-bound, 1,000 is smaller)
    assert figures["delivery_per_worker_core"] == 125_000  # 40,000 / 0.32
    assert figures["redis_per_worker"] == pytest.approx(0.02)
    need = needs(figures, 40_000, 0)
    assert need["workers"] == pytest.approx(2.0) and need["redis"] == pytest.approx(1.0)
    need = needs(figures, 0, 1_000_000)
    assert need["workers"] == pytest.approx(8.0)
    assert need["redis"] == pytest.approx(math.ceil(8.0) * 0.02)
    assert need["generator"] == pytest.approx(1_000_000 * 0.25 / 40_000)


def test_a_run_whose_generator_was_the_limit_is_reported_as_a_problem() -> None:
    assert problems(RUN) == ["fan-out redisw2 10,000: generator 95%"]
    text = section(RUN, [])
    assert "**Problems** (the generator was the limit): fan-out redisw2 10,000" in text
    calm = {**RUN, "fanout": RUN["fanout"][:2]}
    assert problems(calm) == [] and "**Problems**" not in section(calm, [])


def test_the_report_has_the_collector_per_run_and_per_worker_and_the_scaling_section() -> None:
    text = section(RUN, [])
    lines = text.splitlines()
    w2 = next(line for line in lines if line.startswith("| fan-out, ours (Redis, 1 node, 2 w"))
    assert "26.0 / 25.0 · 26.0 / 25.0" in w2 and "**over**" in w2  # two workers, over 20 ms
    memory = next(line for line in lines if line.startswith("| bets, memory, 1 node |"))
    assert "6.0 / 5.0" in memory and memory.endswith("| yes |")
    joins = next(line for line in lines if line.startswith("| 10,000 spectators, connect"))
    assert "30.0 / 17.0" in joins and "| yes |" in joins  # judged on CPU time
    assert "| 65,000 bets | failed: RuntimeError('boom')" in text
    assert "### Several cores (--workers), measured" in text
    assert any(line.startswith("| 50,000 bets/s | 2.5 |") for line in section_lines(RUN))


def test_a_node_process_that_wrote_no_collector_pauses_is_reported_as_a_problem() -> None:
    assert gc_problems(RUN) == []
    missing = {**RUN["bets"][0], "gc": {**RUN["bets"][0]["gc"], "missing": 1}}
    run = {**RUN, "bets": [missing, *RUN["bets"][1:]]}
    site = missing["site"]
    assert gc_problems(run) == [f"bets {site}: 1 process(es) wrote no pauses"]
    assert "**Problems** (collector not measured): bets " in section(run, [])
    assert "**Problems** (collector not measured)" not in section(RUN, [])
