"""The hub's background work: tasks of a table (not of the connection that started them), and
retries with a doubling pause, timed by the node's Clock (server/runtime/clock.py)."""

from __future__ import annotations

import asyncio
import contextvars
from collections.abc import Awaitable, Callable, Coroutine
from typing import Any

from server.runtime.clock import Clock

__all__ = ["RETRY_DELAY_S", "TASK_ATTEMPTS", "Tasks", "table_task"]

TASK_ATTEMPTS = 5  # a background task is tried this many times before it is given up
RETRY_DELAY_S = 0.2  # the pause before its first retry; it doubles for each next one


def table_task(coro: Coroutine[object, object, None]) -> asyncio.Task[None]:
    """A task of the table's, not of the connection that happened to start it: it does not
    inherit that connection's log context (conn, player)."""
    return asyncio.create_task(coro, context=contextvars.Context())


class Tasks:
    """Background work with bounded retries; `cancel` stops what is still running."""

    def __init__(
        self,
        clock: Clock,
        log: Any,
        attempts: int = TASK_ATTEMPTS,
        retry_delay: float = RETRY_DELAY_S,
    ) -> None:
        self.clock = clock
        self.log = log
        self.attempts = attempts
        self.retry_delay = retry_delay
        self._running: set[asyncio.Task[bool]] = set()

    def spawn(
        self,
        name: str,
        make: Callable[[], Awaitable[object]],
        attempts: int | None = None,
        **context: object,
    ) -> asyncio.Task[bool]:
        """Run `make()` in the background with retries (see `retrying`)."""
        task = asyncio.create_task(self.retrying(name, make, attempts, **context))
        self._running.add(task)
        task.add_done_callback(self._running.discard)
        return task

    async def retrying(
        self,
        name: str,
        make: Callable[[], Awaitable[object]],
        attempts: int | None = None,
        **context: object,
    ) -> bool:
        """Await `make()` until it succeeds, at most `attempts` times, with a doubling pause
        in between; log each failure with its traceback. True if it succeeded."""
        attempts = attempts or self.attempts
        for attempt in range(1, attempts + 1):
            try:
                await make()
            except asyncio.CancelledError:
                raise
            except Exception:
                self.log.exception("task_failed", task=name, attempt=attempt, **context)
            else:
                return True
            if attempt < attempts:
                await self.clock.sleep(self.retry_delay * 2 ** (attempt - 1))
        self.log.error("task_gave_up", task=name, attempts=attempts, **context)
        return False

    def cancel(self) -> list[asyncio.Task[bool]]:
        """Cancel every task still running; the caller awaits those returned."""
        running = list(self._running)
        for task in running:
            task.cancel()
        return running
