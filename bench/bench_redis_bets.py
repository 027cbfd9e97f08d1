"""Micro-benchmark: place_bet through RedisStore, concurrent batches and one at a time, and
Redis's floors for a bet beside it.

Run `.venv/bin/python bench/bench_redis_bets.py [--bets N] [--batch N]`. It uses REDIS_URL if
set, else starts its own redis-server (tests/redis_server.py), and deletes its keys after.

The floors (docs/benchmarks.md, "The floors"): Redis's CPU per bet (`INFO cpu`) for two
reference scripts, called with the same batches as the store's (BET_BATCH_MAX bets, each with
place_bet's three keys and five arguments, the same calls in flight): `CALL_ALONE` answers each
bet and does nothing else (what a script call of that shape costs), `WRITES_ALONE` makes only
the writes place_bet makes for an accepted bet, in its layout (debit, stake in play, the
player's record and stake, receipt, audit entry; per batch the ledger, the round's lists and
totals, the audit logs' expiry), and checks nothing. place_bet's own figure is read the same
way in the burst.
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

from bench.common import redis_cpu_s, redis_info
from server.core.rules import PRESETS
from server.core.table import open_round
from server.store.redis import RedisStore
from server.store.redis_bets import BET_BATCH_MAX
from tests.redis_server import start_redis

TABLE = "bench"
PLAYERS = 100

# The reference scripts of the floors, called with place_bet.lua's shape: KEYS 1 state,
# 2 rounds, 3 ledger, 4 guests, 5 guest_ttl, then per bet its balance, in_play and audit log;
# ARGV 1 table, 2 prefix, 3-8 the settings (6: audit entries kept, 5: audit ms), then per bet
# player, bet_id, round, spot, amount. CALL_ALONE only answers each bet. WRITES_ALONE makes
# the writes place_bet makes for an accepted bet, in its layout, and checks nothing: per bet
# the debit and the stake in play, the player's record and stake, the receipt, the audit
# entry; per batch the ledger, the round's bets, receipt keys and totals, and each audit
# log's expiry. Left out, as rare here: a bettor's first-bet RPUSH and a guest's sighting.
CALL_ALONE = """
local replies = {}
for i = 0, (#ARGV - 8) / 5 - 1 do
  replies[i + 1] = {'OK', ARGV[10 + 5 * i]}
end
return replies
"""
WRITES_ALONE = """
local prefix, table_id = ARGV[2], ARGV[1]
local round = ARGV[11]
local ts = tonumber(redis.call('TIME')[1]) * 1000
local replies, records, fields, audited, added, staked = {}, {}, {}, {}, {}, 0
for i = 0, (#ARGV - 8) / 5 - 1 do
  local a = 9 + 5 * i
  local player, bet_id, spot, amount = ARGV[a], ARGV[a + 1], ARGV[a + 3], tonumber(ARGV[a + 4])
  local after = redis.call('DECRBY', KEYS[6 + 3 * i], amount)
  redis.call('INCRBY', KEYS[7 + 3 * i], amount)
  local record = cmsgpack.pack({bet_id, player, spot, amount})
  records[#records + 1] = record
  redis.call('RPUSH', prefix .. 'mine:' .. round .. ':' .. player, record)
  redis.call('HSET', prefix .. 'stake:' .. round .. ':' .. player, spot, amount, 'all', amount)
  local receipt = cmsgpack.pack({table_id, tonumber(round), bet_id, spot, amount, after})
  local field = #player .. ':' .. player .. ':' .. bet_id
  redis.call('HSET', prefix .. 'bet_receipts', field, receipt)
  fields[#fields + 1] = field
  redis.call('XADD', KEYS[8 + 3 * i], 'MAXLEN', ARGV[6], '*', 'a',
    cmsgpack.pack({'bet', table_id, tonumber(round), bet_id, -amount, after, ts}))
  audited[KEYS[8 + 3 * i]] = true
  added[spot] = (added[spot] or 0) + amount
  staked = staked + amount
  replies[i + 1] = {'OK', receipt}
end
redis.call('HINCRBY', KEYS[3], 'balances', -staked)
redis.call('HINCRBY', KEYS[3], 'in_play', staked)
redis.call('RPUSH', prefix .. 'bets:' .. round, unpack(records))
redis.call('RPUSH', prefix .. 'receipt_keys:' .. round, unpack(fields))
for spot, value in pairs(added) do
  redis.call('HINCRBY', prefix .. 'totals:' .. round, spot, value)
end
redis.call('HINCRBY', prefix .. 'totals:' .. round, 'bets', #records)
for key in pairs(audited) do
  redis.call('PEXPIRE', key, ARGV[5])
end
return replies
"""
AUDIT_MS = str(90 * 86_400_000)  # place_bet's settings as `baccarat serve` gives them
AUDIT_ENTRIES = "100000"


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
        usec_before, cpu_before = await script_usec(url), await redis_cpu_s(url)
        rate = await burst(store, bets, batch, first_id=1_000_000)  # ids unused by the warm-up
        usec_per_bet = (await script_usec(url) - usec_before) / bets
        cpu_per_bet = (await redis_cpu_s(url) - cpu_before) / bets * 1e6
        print("sequential: 500 single bets")
        latencies = await one_by_one(store, 500)
        ledger = await store.ledger()
        assert ledger.balanced, ledger
        p50 = statistics.median(latencies)
        p99 = statistics.quantiles(latencies, n=100)[98]
        print(f"result: {rate:,.0f} bets/s concurrent (batch {batch}); ", end="")
        print(f"sequential p50 {p50:.3f} ms, p99 {p99:.3f} ms ({1000 / p50:,.0f} bets/s)")
        print(f"server side: {usec_per_bet:.1f} us of place_bet script per bet in the burst")
        floor = await floors(url, f"{prefix}-floor", bets, batch)
        print(
            f"Redis CPU per bet (INFO cpu): place_bet {cpu_per_bet:.1f} us; floors: "
            f"the call alone {floor['call_alone']:.1f} us, "
            f"a bet's writes alone {floor['writes_alone']:.1f} us"
        )
    finally:
        await store.close()
        await delete_keys(url, prefix)
        await delete_keys(url, f"{prefix}-floor")


async def floors(url: str, prefix: str, bets: int, batch: int) -> dict[str, float]:
    """Redis's CPU per bet for CALL_ALONE and WRITES_ALONE, `bets` bets each, sent as the
    store sends a burst's: `batch` at a time, in calls of BET_BATCH_MAX bets, pipelined on one
    connection."""
    client = Redis.from_url(url)
    try:
        measured = {}
        for name, script in (("call_alone", CALL_ALONE), ("writes_alone", WRITES_ALONE)):
            sha = await client.script_load(script)
            before = await redis_cpu_s(url)
            for first in range(0, bets, batch):
                last = min(first + batch, bets)
                pipe = client.pipeline(transaction=False)
                for start in range(first, last, BET_BATCH_MAX):
                    keys, args = _floor_call(prefix, range(start, min(start + BET_BATCH_MAX, last)))
                    pipe.evalsha(sha, len(keys), *keys, *args)
                await pipe.execute()
            measured[name] = (await redis_cpu_s(url) - before) / bets * 1e6
        return measured
    finally:
        await client.aclose()


def _floor_call(prefix: str, bets: range) -> tuple[list[str], list[str]]:
    """One reference call's KEYS and ARGV for these bets (place_bet's shape)."""
    table = ["state", "rounds", "ledger", "guests", "guest_ttl"]
    keys = [f"{prefix}:{name}" for name in table]
    args = [TABLE, f"{prefix}:", "5", str(10**9), AUDIT_MS, AUDIT_ENTRIES, "", f"{prefix}:o:"]
    for i in bets:
        player = f"p{i % PLAYERS}"
        keys += [f"{prefix}:balance:{player}", f"{prefix}:in_play:{player}"]
        keys.append(f"{prefix}:audit:{player}")
        args += [player, f"f{i}", "1", ("player", "banker")[i % 2], "100"]
    return keys, args


async def script_usec(url: str) -> float:
    """Redis's time in scripts so far (a place_bet script carries a batch of bets)."""
    stats = await redis_info(url, "commandstats")
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
