"""Several cores (`--workers`): per worker core figures from one bench run, what a larger
machine needs, and the runs whose generator (or whole machine) was the limit.

The scaling sites are the Redis engine with one worker (`redis`: `baccarat serve --redis`,
which is what `--workers 1` runs, on core 0 with Redis) and with two (`redisw2`: `--workers
2` on cores 0 and 1, the generator's core shared). Per run: the work done (bets/s or
deliveries/s), the cores each worker used (its CPU seconds ÷ wall), the work per worker core
(work ÷ the workers' cores together), Redis's cores and the generator's. Bets twice: the
closed loop (the most taken) and the paced step with the highest rate answered at ack p99
≤ 5 ms (the same p99 for both sites); fan-out at each size (the cadence is the same for both
sites, so deliveries/s is equal and the figure is the cost: deliveries per worker core).
"""

from __future__ import annotations

import math
from typing import Any

__all__ = ["LOADS", "needs", "per_core", "problems", "scaling_rows", "section_lines"]

SCALING_SITES = {"redis": 1, "redisw2": 2}  # site or engine: its worker processes
GENERATOR_LIMIT = 0.9  # a generator at this share of its core was the limit
BUSY = 0.95  # a set of cores at this share of its capacity was full
# The loads for which the section says what a machine needs: bets/s, deliveries/s.
LOADS = ((10_000, 0), (50_000, 0), (100_000, 0), (0, 200_000), (0, 1_000_000), (0, 5_000_000))


def _limit(workers: int, shares: dict[str, Any], cores: int) -> str:
    """What bounded a run: the generator (a problem), every core, or core 0 (node + Redis)."""
    worker = sum(shares.get("worker_cores") or [0.0])
    redis, generator = shares.get("redis_cores", 0.0), shares.get("generator_cpu", 0.0)
    if generator >= GENERATOR_LIMIT:
        return "generator: a problem"
    if worker + redis + generator >= BUSY * cores:
        return f"all {cores} cores busy"
    if workers == 1 and worker + redis >= BUSY:
        return "core 0 busy (node + Redis)"
    return "-"


def _row(
    kind: str, site: str, work: float, p99: float, shares: dict[str, Any], cores: int
) -> dict[str, Any]:
    worker_cores = list(shares.get("worker_cores") or [])
    used = sum(worker_cores)
    redis, generator = shares.get("redis_cores", 0.0), shares.get("generator_cpu", 0.0)
    return {
        "kind": kind,
        "site": site,
        "spectators": int(shares.get("spectators", 0)),
        "workers": SCALING_SITES[site],
        "per_s": round(work),
        "p99_ms": p99,
        "worker_cores": worker_cores,
        "per_worker_core": round(work / used) if used else 0,
        "redis_cores": redis,
        "generator_cpu": generator,
        "total_cores": round(used + redis + generator, 2),
        "limit": _limit(SCALING_SITES[site], shares, cores),
    }


def _best_step(r: dict[str, Any]) -> dict[str, Any] | None:
    best = r.get("best_paced_per_s")
    steps = [s for s in r.get("paced", []) if s.get("offered_per_s") == best and "error" not in s]
    return steps[-1] if steps and "worker_cores" in steps[-1] else None  # a retry's, if one


def scaling_rows(results: dict[str, Any]) -> list[dict[str, Any]]:
    """Per run of a scaling site: work, p99, cores used and work per worker core."""
    cores = int(results.get("machine", {}).get("cores") or 2)
    rows = []
    for r in results.get("bets", []):
        if r.get("site") not in SCALING_SITES or "error" in r or "worker_cores" not in r:
            continue
        site = r["site"]
        rows.append(_row("bets, closed loop", site, r["bets_per_s"], r["ack_ms"]["p99"], r, cores))
        if (step := _best_step(r)) is not None:
            work, p99 = step["accepted_per_s"], step["ack_ms"]["p99"]
            rows.append(_row("bets, paced, ack p99 ≤ 5 ms", site, work, p99, step, cores))
    for r in results.get("fanout", []):
        if r.get("engine") not in SCALING_SITES or "error" in r or "worker_cores" not in r:
            continue
        kind = f"fan-out, {r['spectators']:,} spectators"
        work, p99 = r["deliveries_per_s"], r["latency_ms"]["p99"]
        rows.append(_row(kind, r["engine"], work, p99, r, cores))
    return rows


def per_core(results: dict[str, Any]) -> dict[str, float]:
    """The figures a larger machine is sized by, the lower (worse) of the scaling sites'
    (the generator-bound runs left out): bets/s per worker core at ack p99 ≤ 5 ms with
    Redis's and the generator's cores per bet/s; deliveries/s per worker core at the largest
    size with the generator's cores per delivery/s, and Redis's cores per worker (in fan-out
    Redis works per event and per worker that reads the stream, not per delivery)."""
    rows = [r for r in scaling_rows(results) if "generator" not in r["limit"]]
    rows = [r for r in rows if r["per_worker_core"] and r["per_s"]]
    bets = [r for r in rows if r["kind"].startswith("bets, paced")]
    fanout = [r for r in rows if r["kind"].startswith("fan-out")]
    found: dict[str, float] = {}
    if bets:
        found["bet_per_worker_core"] = min(r["per_worker_core"] for r in bets)
        found["redis_per_bet"] = max(r["redis_cores"] / r["per_s"] for r in bets)
        found["generator_per_bet"] = max(r["generator_cpu"] / r["per_s"] for r in bets)
    if fanout:
        largest = max(r["spectators"] for r in fanout)
        fanout = [r for r in fanout if r["spectators"] == largest]
        found["delivery_per_worker_core"] = min(r["per_worker_core"] for r in fanout)
        found["redis_per_worker"] = max(r["redis_cores"] / r["workers"] for r in fanout)
        found["generator_per_delivery"] = max(r["generator_cpu"] / r["per_s"] for r in fanout)
    return found


