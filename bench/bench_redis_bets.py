"""Micro-benchmark: place_bet through RedisStore, concurrent batches and one at a time.

Run `.venv/bin/python bench/bench_redis_bets.py [--bets N] [--batch N]`. It uses REDIS_URL if
set, else starts its own redis-server (tests/redis_server.py), and deletes its keys after.
"""

from __future__ import annotations

import argparse
import asyncio
import os
import random
import statistics
import sys
import time
import uuid
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))  # for tests.redis_server

from redis.asyncio import Redis

from server.core.rules import PRESETS
from server.core.table import open_round
from server.store.redis import RedisStore
from tests.redis_server import start_redis

TABLE = "bench"
PLAYERS = 100


async def open_table(store: RedisStore) -> None:
    await store.create_table(TABLE, PRESETS["classic8"])
    lease = await store.acquire_lease(TABLE, "bench", 600_000)
    state = await store.load_state(TABLE)
    assert lease is not None and state is not None
    now = await store.now_ms()
    transition = open_round(
        state, PRESETS["classic8"], now, 600_000, random.Random(1).randbytes(32)
    )
    await store.commit(TABLE, lease.token, state.version, transition.state, transition.events)


async def burst(store: RedisStore, bets: int, batch: int, first_id: int = 0) -> float:
    """Place `bets` bets, `batch` at a time through asyncio.gather; bets per second."""
    started = time.perf_counter()
    for first in range(0, bets, batch):
        calls = [
            store.place_bet(
                TABLE, f"p{i % PLAYERS}", 1, f"b{first_id + i}", ("player", "banker")[i % 2], 100
            )
            for i in range(first, min(first + batch, bets))
        ]
        await asyncio.gather(*calls)
        print(f"  {min(first + batch, bets)}/{bets} bets", end="\r", flush=True)
    elapsed = time.perf_counter() - started
    print()
    return bets / elapsed


async def one_by_one(store: RedisStore, bets: int) -> list[float]:
    """Latency of single bets placed one after another, in milliseconds."""
    latencies = []
    for i in range(bets):
        started = time.perf_counter()
        await store.place_bet(TABLE, f"p{i % PLAYERS}", 1, f"s{i}", "tie", 100)
        latencies.append((time.perf_counter() - started) * 1000)
    return latencies


async def run(url: str, bets: int, batch: int) -> None:
    prefix = f"bench-{uuid.uuid4().hex[:8]}"
    # Many bets per player in one round: no cap here, this measures the script.
    store = RedisStore.from_url(url, key_prefix=prefix, max_bets_per_round=10**9)
    try:
        await open_table(store)
        for i in range(PLAYERS):
            await store.ensure_player(f"p{i}", 10_000_000)
        print(f"warm-up: 200 bets in batches of {batch}")
        await burst(store, 200, batch)  # connections and script cache warm
        print(f"burst: {bets} bets in batches of {batch} via asyncio.gather")
        usec_before = await script_usec(url)
        rate = await burst(store, bets, batch, first_id=1_000_000)  # ids unused by the warm-up
        usec_per_bet = (await script_usec(url) - usec_before) / bets
        print("sequential: 500 single bets")
        latencies = await one_by_one(store, 500)
        ledger = await store.ledger()
        assert ledger.balanced, ledger
        p50 = statistics.median(latencies)
        p99 = statistics.quantiles(latencies, n=100)[98]
        print(f"result: {rate:,.0f} bets/s concurrent (batch {batch}); ", end="")
        print(f"sequential p50 {p50:.3f} ms, p99 {p99:.3f} ms ({1000 / p50:,.0f} bets/s)")
        print(f"server side: {usec_per_bet:.1f} us of place_bet script per bet in the burst")
    finally:
        await store.close()
        await delete_keys(url, prefix)


async def script_usec(url: str) -> float:
    """Redis's time in scripts so far (a place_bet script carries a batch of bets)."""
    client = Redis.from_url(url)
    try:
        stats = await client.info("commandstats")
    finally:
        await client.aclose()
    return float(stats.get("cmdstat_evalsha", {}).get("usec", 0.0))


async def delete_keys(url: str, prefix: str) -> None:
    client = Redis.from_url(url)
    try:
        keys = [key async for key in client.scan_iter(match=f"{prefix}:*")]
        if keys:
            await client.delete(*keys)
    finally:
        await client.aclose()


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--bets", type=int, default=2000)
    parser.add_argument("--batch", type=int, default=200)
    args = parser.parse_args()
    url = os.environ.get("REDIS_URL")
    if url:
        print(f"using REDIS_URL {url}")
        asyncio.run(run(url, args.bets, args.batch))
        return
    with start_redis() as server:
        print(f"started redis-server {server.executable} on port {server.port}")
        asyncio.run(run(server.url, args.bets, args.batch))


if __name__ == "__main__":
    main()
