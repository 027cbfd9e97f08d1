"""The Redis engine's event stream: a table's head (last seq and epoch), reading events after
a seq or of one round, and following the stream as the owner appends to it.

Each table's events are one stream (`{t:<table>}:stream`) whose entry ids are the events' seqs
(`<seq>-0`), so "after seq N" is an XRANGE from N+1 and a gap shows the stream was trimmed.
The commit script appends them; a round's events are also kept in a list per round.
"""

from __future__ import annotations

from collections.abc import AsyncIterator
from typing import Any

from redis.asyncio import Redis

from server.store.base import Event, new_epoch
from server.store.codec import unpackb
from server.store.redis_base import RedisBase
from server.store.redis_client import reachable
from server.store.redis_replies import as_bytes, entry_event, entry_seq, unknown_table

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
        client = self._follow_client()  # a blocking read must not hold a shared connection
        try:
            while True:
                with reachable():
                    reply: Any = await client.xread(
                        {stream: f"{after_seq}-0"}, count=1000, block=FOLLOW_BLOCK_MS
                    )
                for _stream, entries in reply or []:
                    for entry_id, fields in entries:
                        if entry_seq(entry_id) != after_seq + 1:
                            raise LookupError(f"events after {after_seq} are no longer held")
                        yield entry_event(fields)
                        after_seq += 1
        finally:
            await client.aclose()

    def _follow_client(self) -> Redis:
        """One connection for one follower: XREAD BLOCK holds it for up to FOLLOW_BLOCK_MS."""
        options = self._options()
        options["socket_timeout"] = self._timeout_s + FOLLOW_BLOCK_MS / 1000
        client: Redis = Redis.from_url(self._url, single_connection_client=True, **options)
        return client