def needs(figures: dict[str, float], bets: float, deliveries: float) -> dict[str, float]:
    """Cores for the workers, for Redis and for a generator at `bets`/s and `deliveries`/s."""
    workers = redis = generator = 0.0
    if bets and "bet_per_worker_core" in figures:
        workers += bets / figures["bet_per_worker_core"]
        redis += bets * figures["redis_per_bet"]
        generator += bets * figures["generator_per_bet"]
    if deliveries and "delivery_per_worker_core" in figures:
        fanout_workers = deliveries / figures["delivery_per_worker_core"]
        workers += fanout_workers
        redis += math.ceil(fanout_workers) * figures["redis_per_worker"]
        generator += deliveries * figures["generator_per_delivery"]
    return {"workers": workers, "redis": redis, "generator": generator}


def problems(results: dict[str, Any]) -> list[str]:
    """Runs whose generator was the limit (its CPU share ≥ GENERATOR_LIMIT): their figures are
    the generator's, not the server's (the project's rule: reported as a problem)."""
    found = []
    for r in results.get("fanout", []):
        if r.get("generator_cpu", 0.0) >= GENERATOR_LIMIT:
            share = r["generator_cpu"]
            found.append(f"fan-out {r['engine']} {r['spectators']:,}: generator {share:.0%}")
    for r in results.get("bets", []):
        if r.get("generator_cpu", 0.0) >= GENERATOR_LIMIT:
            found.append(f"bets {r['site']}, closed loop: generator {r['generator_cpu']:.0%}")
        for step in r.get("paced", []):
            if step.get("generator_cpu", 0.0) >= GENERATOR_LIMIT:
                found.append(
                    f"bets {r['site']}, paced {step['offered_per_s']:,}/s: "
                    f"generator {step['generator_cpu']:.0%}"
                )
    return found


def _share(value: float) -> str:
    return f"{value:.2f}"


def _rows_table(rows: list[dict[str, Any]]) -> list[str]:
    lines = [
        "| run | workers | per s | p99 ms | cores of each worker | per worker core "
        "| Redis cores | generator core | cores used (all) | limit |",
        "| --- | ---: | ---: | ---: | ---: | ---: | ---: | ---: | ---: | --- |",
    ]
    for r in rows:
        each = " + ".join(_share(c) for c in r["worker_cores"])
        lines.append(
            f"| {r['kind']} | {r['workers']} | {r['per_s']:,} | {r['p99_ms']} | {each} "
            f"| {r['per_worker_core']:,} | {_share(r['redis_cores'])} "
            f"| {_share(r['generator_cpu'])} | {r['total_cores']} | {r['limit']} |"
        )
    return lines


def _needs_table(figures: dict[str, float]) -> list[str]:
    lines = [
        "| load | worker cores | Redis cores | generator cores |",
        "| --- | ---: | ---: | ---: |",
    ]
    for bets, deliveries in LOADS:
        if (bets and "bet_per_worker_core" not in figures) or (
            deliveries and "delivery_per_worker_core" not in figures
        ):
            continue
        load = f"{bets:,} bets/s" if bets else f"{deliveries:,} deliveries/s"
        need = needs(figures, bets, deliveries)
        redis = f"{need['redis']:.2f}" + (" (past one Redis)" if need["redis"] > 1 else "")
        lines.append(f"| {load} | {need['workers']:.1f} | {redis} | {need['generator']:.2f} |")
    return lines


def section_lines(results: dict[str, Any]) -> list[str]:
    """The generated part of "Several cores (--workers)": the runs, the figures, the needs."""
    rows = scaling_rows(results)
    if not rows:
        return ["No scaling site ran (`redis` and `redisw2`)."]
    figures = per_core(results)
    lines = [*_rows_table(rows), ""]
    if figures:
        shown = []
        if "bet_per_worker_core" in figures:
            shown.append(
                f"b = {figures['bet_per_worker_core']:,.0f} bets/s per worker core at ack p99 "
                f"≤ 5 ms, r = {figures['redis_per_bet'] * 1e6:.1f} µs of Redis and "
                f"g = {figures['generator_per_bet'] * 1e6:.1f} µs of generator per bet"
            )
        if "delivery_per_worker_core" in figures:
            shown.append(
                f"d = {figures['delivery_per_worker_core']:,.0f} deliveries/s per worker core, "
                f"q = {figures['generator_per_delivery'] * 1e6:.2f} µs of generator per "
                f"delivery and s = {figures['redis_per_worker']:.3f} Redis cores per worker "
                "(each worker reads the table's stream; at the run's cadence)"
            )
        lines += [
            "Sized by the lower of the two sites' figures (the generator-bound runs left out): "
            + "; ".join(shown)
            + ". For B bets/s and D deliveries/s: worker cores W = B ÷ b + D ÷ d, Redis cores = "
            "B × r + ⌈D ÷ d⌉ × s (one Redis runs on one core and the layout is one Redis "
            "(docs/redis.md): past 1, one site cannot), generator cores = B × g + D × q:",
            "",
            *_needs_table(figures),
        ]
    return lines
