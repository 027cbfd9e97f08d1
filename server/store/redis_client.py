"""How the Redis engine reaches Redis: the connection class its pools open, and what a failed
call becomes (StoreUnavailable, StoreRefused) once the client has given up on it."""

from __future__ import annotations

import asyncio
import contextlib
from collections.abc import Iterable, Iterator
from typing import Any

import hiredis
from redis.asyncio import Connection
from redis.exceptions import ConnectionError as RedisConnectionError
from redis.exceptions import ResponseError
from redis.exceptions import TimeoutError as RedisTimeoutError

from server.store.base import StoreRefused, StoreUnavailable

__all__ = ["PackingConnection", "reachable"]

# What Redis answers when a new connection's setup (the URL's database) is refused: redis-py
# raises it as a plain error reply of whatever call opened the connection.
_SETUP_REFUSALS = ("DB index is out of range", "invalid DB index", "SELECT is not allowed")


@contextlib.contextmanager
def reachable() -> Iterator[None]:
    """Turn the client's connection failures (after its retries) into StoreUnavailable, and
    a connection Redis refuses to set up (a database it does not have) into StoreRefused.

    Also gives back a cancel redis-py lost. It sends every command in asyncio.wait_for, which
    on Python 3.11 returns the result and drops a cancel that comes as the write completes
    (the request stays counted in Task.cancelling()). A task cancelled that way went on as
    if nothing had been asked: the hub's follower blocked in XREAD again, a table loop went
    on to own and play its table, and the node's stop, which waits for them, never ended."""
    try:
        yield
    except (RedisConnectionError, RedisTimeoutError) as exc:
        raise StoreUnavailable(f"redis is unreachable: {exc}") from exc
    except ResponseError as exc:
        if str(exc).startswith(_SETUP_REFUSALS):
            raise StoreRefused(f"redis refuses the database of --redis: {exc}") from exc
        raise
    task = asyncio.current_task()
    if task is not None and task.cancelling():
        raise asyncio.CancelledError


class PackingConnection(Connection):
    """redis-py's connection, packing commands with hiredis's C packer: redis-py's asyncio
    client packs each argument in Python, ~20% of the node's CPU per bet in a pipeline."""

    def pack_command(self, *args: Any) -> list[bytes]:
        first = args[0]
        if (isinstance(first, str) and " " in first) or (
            isinstance(first, bytes) and b" " in first
        ):
            return super().pack_command(*args)  # "CLIENT SETINFO": redis-py splits it
        try:
            return [hiredis.pack_command(args)]
        except TypeError:  # a type hiredis does not pack: redis-py's encoder says why
            return super().pack_command(*args)

    def pack_commands(self, commands: Iterable[Iterable[Any]]) -> list[bytes]:
        return [b"".join(chunk for args in commands for chunk in self.pack_command(*args))]
