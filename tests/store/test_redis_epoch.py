"""The Redis engine's side of the epoch and of settlements in one batch."""

from __future__ import annotations

import pytest
from redis.asyncio import Redis

from server.store.base import Store
from server.store.redis import RedisStore
from tests.store import RULES, TABLE, Owner, bet

pytestmark = pytest.mark.redis


@pytest.fixture
def engine() -> str:
    """Only the Redis engine here."""
    return "redis"


def _state_key(store: Store) -> str:
    assert isinstance(store, RedisStore)
    return f"{store.key_prefix}:{{t:{TABLE}}}:state"


async def _calls(raw: Redis, command: str) -> int:
    stats = await raw.info("commandstats")
    return int(stats.get(f"cmdstat_{command}", {}).get("calls", 0))


async def test_settlements_is_one_hmget(table: Store, raw: Redis) -> None:
    """Every bettor's settlement comes from one HMGET, not one HGET per player."""
    players = [f"p{i}" for i in range(20)]
    for player in players:
        await table.ensure_player(player, 1_000)
    owner = await Owner(table).start()
    await owner.open()
    for player in players:
        await bet(table, player, 100, "banker")
    await owner.finish()
    await raw.config_resetstat()
    found = await table.settlements(TABLE, 1, players)
    assert sorted(found) == sorted(players)
    assert (await _calls(raw, "hmget"), await _calls(raw, "hget")) == (1, 0)


async def test_a_table_recreated_after_a_loss_has_a_new_epoch(table: Store, raw: Redis) -> None:
    """Redis lost the table (restart without persistence): create_table makes it again with
    a new epoch, so a seq of the lost history is never taken for one of the new."""
    owner = await Owner(table).start()
    await owner.open()
    old = await table.epoch(TABLE)
    assert isinstance(table, RedisStore)
    keys = [key async for key in raw.scan_iter(match=f"{table.key_prefix}:{{t:{TABLE}}}:*")]
    await raw.delete(*keys)
    await table.create_table(TABLE, RULES)
    assert await table.head(TABLE) == (0, await table.epoch(TABLE))
    assert await table.epoch(TABLE) != old


async def test_a_table_from_before_epochs_gets_one(table: Store, raw: Redis) -> None:
    """A table stored by a version without epochs reads as epoch '' until create_table (run
    by every table loop at start) gives it one; its history is kept."""
    owner = await Owner(table).start()
    await owner.open()
    seq = await table.last_seq(TABLE)
    await raw.hdel(_state_key(table), "epoch")
    assert await table.head(TABLE) == (seq, "")
    snap = await table.snapshot(TABLE, None)
    assert snap is not None and snap.epoch == ""
    await table.create_table(TABLE, RULES)
    epoch = await table.epoch(TABLE)
    assert epoch and await table.head(TABLE) == (seq, epoch)
    assert await table.reset_epoch(TABLE, "") == epoch  # '' is no longer current
