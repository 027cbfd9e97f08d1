"""One Redis connection that carries the store's batched commands, written back to back and
answered in order; and the Batcher that gathers a loop turn's commands into one write on it.

redis-py's pipeline costs ~100 us of the node's CPU per `execute` whatever it carries (a
connection from the pool and back, a pipeline object, a timeout and a retry wrapper, a write
and a drain): at a few thousand bets a second, with one or two bets a turn, that was more than
the bets themselves. Here a batch is one write on a connection kept open, its futures queued
in order, and one reader task reads the replies as they come: Redis answers the commands of one
connection in the order it got them. The connection is redis-py's own (`make_connection` of
the store's pool: the URL's scheme, password, database and timeouts), so connecting and
parsing are the client's.

Failures: an error reply fails its own call only. A connection that breaks fails every call
written to it and not yet answered, after one more try on a new connection (as redis-py's retry
of a pipeline does: place_bet is idempotent by bet_id, and commit fenced and versioned). No
reply within the socket timeout fails them too (Redis is paused or gone), without a retry.
"""

from __future__ import annotations

import asyncio
import contextlib
from collections import deque
from collections.abc import Callable, Coroutine
from typing import Any

from redis.asyncio import Connection, Redis
from redis.exceptions import ConnectionError as RedisConnectionError
from redis.exceptions import ResponseError

__all__ = ["BATCH_MAX", "Batcher", "Call", "CommandLink"]

Call = tuple[tuple[Any, ...], "asyncio.Future[Any]"]
BATCH_MAX = 256  # commands one write carries; more calls in the same tick take several


class _Wire:
    """One open connection and the calls written to it, oldest first."""

    def __init__(self, connection: Connection) -> None:
        self.connection = connection
        self.waiting: deque[tuple[Call, int]] = deque()  # (call, tries so far)
        self.reader: asyncio.Task[None] | None = None
        self.broken = False


