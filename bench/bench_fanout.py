"""The latency a second node adds to fan-out, through Redis.

Starts a redis-server (REDIS_URL if set, else one of its own), two `baccarat serve --redis`
nodes sharing one table, and one JSON client on each. Both clients run in this process, so
their arrival times for the same event (same seq) are on one clock: the difference between
the non-owner's and the owner's client is what the follow-the-stream hop costs.

    .venv/bin/python bench/bench_fanout.py [--rounds 20]
"""

from __future__ import annotations

import argparse
import asyncio
import json
import os
import statistics
import sys
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from tests.multinode.nodes import Client, NodeProcess
from tests.redis_server import start_redis


async def collect(
    client: Client, arrivals: dict[int, float], ages: list[float], rounds: int
) -> None:
    settled = 0
    while settled < rounds:
        message = json.loads(await client.ws.recv())
        if message.get("type") == "event":
            arrivals[message["seq"]] = time.perf_counter()
            # `ts` is Redis's clock when the event was committed: same machine, same clock.
            ages.append(time.time() * 1000 - message["ts"])
            settled += message["kind"] == "round_settled"


async def main(rounds: int) -> None:
    ages_a: list[float] = []
    ages_b: list[float] = []
    redis = None if os.environ.get("REDIS_URL") else start_redis()
    url = os.environ.get("REDIS_URL") or (redis.url if redis else "")
    timings = {"--deal-interval": "0.05", "--betting-window": "0.3"}
    owner = await NodeProcess(url, "bench-a", **timings).start()
    try:
        async with Client.connect(owner.url) as a:
            await a.send(type="join", table="t1")
            await a.next("snapshot")
            other = await NodeProcess(url, "bench-b", **timings).start()
            try:
                async with Client.connect(other.url) as b:
                    await b.send(type="join", table="t1")
                    await b.next("snapshot")
                    print(f"following {rounds} rounds on two nodes ...", file=sys.stderr)
                    on_a: dict[int, float] = {}
                    on_b: dict[int, float] = {}
                    await asyncio.gather(
                        collect(a, on_a, ages_a, rounds), collect(b, on_b, ages_b, rounds)
                    )
            finally:
                await other.stop()
    finally:
        await owner.stop()
        if redis is not None:
            redis.stop()
    common = sorted(set(on_a) & set(on_b))
    added = sorted((on_b[s] - on_a[s]) * 1e3 for s in common)
    print(f"events compared: {len(common)}")
    for name, ages in (("owner node", ages_a), ("second node", ages_b)):
        ages.sort()
        print(
            f"commit-to-client ms on the {name}: median {statistics.median(ages):.2f}, "
            f"p90 {ages[int(len(ages) * 0.9)]:.2f}"
        )
    print(
        f"second-node added latency ms: median {statistics.median(added):.2f}, "
        f"p90 {added[int(len(added) * 0.9)]:.2f}, max {added[-1]:.2f}"
    )


if __name__ == "__main__":
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--rounds", type=int, default=20)
    asyncio.run(main(parser.parse_args().rounds))
