"""Store fixtures: every contract test runs on the memory engine and on a real Redis.

Redis comes from REDIS_URL if set, else from a redis-server this session starts (see
tests/redis_server.py). Each store a test makes gets its own key prefix, and its keys are
deleted afterwards, so tests never see each other's data, even on a shared REDIS_URL.
"""

from __future__ import annotations

import asyncio
import uuid
from collections.abc import AsyncIterator, Awaitable, Callable, Iterator

import pytest
from redis.asyncio import Redis

from server.store.audit import DEFAULT_AUDIT_ENTRIES, DEFAULT_AUDIT_KEEP_MS
from server.store.base import (
    DEFAULT_HISTORY_EVENTS,
    DEFAULT_HISTORY_ROUNDS,
    DEFAULT_MAX_BETS_PER_ROUND,
    Store,
)
from server.store.memory import MemoryStore
from server.store.redis import RedisStore
from server.store.wallet import DEFAULT_RECALL_ROUNDS
from tests.redis_server import RedisProcess, delete_keys, start_redis
from tests.store import RULES, TABLE, ManualClock

StoreFactory = Callable[..., Awaitable[Store]]
Advance = Callable[[int], Awaitable[None]]


@pytest.fixture(params=["memory", pytest.param("redis", marks=pytest.mark.redis)])
def engine(request: pytest.FixtureRequest) -> str:
    name: str = request.param
    return name


@pytest.fixture
def clock() -> ManualClock:
    return ManualClock()


@pytest.fixture
async def make_store(
    engine: str, clock: ManualClock, request: pytest.FixtureRequest
) -> AsyncIterator[StoreFactory]:
    """Build stores of the test's engine; each Redis one under a fresh key prefix."""
    url = request.getfixturevalue("redis_url") if engine == "redis" else ""
    made: list[Store] = []
    prefixes: list[str] = []

    async def make(
        history_events: int = DEFAULT_HISTORY_EVENTS,
        history_rounds: int = DEFAULT_HISTORY_ROUNDS,
        recall_rounds: int = DEFAULT_RECALL_ROUNDS,
        max_bets_per_round: int = DEFAULT_MAX_BETS_PER_ROUND,
        audit_keep_ms: int = DEFAULT_AUDIT_KEEP_MS,
        audit_entries: int = DEFAULT_AUDIT_ENTRIES,
    ) -> Store:
        store: Store
        if engine == "memory":
            store = MemoryStore(
                clock,
                history_events,
                history_rounds,
                recall_rounds,
                max_bets_per_round,
                audit_keep_ms=audit_keep_ms,
                audit_entries=audit_entries,
            )
        else:
            prefixes.append(f"test-{uuid.uuid4().hex[:12]}")
            store = RedisStore.from_url(
                url,
                history_events=history_events,
                history_rounds=history_rounds,
                recall_rounds=recall_rounds,
                max_bets_per_round=max_bets_per_round,
                key_prefix=prefixes[-1],
                audit_keep_ms=audit_keep_ms,
                audit_entries=audit_entries,
            )
        made.append(store)
        return store

    yield make
    for store in made:
        await store.close()
    if prefixes:
        await delete_keys(url, prefixes)


@pytest.fixture
async def store(make_store: StoreFactory) -> Store:
    """A store with the default history sizes."""
    return await make_store()


@pytest.fixture
async def table(store: Store) -> Store:
    """The store with table TABLE created and players alice (10,000) and bob (5,000)."""
    await store.create_table(TABLE, RULES)
    await store.ensure_player("alice", 10_000)
    await store.ensure_player("bob", 5_000)
    return store


@pytest.fixture
def advance(engine: str, clock: ManualClock, store: Store) -> Advance:
    """Let `ms` pass on the store's clock: instantly for memory, really for Redis."""

    async def advance_ms(ms: int) -> None:
        if engine == "memory":
            clock.now_ms += ms
            return
        target = await store.now_ms() + ms
        async with asyncio.timeout(5 + ms / 1000):
            while await store.now_ms() < target:  # noqa: ASYNC110 - Redis's clock can't signal
                await asyncio.sleep(0.005)  # polls Redis's clock; bounded by the timeout

    return advance_ms


@pytest.fixture
async def raw(redis_url: str) -> AsyncIterator[Redis]:
    """A plain client of the session's Redis, to look at or damage what a store wrote."""
    client = Redis.from_url(redis_url)
    yield client
    await client.aclose()


@pytest.fixture
def own_server() -> Iterator[RedisProcess]:
    """A redis-server of this test's own, which it may stop, restart or pause."""
    with start_redis() as server:
        yield server
