"""Both clocks honour a cancellation that a library swallowed (Python 3.11's wait_for)."""

from __future__ import annotations

import asyncio
import contextlib

import pytest

from server.runtime.clock import Clock, ManualClock, SystemClock


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
