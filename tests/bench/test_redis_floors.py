"""Redis's floors for a bet (bench/bench_redis_bets.py): the reference scripts do what their
figures are said to cost, on a real redis-server: the call alone writes nothing, and a bet's
writes alone make each write an accepted bet needs, once a bet."""

from __future__ import annotations

import uuid

import msgpack
from redis.asyncio import Redis

from bench import bench_redis_bets as bench


async def test_the_call_alone_writes_nothing_and_the_writes_alone_write_each_bet(
    redis_url: str,
) -> None:
    prefix = f"floor-{uuid.uuid4().hex[:8]}"
    client = Redis.from_url(redis_url)
    try:
        bets = 130  # three calls of at most BET_BATCH_MAX (64), like the store's batches
        measured = await bench.floors(redis_url, prefix, bets, batch=100)
        assert set(measured) == {"call_alone", "writes_alone"}
        assert all(us > 0 for us in measured.values())
        players = {i % bench.PLAYERS for i in range(bets)}
        # Only WRITES_ALONE wrote: each player's debits, stakes, receipts, records, audit.
        for p in players:
            mine = sum(1 for i in range(bets) if i % bench.PLAYERS == p)
            key = f"{prefix}:audit:p{p}"
            assert int(await client.get(f"{prefix}:balance:p{p}")) == -100 * mine
            assert int(await client.get(f"{prefix}:in_play:p{p}")) == 100 * mine
            assert await client.hlen(f"{key}:receipts") == mine
            assert await client.llen(f"{key}:bets") == mine
            assert await client.xlen(key) == mine
        receipt = await client.hget(f"{prefix}:audit:p0:receipts", "2:p0:f0")
        assert msgpack.unpackb(receipt) == [bench.TABLE, 1, "f0", "player", 100, -100]
    finally:
        await bench.delete_keys(redis_url, prefix)
        await client.aclose()
