"""Stores for the table-loop tests that run on both engines: memory on the test's manual
clock, Redis (the session's server) under a fresh key prefix, deleted afterwards."""

from __future__ import annotations

import uuid
from collections.abc import AsyncIterator

import pytest

from server.runtime.clock import ManualClock
from server.store.base import Store
from server.store.memory import MemoryStore
from server.store.redis import RedisStore
from tests.redis_server import delete_keys


@pytest.fixture
def clock() -> ManualClock:
    return ManualClock()


@pytest.fixture(params=["memory", pytest.param("redis", marks=pytest.mark.redis)])
async def any_store(request: pytest.FixtureRequest, clock: ManualClock) -> AsyncIterator[Store]:
    """A store of either engine. On Redis, bet deadlines are judged by Redis's own clock."""
    if request.param == "memory":
        yield MemoryStore(clock.now_ms)
        return
    url: str = request.getfixturevalue("redis_url")
    prefix = f"test-{uuid.uuid4().hex[:12]}"
    store = RedisStore.from_url(url, key_prefix=prefix)
    yield store
    await store.close()
    await delete_keys(url, [prefix])