class CommandLink:
    def __init__(self, make_connection: Callable[[], Connection], tries: int = 2) -> None:
        self._make_connection = make_connection
        self._tries = tries  # writes a call may get: a broken connection's calls go again
        self._wire: _Wire | None = None
        # While no connection is open: the calls waiting for one, and the one task opening it
        # for all of them (one connect, whose failure fails them all at once).
        self._unsent: list[tuple[Call, int]] = []
        self._opener: asyncio.Task[None] | None = None
        self._tasks: set[asyncio.Task[None]] = set()
        self.writes = 0  # batches written (tests count them)

    def send(self, calls: list[Call]) -> None:
        """Write these calls now if a connection is open, else as soon as one is."""
        self._send([(call, 0) for call in calls])

    def _send(self, calls: list[tuple[Call, int]]) -> None:
        wire = self._wire
        if wire is not None and not wire.broken and wire.connection._writer is not None:
            self._write(wire, calls)
            return
        self._unsent.extend(calls)
        if self._opener is None:
            self._opener = asyncio.create_task(self._open())

    def _spawn(self, coro: Coroutine[Any, Any, None]) -> None:
        task = asyncio.create_task(coro)
        self._tasks.add(task)
        task.add_done_callback(self._tasks.discard)

    async def _open(self) -> None:
        try:
            connection = self._make_connection()
            # redis-py's connect, with its retries; raises when it gives up.
            await connection.connect()  # type: ignore[no-untyped-call]
        except BaseException as error:  # every waiting caller hears it; a cancel ends them too
            unsent, self._unsent, self._opener = self._unsent, [], None
            _fail([call for call, _ in unsent], error)
            if not isinstance(error, Exception):
                raise
            return
        self._wire = wire = _Wire(connection)
        unsent, self._unsent, self._opener = self._unsent, [], None
        self._write(wire, unsent)

    def _write(self, wire: _Wire, calls: list[tuple[Call, int]]) -> None:
        connection = wire.connection
        chunks: list[bytes] = []
        written: list[tuple[Call, int]] = []
        for call, tries in calls:
            args, future = call
            if future.done():  # its caller was cancelled
                continue
            try:
                chunks += connection.pack_command(*args)
            except Exception as error:  # an argument Redis cannot take: this call's alone
                future.set_exception(error)
                continue
            written.append((call, tries + 1))
        if not written:
            return
        wire.waiting.extend(written)
        writer = connection._writer  # redis-py's stream, open since connect()
        try:
            assert writer is not None  # checked by _send, or just opened
            writer.writelines(chunks)
        except Exception as error:  # a transport closed under us: as if it broke
            if wire.reader is not None:
                wire.reader.cancel()
            self._break(wire, RedisConnectionError(f"cannot write to Redis: {error!r}"))
            return
        self.writes += 1
        if wire.reader is None:
            wire.reader = asyncio.create_task(self._read(wire))

    async def _read(self, wire: _Wire) -> None:
        connection = wire.connection
        try:
            while wire.waiting:
                try:
                    reply: Any = await connection.read_response()
                except ResponseError as error:  # an error reply: that call's alone
                    reply = error
                (_, future), _ = wire.waiting.popleft()
                if future.done():  # its caller was cancelled: the reply is dropped
                    continue
                if isinstance(reply, Exception):
                    future.set_exception(reply)
                else:
                    future.set_result(reply)
        except BaseException as error:  # the connection broke, timed out, or we were cancelled
            self._break(wire, error)
            if not isinstance(error, Exception):
                raise
        finally:
            if wire.reader is asyncio.current_task():
                wire.reader = None

    def _break(self, wire: _Wire, error: BaseException) -> None:
        """Drop a connection that failed. Its unanswered calls are written once more on a new
        one if it broke, not if it timed out (Redis may still be running them)."""
        wire.broken = True
        if self._wire is wire:
            self._wire = None
        waiting = list(wire.waiting)
        wire.waiting.clear()
        self._spawn(_disconnect(wire.connection))
        broke = isinstance(error, RedisConnectionError)
        again = [(call, tries) for call, tries in waiting if broke and tries < self._tries]
        _fail([call for call, tries in waiting if not (broke and tries < self._tries)], error)
        if again:
            self._send(again)

    async def close(self) -> None:
        if self._opener is not None:
            self._opener.cancel()
            await asyncio.gather(self._opener, return_exceptions=True)
        wire, self._wire = self._wire, None
        if wire is not None:
            wire.broken = True
            if wire.reader is not None:
                wire.reader.cancel()
                await asyncio.gather(wire.reader, return_exceptions=True)
            _fail([call for call, _ in wire.waiting], RedisConnectionError("store closed"))
            await _disconnect(wire.connection)
        for task in list(self._tasks):
            task.cancel()
        await asyncio.gather(*self._tasks, return_exceptions=True)


def _fail(calls: list[Call], error: BaseException) -> None:
    for _, future in calls:
        if not future.done():
            future.set_exception(error)


async def _disconnect(connection: Connection) -> None:
    with contextlib.suppress(Exception):  # a broken connection may fail to close: dropped
        await connection.disconnect(nowait=True)


class Batcher:
    """Sends the commands callers issue within one turn of the event loop as one write, on
    one connection kept open (the CommandLink above).

    Every bet is a script call; sent alone, redis-py's per-call work (a pooled connection, a
    timeout, a write and a read of its own) cost the node ~190 us a bet, and its pipeline
    ~100 us per execute whatever it carried. Calls made while the loop runs its ready
    callbacks (the sessions woken by one batch of frames) go out together on the next turn
    (BATCH_MAX a write); each caller still gets its own reply or error."""

    def __init__(self, redis: Redis) -> None:
        self.link = CommandLink(redis.connection_pool.make_connection)
        self._queued: list[Call] = []

    async def call(self, *args: Any) -> Any:
        return await self.submit(*args)

    def submit(self, *args: Any) -> asyncio.Future[Any]:
        """Queue a command in this turn's write now; its reply comes in the future."""
        loop = asyncio.get_running_loop()
        future: asyncio.Future[Any] = loop.create_future()
        if not self._queued:
            loop.call_soon(self._flush)
        self._queued.append((args, future))
        return future

    def _flush(self) -> None:
        queued, self._queued = self._queued, []
        for first in range(0, len(queued), BATCH_MAX):
            self.link.send(queued[first : first + BATCH_MAX])

    async def close(self) -> None:
        await self.link.close()
