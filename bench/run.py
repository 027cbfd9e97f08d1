"""`make bench`: every benchmark in one bounded run; JSON, PNG plots and the doc's tables.

    .venv/bin/python bench/run.py            # the full run (< 10 min): 1k / 5k / 10k spectators
    .venv/bin/python bench/run.py --smoke    # a small one (200 spectators, 3 s windows)

Bets on each site, fan-out on each engine at each size, then bench/gc_pauses.py's two
situations (10,000 spectators joining and joined; a round of 65,000 bets) with the collector
as `baccarat serve` tunes it. Writes docs/bench/results.json (or smoke.json; --out another
folder), docs/bench/*.png, and the generated section of docs/benchmarks.md (between its
`bench:begin` and `bench:end` marks; not with --no-doc).
"""

from __future__ import annotations

import argparse
import asyncio
import json
import os
import sys
import time
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from bench.bets import SITES, measure_bets
from bench.common import ROOT, machine_info, pin_generator
from bench.cores import problems
from bench.fanout import ENGINES, measure_fanout
from bench.gc_pauses import bets_run, spectators_run
from bench.report import gc_problems, plot, update_doc
from server.bots.runner import raise_nofile_limit

# With bench_redis_bets.py after it, `make bench` stays about ten minutes: steps begun past
# the budget are skipped (and listed as skipped).
BUDGET_S = 9 * 60


def parse_args() -> argparse.Namespace:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--smoke", action="store_true", help="small and short: proves the harness")
    parser.add_argument("--sizes", help="spectator counts, comma list (1000,5000,10000)")
    parser.add_argument("--engines", default=",".join(ENGINES), help="fan-out engines")
    parser.add_argument("--sites", default=",".join(SITES), help="bet sites")
    parser.add_argument("--window", type=float, help="fan-out seconds measured per run (8)")
    parser.add_argument("--bet-seconds", type=float, help="seconds of betting per site (6)")
    parser.add_argument("--bet-clients", type=int, help="betting connections (100)")
    parser.add_argument(
        "--bet-step-seconds", type=float, help="seconds of each paced bet rate (2; 0: none)"
    )
    parser.add_argument(
        "--gc-spectators", type=int, help="collector: spectators joined (10000; 0: none)"
    )
    parser.add_argument("--gc-bets", type=int, help="collector: bets in one round (65000; 0: none)")
    parser.add_argument("--out", default=str(ROOT / "docs" / "bench"), help="a folder")
    parser.add_argument("--no-doc", action="store_true", help="leave docs/benchmarks.md alone")
    args = parser.parse_args()
    sizes = "200" if args.smoke else "1000,5000,10000"
    args.sizes = [int(n) for n in (args.sizes or sizes).split(",")]
    args.window = args.window or (3.0 if args.smoke else 8.0)
    args.bet_seconds = args.bet_seconds or (2.0 if args.smoke else 6.0)
    args.bet_clients = args.bet_clients or (20 if args.smoke else 100)
    if args.bet_step_seconds is None:
        args.bet_step_seconds = 0.5 if args.smoke else 2.0
    if args.gc_spectators is None:
        args.gc_spectators = 200 if args.smoke else 10_000
    if args.gc_bets is None:
        args.gc_bets = 2_000 if args.smoke else 65_000
    return args


async def run(args: argparse.Namespace) -> dict[str, Any]:
    started = time.monotonic()
    results: dict[str, Any] = {
        "kind": "smoke" if args.smoke else "full",
        "date": time.strftime("%Y-%m-%d %H:%M"),
        "command": " ".join(["bench/run.py", *sys.argv[1:]]),
        "machine": machine_info(),
        "generator_pinned": pin_generator(),
        "fanout": [],
        "bets": [],
        "skipped": [],
    }
    # Bets first: short, and the fan-out's largest runs are the ones the budget may drop.
    for site in [s for s in args.sites.split(",") if s]:  # "" runs no bets
        if time.monotonic() - started > BUDGET_S:
            results["skipped"].append(f"bets {site}")
            continue
        print(f"bets: {site}, {args.bet_clients} clients ...", file=sys.stderr, flush=True)
        try:
            # The floor is a cost per bet, not a site anyone runs: no paced steps.
            steps = 0.0 if site == "floor" else args.bet_step_seconds
            bets = await measure_bets(site, args.bet_clients, args.bet_seconds, steps)
        except Exception as error:
            bets = {"site": site, "error": repr(error)}
        print(f"  {json.dumps(bets)}", file=sys.stderr, flush=True)
        results["bets"].append(bets)
    for n in args.sizes:
        for engine in [e for e in args.engines.split(",") if e]:  # "" runs no fan-out
            if time.monotonic() - started > BUDGET_S:
                results["skipped"].append(f"fanout {engine} {n}")
                continue
            print(f"fan-out: {engine}, {n} spectators ...", file=sys.stderr, flush=True)
            try:
                result = await measure_fanout(engine, n, args.window)
            except Exception as error:  # one failed run must not lose the others
                result = {"engine": engine, "spectators": n, "error": repr(error)}
            print(f"  {json.dumps(result)}", file=sys.stderr, flush=True)
            results["fanout"].append(result)
    results["collector"] = await collector(args, started, results["skipped"])
    results["elapsed_s"] = round(time.monotonic() - started, 1)
    return results


async def collector(args: argparse.Namespace, started: float, skipped: list[str]) -> dict[str, Any]:
    """bench/gc_pauses.py's two situations, once, the collector tuned (`after`)."""
    found: dict[str, Any] = {"mode": "after"}
    window, bet_window = (1.0, 4.0) if args.smoke else (5.0, 15.0)
    for situation, size in (("spectators", args.gc_spectators), ("bets", args.gc_bets)):
        if not size:
            continue
        if time.monotonic() - started > BUDGET_S:
            skipped.append(f"collector {situation}")
            continue
        print(f"collector: {size:,} {situation} ...", file=sys.stderr, flush=True)
        load = [round(x, 2) for x in os.getloadavg()]
        try:
            if situation == "spectators":
                result = await spectators_run("after", size, window)
            else:
                result = await asyncio.to_thread(bets_run, "after", size, bet_window)
        except Exception as error:
            result = {"error": repr(error)}
        found[situation] = {"size": size, "load_average": load, **result}
        print(f"  {json.dumps(found[situation])}", file=sys.stderr, flush=True)
    return found


def main() -> None:
    args = parse_args()
    raise_nofile_limit()  # 10,000 connections need as many descriptors
    results = asyncio.run(run(args))
    out = Path(args.out)
    out.mkdir(parents=True, exist_ok=True)
    name = "smoke" if args.smoke else "results"
    (out / f"{name}.json").write_text(json.dumps(results, indent=2) + "\n")
    plots = plot(results, out)
    if not args.no_doc:
        update_doc(results, plots, ROOT / "docs" / "benchmarks.md")
    for problem in problems(results) + gc_problems(results):
        print(f"bench: PROBLEM: {problem}", file=sys.stderr)
    print(f"bench: done in {results['elapsed_s']} s; {out / name}.json", file=sys.stderr)


if __name__ == "__main__":
    main()
