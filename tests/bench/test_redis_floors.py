"""Redis's floors for a bet (bench/bench_redis_bets.py): the reference scripts do what their
figures are said to cost, on a real redis-server: sent in place_bet's batches (at most
BET_BATCH_MAX bets a call), the call alone writes nothing, and a bet's writes alone make each
write place_bet makes for an accepted bet, once a bet."""

from __future__ import annotations

import uuid

import msgpack
from redis.asyncio import Redis

from bench import bench_redis_bets as bench
from bench.common import redis_info


async def _evalsha_calls(url: str) -> int:
    stats = await redis_info(url, "commandstats")
    return int(stats.get("cmdstat_evalsha", {}).get("calls", 0))


async def test_the_call_alone_writes_nothing_and_the_writes_alone_write_each_bet(
    redis_url: str,
) -> None:
    prefix = f"floor-{uuid.uuid4().hex[:8]}"
    client = Redis.from_url(redis_url)
    try:
        bets, players = 130, bench.PLAYERS
        calls = await _evalsha_calls(redis_url)
        measured = await bench.floors(redis_url, prefix, bets, batch=100)
        assert set(measured) == {"call_alone", "writes_alone"}
        assert all(us > 0 for us in measured.values())
        # Batches of 100 then 30, each in calls of at most 64: 64 + 36 + 30, per script.
        assert await _evalsha_calls(redis_url) - calls == 2 * 3
        mine = {p: sum(1 for i in range(bets) if i % players == p) for p in range(players)}
        per_player = ("balance", "in_play", "audit", "mine:1", "stake:1")
        expected = {f"{prefix}:{k}:p{p}" for k in per_player for p in range(players)}
        expected |= {f"{prefix}:{k}" for k in ("ledger", "bet_receipts", "totals:1")}
        expected |= {f"{prefix}:bets:1", f"{prefix}:receipt_keys:1"}
        # Only these keys, each written once a bet: the call alone wrote nothing.
        keys = {key.decode() async for key in client.scan_iter(match=f"{prefix}:*")}
        assert keys == expected
        for p, n in mine.items():
            assert int(await client.get(f"{prefix}:balance:p{p}")) == -100 * n
            assert int(await client.get(f"{prefix}:in_play:p{p}")) == 100 * n
            assert await client.xlen(f"{prefix}:audit:p{p}") == n
            assert await client.llen(f"{prefix}:mine:1:p{p}") == n
            assert await client.pttl(f"{prefix}:audit:p{p}") > 0  # its expiry, once a batch
        assert await client.hlen(f"{prefix}:bet_receipts") == bets
        assert await client.llen(f"{prefix}:bets:1") == bets
        assert await client.llen(f"{prefix}:receipt_keys:1") == bets
        ledger = await client.hgetall(f"{prefix}:ledger")
        assert ledger == {
            b"balances": str(-100 * bets).encode(),
            b"in_play": str(100 * bets).encode(),
        }
        assert int(await client.hget(f"{prefix}:totals:1", "bets")) == bets
        receipt = await client.hget(f"{prefix}:bet_receipts", "2:p0:f0")
        assert msgpack.unpackb(receipt) == [bench.TABLE, 1, "f0", "player", 100, -100]
    finally:
        await bench.delete_keys(redis_url, prefix)
        await client.aclose()
