"""Collector pauses of a node in the issue's two situations, collector left alone and tuned.

    .venv/bin/python bench/gc_pauses.py                       # 10,000 spectators, 65,000 bets
    .venv/bin/python bench/gc_pauses.py --spectators 1000 --bets 5000 --runs 1   # small

* spectators: a `baccarat serve` node (memory engine, pinned to the server core) with N
  bench/light_ws.py spectators connected and joined from this process, then a window of the
  table's fan-out. The node writes every pause to BACCARAT_GC_STATS at its stop; the pauses
  are split into "joins" (first connect to last `joined`) and "window".
* bets: a node in a child process of this script, a round filled with M bets straight
  through its store (as tests/transport/test_big_round.py does, with --max-bets-per-round
  raised), held, then settled and delivered; "fill" is the bets being placed, "hold and
  settle" the rest until the round is settled.

Each situation runs with the collector as CPython leaves it (`before`: BACCARAT_GC_FREEZE=0)
and as `baccarat serve` tunes it (`after`: frozen after start-up and after every full
collection, thresholds set; server/runtime/collector.py). A pause is one collection, start
to stop, by a `gc.callbacks` hook in the node; printed per phase: count, max and p99 of all
collections (wall time, and the longest in the thread's cpu time: on a busy machine a pause's
wall time includes waiting for a core), and the full (generation 2) ones. Pause length is
CPU-bound: on a shared machine give several runs and the load average (printed).
"""

from __future__ import annotations

import argparse
import asyncio
import json
import os
import subprocess
import sys
import time
from pathlib import Path
from typing import Any

import msgpack

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from bench.common import Pause, baccarat_serve, pause_summary, pin_generator, pinned
from bench.fanout import Cadence
from bench.light_ws import LightClient, light_connect
from server.bots.runner import raise_nofile_limit
from server.runtime.collector import GC_FREEZE_ENV

TABLE = "t1"
CONNECT_CONCURRENCY = 500
MODES = ("before", "after")
summary = pause_summary  # count, max and p99 (ms), wall and CPU, of all and the full ones


def between(pauses: list[Pause], start: float, end: float) -> list[Pause]:
    return [p for p in pauses if start <= p[1] <= end]


# --- spectators: a real node on loopback ------------------------------------------------------


async def _spectator(url: str, gate: asyncio.Semaphore) -> LightClient:
    async with gate:
        ws = await light_connect(url, "baccarat.v1.msgpack")
        await ws.recv()  # welcome
        ws.send(msgpack.packb({"type": "join", "table": TABLE}))
        while msgpack.unpackb(await ws.recv()).get("type") != "joined":
            pass
    ws.on_message = lambda _frame: None
    return ws


async def spectators_run(mode: str, n: int, window: float) -> dict[str, Any]:
    env = {GC_FREEZE_ENV: "1" if mode == "after" else "0"}
    options: dict[str, object] = {"tables": f"{TABLE}=classic8", "drain_seconds": 0}
    options |= Cadence.for_spectators(n).serve_options()
    node = baccarat_serve("gc", options, env=env)
    await node.start()
    clients: list[LightClient] = []
    try:
        url = node.url + "?role=spectator"
        gate = asyncio.Semaphore(CONNECT_CONCURRENCY)
        started = time.time()
        async with asyncio.timeout(120):
            clients = list(await asyncio.gather(*(_spectator(url, gate) for _ in range(n))))
        joined = time.time()
        await asyncio.sleep(window)
        ended = time.time()
    finally:
        for ws in clients:
            ws.abort()
        await node.stop()
    pauses: list[Pause] = [p for each in node.pauses.values() for p in each]
    return {
        "joins": summary(between(pauses, started, joined)),
        "window": summary(between(pauses, joined, ended)),
        "connect_s": round(joined - started, 2),
    }


# --- bets: an in-process node in a child process ----------------------------------------------


