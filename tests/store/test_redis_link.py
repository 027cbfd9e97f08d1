"""The store's command link (server/store/redis_link.py) on a real Redis: one connection for
the batched calls, an error reply or an argument Redis cannot take failing only its call, a
broken connection's calls written again on a new one, a call with no reply in time failing
without a retry, and one reconnect for every caller while Redis is paused."""

from __future__ import annotations

import asyncio
import os
import signal
import uuid
from collections.abc import AsyncIterator, Callable

import pytest
from redis.asyncio import Connection, Redis

from server.store.base import StoreUnavailable
from server.store.redis import RedisStore
from tests.redis_server import RedisProcess

pytestmark = pytest.mark.redis

WAIT_S = 5.0


@pytest.fixture
async def store(redis_url: str) -> AsyncIterator[RedisStore]:
    store = RedisStore(redis_url, key_prefix=f"link-{uuid.uuid4().hex[:8]}", timeout_s=1.0)
    yield store
    await store.close()


async def blocked_in_redis(raw: Redis, which: Callable[[int], bool]) -> None:
    """Until a client `which` accepts (by id) is blocked in BLPOP. Redis tells this only when
    asked: a bounded poll of CLIENT LIST."""
    for _ in range(int(WAIT_S / 0.01)):
        clients = await raw.client_list()
        if any(c["cmd"] == "blpop" and which(int(c["id"])) for c in clients):
            return
        await asyncio.sleep(0.01)
    raise AssertionError("no client blocked in BLPOP")


async def link_client_id(store: RedisStore) -> int:
    return int(await store._call("CLIENT", "ID"))


async def test_calls_share_one_connection_and_an_error_reply_fails_only_its_call(
    store: RedisStore,
) -> None:
    key = f"{store.key_prefix}:text"
    await store._call("SET", key, "not a number")
    first = await link_client_id(store)
    results = await asyncio.gather(
        store._call("INCR", key),  # WRONGTYPE-like: an error reply
        store._call("GET", key),
        store._call("CLIENT", "ID"),
        return_exceptions=True,
    )
    assert isinstance(results[0], Exception) and "not an integer" in str(results[0])
    assert results[1] == b"not a number"
    assert results[2] == first  # the same connection, still open after the error reply


async def test_a_call_on_a_broken_connection_goes_again_on_a_new_one(
    store: RedisStore, raw: Redis
) -> None:
    key = f"{store.key_prefix}:queue"
    first = await link_client_id(store)
    waiting = asyncio.ensure_future(store._call("BLPOP", key, 0.8))  # in flight, unanswered
    await blocked_in_redis(raw, lambda id_: id_ == first)
    await raw.client_kill_filter(_id=str(first))
    # Written again on a new connection: it blocks there, then this push answers it.
    await blocked_in_redis(raw, lambda id_: id_ != first)
    await raw.rpush(key, "served")
    assert await asyncio.wait_for(waiting, WAIT_S) == [key.encode(), b"served"]
    assert await link_client_id(store) != first


async def test_a_call_without_a_reply_in_time_fails_and_is_not_retried(
    store: RedisStore, raw: Redis
) -> None:
    key = f"{store.key_prefix}:never"
    with pytest.raises(StoreUnavailable):
        await asyncio.wait_for(store._call("BLPOP", key, 3), WAIT_S)  # timeout_s is 1.0
    await raw.rpush(key, "late")  # a retried BLPOP would still be waiting and take it
    assert await store._call("LLEN", key) == 1
    assert await store._call("PING") in (b"PONG", True)  # the link opened a new connection


async def test_an_argument_redis_cannot_take_fails_only_its_call(store: RedisStore) -> None:
    await store._call("PING")  # the link is open: the next turn's calls are one write
    good = asyncio.ensure_future(store._call("TIME"))
    bad = asyncio.ensure_future(store._call("GET", None))  # redis-py cannot pack None
    done, _ = await asyncio.wait({good, bad}, timeout=WAIT_S)
    assert done == {good, bad}
    assert isinstance(bad.exception(), Exception) and good.exception() is None


async def test_with_redis_paused_every_caller_fails_after_one_reconnect(
    own_server: RedisProcess,
) -> None:
    """Once the link's connection timed out, the calls that come while Redis is paused wait
    for one reconnect together: they all fail with it (redis-py's connect retries), not one
    reconnect after another. Counted in connections made, not timed: a ratio of wall-clock
    times failed on a loaded machine."""
    store = RedisStore(own_server.url, key_prefix="paused", timeout_s=0.5)
    pid = own_server.pid
    assert pid is not None
    link = store._batcher.link
    try:
        await store._call("PING")
        os.kill(pid, signal.SIGSTOP)
        with pytest.raises(StoreUnavailable):
            await store._call("TIME")  # the connection times out and is dropped
        made = 0
        make_connection = link._make_connection

        def counted() -> Connection:
            nonlocal made
            made += 1
            return make_connection()

        link._make_connection = counted

        async def one() -> None:
            with pytest.raises(StoreUnavailable):
                await store._call("TIME")

        tasks = []
        for _ in range(4):  # four callers, each in its own turn (as bets arrive)
            tasks.append(asyncio.ensure_future(one()))
            await asyncio.sleep(0)
        await asyncio.wait_for(asyncio.gather(*tasks), 60)
        assert made == 1  # one after another: 4
    finally:
        os.kill(pid, signal.SIGCONT)
        await store.close()
