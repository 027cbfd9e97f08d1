"""Settled notices on Redis: one channel per key prefix, heard by every store (node) on it,
published by the commit script itself; a listener whose Redis goes away raises
StoreUnavailable, and listens again once Redis is back."""

from __future__ import annotations

import asyncio
import uuid

import pytest
import structlog.testing
from redis.asyncio import Redis

from server.store.base import SettledNotice, StoreUnavailable
from server.store.codec import packb
from server.store.redis import RedisStore
from tests.redis_server import RedisProcess, delete_keys
from tests.store import RULES, TABLE, WAIT_S, Owner, bet

pytestmark = pytest.mark.redis


async def test_every_store_of_one_key_prefix_hears_the_commit(redis_url: str) -> None:
    """Node B's store hears what node A's commit paid, on `<key_prefix>:settled`, a msgpack
    [table, round, players] published by the commit script; a store of another prefix (another
    site) is not subscribed to that channel."""
    prefix = f"test-{uuid.uuid4().hex[:12]}"
    node_a, node_b = (RedisStore.from_url(redis_url, key_prefix=prefix) for _ in range(2))
    other = RedisStore.from_url(redis_url, key_prefix=prefix + "-other")
    raw = Redis.from_url(redis_url)
    try:
        await node_a.create_table(TABLE, RULES)
        await node_a.ensure_player("dave", 1_000)
        owner = await Owner(node_a).start()
        async with node_b.settled_notices() as notices, other.settled_notices():
            subscribed = dict(await raw.pubsub_numsub(f"{prefix}:settled"))
            assert subscribed == {f"{prefix}:settled".encode(): 1}
            await owner.open()
            await bet(node_b, "dave", 100, "banker")
            await owner.finish()
            notice = await asyncio.wait_for(anext(notices), WAIT_S)
        assert notice == SettledNotice(TABLE, 1, ("dave",))
    finally:
        for store in (node_a, node_b, other):
            await store.close()
        await raw.aclose()
        await delete_keys(redis_url, [prefix, prefix + "-other"])


async def test_a_stray_message_on_the_channel_is_skipped(redis_url: str) -> None:
    """Anyone with access may PUBLISH on the channel: what is not a notice is skipped with a
    warning, and the listener still hears the next commit."""
    prefix = f"test-{uuid.uuid4().hex[:12]}"
    store = RedisStore.from_url(redis_url, key_prefix=prefix)
    raw = Redis.from_url(redis_url)
    try:
        await store.create_table(TABLE, RULES)
        await store.ensure_player("dave", 1_000)
        owner = await Owner(store).start()
        async with store.settled_notices() as notices:
            for junk in (b"\xc1", packb(["t", "1", ["x"]]), packb([1, 2]), b"hello"):
                await raw.publish(f"{prefix}:settled", junk)
            await owner.open()
            await bet(store, "dave", 100, "banker")
            await owner.finish()
            with structlog.testing.capture_logs() as logs:
                notice = await asyncio.wait_for(anext(notices), WAIT_S)
        assert notice == SettledNotice(TABLE, 1, ("dave",))
        assert [e["event"] for e in logs] == ["settled_notice_malformed"] * 4
    finally:
        await store.close()
        await raw.aclose()
        await delete_keys(redis_url, [prefix])


async def test_a_listener_raises_store_unavailable_and_listens_again_after_a_restart(
    own_server: RedisProcess,
) -> None:
    """Redis stops under a waiting listener: StoreUnavailable (not a raw redis error, and not
    a quiet reconnect that would hide the lost notices); entering while it is down fails the
    same way; once it is back a new listener hears the next commit."""
    store = RedisStore.from_url(own_server.url)
    try:
        async with store.settled_notices() as notices:
            waiting = asyncio.ensure_future(anext(notices))
            await asyncio.sleep(0)  # the listener is now waiting for a message
            own_server.stop()
            with pytest.raises(StoreUnavailable):
                await asyncio.wait_for(waiting, WAIT_S)
        with pytest.raises(StoreUnavailable):
            async with store.settled_notices():
                pass
        own_server.restart()  # empty: nothing was persisted
        await store.create_table(TABLE, RULES)
        await store.ensure_player("dave", 1_000)
        owner = await Owner(store).start()
        async with store.settled_notices() as notices:
            await owner.open()
            await bet(store, "dave", 100, "banker")
            await owner.finish()
            notice = await asyncio.wait_for(anext(notices), WAIT_S)
        assert notice == SettledNotice(TABLE, 1, ("dave",))
    finally:
        await store.close()