async def _fill(node: Any, bets: int, round_no: int) -> None:
    players = [f"p{i}" for i in range(max(1, bets // 100))]
    each = -(-bets // len(players))
    for player in players:
        await node.store.ensure_player(player, 10**12)

    async def bets_of(player: str) -> None:
        for i in range(each):
            await node.store.place_bet(TABLE, player, round_no, f"{player}-{i}", "player", 100)

    await asyncio.gather(*(bets_of(p) for p in players))


async def _table_when(node: Any, ready: Any, seconds: float) -> Any:
    """The table's header once `ready(header)` holds (polled every 20 ms)."""
    async with asyncio.timeout(seconds):
        while True:
            state = await node.store.load_header(TABLE)
            if state is not None and ready(state):
                return state
            await asyncio.sleep(0.02)


async def bets_child(mode: str, bets: int, window: float) -> dict[str, Any]:
    """In the child: a node, one round filled with `bets` bets, held until settled."""
    from server.app import Node, configure_logging
    from server.config import Settings
    from server.runtime.collector import PAUSES

    configure_logging("json", "warning")
    PAUSES.keep()
    settings = Settings.from_options(
        tables=f"{TABLE}=classic8",
        port=0,
        admin_port=0,
        static_dir="/nonexistent",
        betting_window=window,
        max_bets_per_round=1_000,
    )
    node = Node(settings, tune_collector=mode == "after")
    await node.start()
    try:
        from server.core.table import Phase

        betting = await _table_when(node, lambda s: s.phase == Phase.BETTING, 30)
        round_no = int(betting.round)
        started = time.time()
        await _fill(node, bets, round_no)
        filled = time.time()
        await _table_when(node, lambda s: s.round != round_no, window + 60)
        await asyncio.sleep(1.0)  # the settlement delivered
        ended = time.time()
    finally:
        await node.stop()
    pauses = list(PAUSES.kept or ())
    return {
        "fill": summary(between(pauses, started, filled)),
        "hold_and_settle": summary(between(pauses, filled, ended)),
        "fill_s": round(filled - started, 2),
    }


def bets_run(mode: str, bets: int, window: float) -> dict[str, Any]:
    argv = [sys.executable, __file__, "--child-bets", mode, "--bets", str(bets)]
    out = subprocess.run(  # the node on the server core, as `baccarat serve` would be
        pinned([*argv, "--bet-window", str(window)]), capture_output=True, text=True, timeout=300
    )
    if out.returncode != 0:
        raise RuntimeError(out.stderr[-2000:])
    result: dict[str, Any] = json.loads(out.stdout.strip().splitlines()[-1])
    return result


# --- the runs -----------------------------------------------------------------------------------


def line(name: str, s: dict[str, Any]) -> str:
    return (
        f"{name}: {s['count']} collections, max {s['max_ms']} ms (cpu {s['cpu_max_ms']} ms), "
        f"p99 {s['p99_ms']} ms; {s['full']} full, longest {s['full_max_ms']} ms"
    )


async def main_async(args: argparse.Namespace) -> list[dict[str, Any]]:
    results = []
    for run in range(args.runs):
        for mode in args.modes.split(","):
            load = [round(x, 2) for x in os.getloadavg()]
            result: dict[str, Any] = {"run": run + 1, "mode": mode, "load_average": load}
            if args.spectators:
                result["spectators"] = await spectators_run(mode, args.spectators, args.window)
            if args.bets:
                result["bets"] = bets_run(mode, args.bets, args.bet_window)
            results.append(result)
            print(f"run {run + 1}, {mode}, load average {load}", flush=True)
            for situation in ("spectators", "bets"):
                for phase, s in result.get(situation, {}).items():
                    if isinstance(s, dict):
                        print("  " + line(f"{situation} {phase}", s), flush=True)
    return results


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--spectators", type=int, default=10_000, help="0: none")
    parser.add_argument("--bets", type=int, default=65_000, help="0: none")
    parser.add_argument("--runs", type=int, default=3)
    parser.add_argument("--modes", default=",".join(MODES))
    parser.add_argument("--window", type=float, default=5.0, help="fan-out seconds after joins")
    parser.add_argument("--bet-window", type=float, default=15.0, help="the round's window")
    parser.add_argument("--json", help="write every run here")
    parser.add_argument("--child-bets", choices=MODES, help=argparse.SUPPRESS)
    args = parser.parse_args()
    if args.child_bets:
        print(json.dumps(asyncio.run(bets_child(args.child_bets, args.bets, args.bet_window))))
        return
    raise_nofile_limit()
    pin_generator()
    results = asyncio.run(main_async(args))
    if args.json:
        Path(args.json).write_text(json.dumps(results, indent=2) + "\n")


if __name__ == "__main__":
    main()
