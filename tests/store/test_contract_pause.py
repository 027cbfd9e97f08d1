"""An operator's pause on both engines: a request shared through the store, and the owner's
pause_table/resume_table commits that clients see (TableState.paused, table_paused events)."""

from __future__ import annotations

import pytest

from server.core.table import pause_table, resume_table
from server.store.base import Store
from server.store.redis import RedisStore
from server.wire.shape_check import message_problems
from tests.store import RULES, TABLE, Owner


async def test_a_pause_request_is_set_and_cleared_once(table: Store) -> None:
    """set_paused says whether it changed the request; paused reads it back."""
    assert await table.paused(TABLE) is False
    assert await table.set_paused(TABLE, True) is True
    assert await table.set_paused(TABLE, True) is False  # asked twice: changed once
    assert await table.paused(TABLE) is True
    assert await table.set_paused(TABLE, False) is True
    assert await table.set_paused(TABLE, False) is False
    assert await table.paused(TABLE) is False


async def test_a_pause_request_is_per_table(table: Store) -> None:
    """Pausing one table leaves the others playing."""
    await table.create_table("t2", RULES)
    await table.set_paused(TABLE, True)
    assert await table.paused("t2") is False


@pytest.mark.redis
async def test_every_node_sees_the_request(redis_url: str) -> None:
    """On Redis the request is in the shared store: another node's store object reads it."""
    first = RedisStore.from_url(redis_url, key_prefix="test-pause-shared")
    second = RedisStore.from_url(redis_url, key_prefix="test-pause-shared")
    try:
        await first.create_table(TABLE, RULES)
        await first.set_paused(TABLE, True)
        assert await second.paused(TABLE) is True
        assert await second.set_paused(TABLE, False) is True
        assert await first.paused(TABLE) is False
    finally:
        keys = [k async for k in first._redis.scan_iter(match="test-pause-shared:*")]
        if keys:
            await first._redis.delete(*keys)
        await first.close()
        await second.close()


async def test_the_pause_is_committed_in_the_state_with_its_events(table: Store) -> None:
    """The owner's pause and resume are commits: the state keeps `paused` (a new owner reads
    it back), and the events are table_paused then table_resumed, of their own shape."""
    owner = await Owner(table).start()
    events = await owner.apply(pause_table(owner.state))
    assert [e["kind"] for e in events] == ["table_paused"]
    assert message_problems(events[0]) == []
    stored = await table.load_state(TABLE)
    assert stored is not None and stored.paused is True
    snap = await table.snapshot(TABLE, None)
    assert snap is not None and snap.state.paused is True
    events = await owner.apply(resume_table(owner.state))
    assert [e["kind"] for e in events] == ["table_resumed"]
    assert message_problems(events[0]) == []
    stored = await table.load_state(TABLE)
    assert stored is not None and stored.paused is False
