"""The Redis engine's event stream: a table's head (last seq and epoch), reading events after
a seq or of one round, and following the stream as the owner appends to it.

Each table's events are one stream (`{t:<table>}:stream`) whose entry ids are the events' seqs
(`<seq>-0`), so "after seq N" is an XRANGE from N+1 and a gap shows the stream was trimmed.
The commit script appends them; a round's events are also kept in a list per round.
"""

from __future__ import annotations

import functools
from collections.abc import AsyncIterator
from typing import Any

from redis.asyncio import Connection, ConnectionPool

from server.store.base import Event, new_epoch
from server.store.codec import unpackb
from server.store.redis_base import RedisBase
from server.store.redis_client import reachable
from server.store.redis_replies import (
    as_bytes,
    entry_event,
    entry_seq,
    raw_entry_event,
    stream_entries,
    unknown_table,
)

__all__ = ["FOLLOW_BLOCK_MS", "RedisEvents"]

FOLLOW_BLOCK_MS = 1000  # one XREAD BLOCK; follow loops, so this only bounds a read's wait


class RedisEvents(RedisBase):
    async def last_seq(self, table_id: str) -> int:
        with reachable():
            raw = await self._redis.hget(self._table_keys(table_id).state, "seq")
        if raw is None:
            raise unknown_table(table_id)
        return int(raw)

    async def epoch(self, table_id: str) -> str:
        return (await self.head(table_id))[1]

    async def head(self, table_id: str) -> tuple[int, str]:
        seq, epoch = await self._call("HMGET", self._table_keys(table_id).state, "seq", "epoch")
        if seq is None:
            raise unknown_table(table_id)
        return int(seq), as_bytes(epoch).decode() if epoch is not None else ""

    async def reset_epoch(self, table_id: str, seen: str) -> str:
        reply = await self._run(
            "reset_epoch", [self._table_keys(table_id).state], [seen, new_epoch()]
        )
        if reply is None:
            raise unknown_table(table_id)
        return as_bytes(reply).decode()

    async def events_after(self, table_id: str, seq: int, limit: int = 1000) -> list[Event] | None:
        if seq < 0:
            await self._require_table(table_id)
            return None
        stream = self._table_keys(table_id).stream
        with reachable():
            entries = await self._redis.xrange(stream, f"{seq + 1}-0", "+", count=max(limit, 1))
        if not entries:
            await self._require_table(table_id)
            return []
        if entry_seq(entries[0][0]) != seq + 1:
            return None  # trimmed: the stream no longer starts right after `seq`
        return [entry_event(fields) for _, fields in entries[: max(limit, 0)]]

    async def round_events(self, table_id: str, round_no: int) -> list[Event] | None:
        key = self._table_keys(table_id).per_round("round", round_no)
        with reachable():
            raw = await self._redis.lrange(key, 0, -1)
        if not raw:
            await self._require_table(table_id)
            return None
        return [unpackb(as_bytes(item)) for item in raw]

    async def follow(self, table_id: str, after_seq: int) -> AsyncIterator[Event]:
        await self._require_table(table_id)
        if after_seq < 0:
            raise LookupError(f"events after {after_seq} are no longer held")
        stream = self._table_keys(table_id).stream
        connection = self._follow_connection()  # a blocking read must not hold a shared one
        try:
            while True:
                with reachable():
                    reply = await connection.retry.call_with_retry(
                        functools.partial(_xread, connection, stream, after_seq),
                        lambda _error: connection.disconnect(),
                    )
                for entry_id, fields in stream_entries(reply):
                    if entry_seq(entry_id) != after_seq + 1:
                        raise LookupError(f"events after {after_seq} are no longer held")
                    yield raw_entry_event(fields)
                    after_seq += 1
        finally:
            await connection.disconnect()

    def _follow_connection(self) -> Connection:
        """One connection for one follower: XREAD BLOCK holds it for up to FOLLOW_BLOCK_MS.
        redis-py's own (the URL's scheme, password, database, retries), used bare, without
        its client's per-call work (a lock, a retry closure, reply callbacks that rebuild
        every entry as a dict): ~13 us of a ~95 us read, which the owner of a table pays
        once per event it commits."""
        options = self._options()
        options["socket_timeout"] = self._timeout_s + FOLLOW_BLOCK_MS / 1000
        pool = ConnectionPool.from_url(self._url, **options)
        connection: Connection = pool.make_connection()  # type: ignore[no-untyped-call]
        return connection


async def _xread(connection: Connection, stream: str, after_seq: int) -> Any:
    """One XREAD BLOCK of the stream after `after_seq`, its reply as Redis sent it."""
    await connection.send_command(
        "XREAD", "COUNT", 1000, "BLOCK", FOLLOW_BLOCK_MS, "STREAMS", stream, f"{after_seq}-0"
    )
    return await connection.read_response()
