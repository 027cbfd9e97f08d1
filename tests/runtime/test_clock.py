"""Both clocks honour a cancellation that a library swallowed (Python 3.11's wait_for)."""

from __future__ import annotations

import asyncio
import contextlib

import pytest

from server.runtime.clock import Clock, ManualClock, SystemClock, sleep_or_wake


@pytest.mark.parametrize("clock", [SystemClock(), ManualClock()], ids=["system", "manual"])
async def test_a_swallowed_cancellation_stops_the_next_sleep(clock: Clock) -> None:
    """A task asked to stop whose CancelledError was caught and dropped (as redis-py's
    wait_for can on Python 3.11) is cancelled at its next sleep instead of running on."""
    reached = asyncio.Event()

    async def loop() -> None:
        with contextlib.suppress(asyncio.CancelledError):  # swallowed, as the library does
            await asyncio.Event().wait()  # stands for a store call
        reached.set()
        await clock.sleep(3600)

    task = asyncio.create_task(loop())
    await asyncio.sleep(0)
    task.cancel()
    async with asyncio.timeout(5):
        with pytest.raises(asyncio.CancelledError):
            await task
    assert reached.is_set()


async def test_sleep_or_wake_returns_at_the_deadline_or_when_woken() -> None:
    """The hub's watchdog waits "every interval, or at once when asked": on a manual clock
    it returns when time reaches the deadline, or as soon as the event is set, and leaves no
    sleeper behind either way."""
    clock, wake = ManualClock(), asyncio.Event()
    waiting = asyncio.create_task(sleep_or_wake(clock, wake, 1.0))
    await clock.advance(0)  # it starts sleeping
    await clock.advance(0.999)
    assert not waiting.done()
    await clock.advance(0.001)
    assert waiting.done()
    waiting = asyncio.create_task(sleep_or_wake(clock, wake, 1.0))
    await clock.advance(0.5)
    wake.set()
    await clock.advance(0)
    assert waiting.done() and clock.sleepers == 0
    await sleep_or_wake(clock, wake, 1.0)  # already set: no wait at all
