"""What a table loop counts: leases taken and lost, rounds by outcome, voided rounds."""

from __future__ import annotations

import asyncio
import contextlib
import dataclasses
import random
from collections import Counter
from functools import partial

from server.core.cards import Card, Suit
from server.core.shoe import Shoe
from server.core.table import close_betting
from server.runtime.clock import ManualClock
from server.runtime.table_loop import TableLoop
from server.store.redis import RedisStore
from tests.redis_server import free_port
from tests.runtime.test_table_loop import (
    RULES,
    TABLE,
    TIMINGS,
    _advance_until,
    _events,
    _loop,
    _running,
    _state,
    _store,
)


async def test_rounds_are_counted_by_outcome_and_the_lease_once() -> None:
    """Each settled round counts once under its winner; taking the table counts once."""
    clock = ManualClock()
    store = await _store(clock)
    loop = _loop(store, clock, "a", seed=11)
    async with _running(loop):
        await _advance_until(clock, store, lambda s: s.round == 6)
    winners = Counter(e["winner"] for e in await _events(store) if e["kind"] == "round_settled")
    sample = loop.metrics.registry.get_sample_value
    counted = {w: sample("baccarat_rounds_total", {"outcome": w}) for w in winners}
    assert counted == winners and sum(winners.values()) >= 5
    assert sample("baccarat_lease_acquisitions_total", {"table": TABLE}) == 1
    assert sample("baccarat_lease_losses_total", {"table": TABLE}) is None


async def test_a_lost_lease_is_counted() -> None:
    """An owner fenced off by a newer token counts one lease loss."""
    clock = ManualClock()
    store = await _store(clock)
    timings = dataclasses.replace(TIMINGS, lease_ttl=300.0)  # no renewal before the close
    loop = TableLoop(
        store, TABLE, RULES, "a", clock, timings, seeds=partial(random.Random(3).randbytes, 32)
    )
    async with _running(loop):
        assert loop.token is not None
        await store.release_lease(TABLE, "a", loop.token)
        assert await store.acquire_lease(TABLE, "b", 600_000) is not None
        await clock.advance(TIMINGS.betting_window)  # its close is refused: stale token
        assert not loop.owning
    assert (
        loop.metrics.registry.get_sample_value("baccarat_lease_losses_total", {"table": TABLE}) == 1
    )


async def test_a_voided_round_is_counted() -> None:
    """A round whose shoe cannot finish the coup is voided and counted as voided."""
    clock = ManualClock()
    store = await _store(clock)
    loop = _loop(store, clock, "a")
    lease = await store.acquire_lease(TABLE, "a", 60_000)
    assert lease is not None
    await loop.step(await _state(store), RULES, lease.token)  # opens round 1
    opened = await _state(store)
    # Four cards whose coup needs a fifth: Player A+2 = 3 must draw.
    four = [Card(rank, Suit.CLUBS) for rank in ("A", "K", "2", "Q")]
    broken = dataclasses.replace(
        close_betting(opened).state, shoe=Shoe(four, 0, 4), round_start=0, dealt=0
    )
    await store.commit(TABLE, lease.token, opened.version, broken, [])
    await loop.step(await _state(store), RULES, lease.token)
    assert [e["kind"] for e in await _events(store)][-2:] == ["round_voided", "shoe_revealed"]
    assert loop.metrics.registry.get_sample_value("baccarat_rounds_voided_total") == 1


class _SleepSignal(ManualClock):
    """A manual clock that tells when the loop went to sleep (after a failed step)."""

    def __init__(self) -> None:
        super().__init__()
        self.slept = asyncio.Event()

    async def sleep(self, seconds: float) -> None:
        self.slept.set()
        await super().sleep(seconds)


async def test_an_unreachable_store_is_counted_as_a_store_error() -> None:
    """A loop whose store cannot be reached counts a table_loop store error, then retries."""
    clock = _SleepSignal()
    store = RedisStore.from_url(f"redis://127.0.0.1:{free_port()}/0")  # nobody listens there
    loop = TableLoop(store, TABLE, RULES, "a", clock, TIMINGS)
    task = asyncio.create_task(loop.run())
    try:
        async with asyncio.timeout(10):
            await clock.slept.wait()
    finally:
        task.cancel()
        with contextlib.suppress(asyncio.CancelledError):
            await task
        await store.close()
    errors = loop.metrics.registry.get_sample_value
    assert errors("baccarat_store_errors_total", {"component": "table_loop"}) == 1
