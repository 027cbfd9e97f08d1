"""Clocks for the node's loops: the system clock, and a manual one for tests.

The runtime is the only code that sleeps: the table loops, and the hub's follower, watchdog,
notice listener and retries (server/transport/hub.py, settlements.py, tasks.py) sleep only
through a Clock, so a test can move time forward by hand instead of waiting for it.
tests/test_architecture.py checks that no other module calls asyncio.sleep.
"""

from __future__ import annotations

import asyncio
import heapq
import itertools
import time
from typing import Protocol

__all__ = ["Clock", "ManualClock", "SystemClock", "honour_swallowed_cancel", "sleep_or_wake"]


class Clock(Protocol):
    def now_ms(self) -> int: ...

    async def sleep(self, seconds: float) -> None: ...


def honour_swallowed_cancel() -> None:
    """Raise CancelledError if this task was asked to stop and the request got lost.

    On Python 3.11, asyncio.wait_for returns the inner result and drops a cancellation that
    arrives as the inner call completes; redis-py wraps its socket writes in it, so about one
    in three cancels of a loop in the middle of a store call vanished and Node.stop waited
    for ever. The request is still counted (Task.cancelling), so every sleep checks it.
    """
    task = asyncio.current_task()
    if task is not None and task.cancelling():
        raise asyncio.CancelledError


async def sleep_or_wake(clock: Clock, wake: asyncio.Event, seconds: float) -> None:
    """Sleep `seconds` on `clock`, or less if `wake` is set meanwhile (it is not cleared)."""
    if wake.is_set():
        return
    sleeping = asyncio.ensure_future(clock.sleep(seconds))
    woken = asyncio.ensure_future(wake.wait())
    try:
        await asyncio.wait((sleeping, woken), return_when=asyncio.FIRST_COMPLETED)
    finally:
        sleeping.cancel()
        woken.cancel()
        await asyncio.gather(sleeping, woken, return_exceptions=True)


class SystemClock:
    def now_ms(self) -> int:
        return time.time_ns() // 1_000_000

    async def sleep(self, seconds: float) -> None:
        honour_swallowed_cancel()
        await asyncio.sleep(max(0.0, seconds))


class ManualClock:
    """Time stands still until a test calls `advance`; sleepers wake in deadline order."""

    def __init__(self, start_ms: int = 1_700_000_000_000) -> None:
        self._now = start_ms
        self._sleepers: list[tuple[int, int, asyncio.Future[None]]] = []
        self._order = itertools.count()

    def now_ms(self) -> int:
        return self._now

    async def sleep(self, seconds: float) -> None:
        honour_swallowed_cancel()
        when = self._now + max(0, round(seconds * 1000))
        future: asyncio.Future[None] = asyncio.get_running_loop().create_future()
        heapq.heappush(self._sleepers, (when, next(self._order), future))
        await future

    @property
    def sleepers(self) -> int:
        return sum(1 for *_, future in self._sleepers if not future.done())

    async def advance(self, seconds: float) -> None:
        """Move time forward, waking each sleeper at its own deadline, in order."""
        target = self._now + round(seconds * 1000)
        while self._sleepers and self._sleepers[0][0] <= target:
            when, _, future = heapq.heappop(self._sleepers)
            self._now = max(self._now, when)
            if not future.done():
                future.set_result(None)
            await _settle()
        self._now = target
        await _settle()


async def _settle(rounds: int = 20) -> None:
    """Let woken tasks run until they block again (bounded, no wall-clock waiting)."""
    for _ in range(rounds):
        await asyncio.sleep(0)
