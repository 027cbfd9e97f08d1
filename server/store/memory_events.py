"""The memory engine's event stream as read back: the head, catch-up after a seq, a round's
events, and following the stream as it grows (a part of MemoryStore, which appends)."""

from __future__ import annotations

from collections.abc import AsyncIterator

from server.store.base import Event, new_epoch
from server.store.memory_records import TableRecord

__all__ = ["MemoryEvents"]


class MemoryEvents:
    """Reads of the tables' event streams; MemoryStore gives `_table`."""

    def _table(self, table_id: str) -> TableRecord:
        raise NotImplementedError

    async def last_seq(self, table_id: str) -> int:
        return self._table(table_id).seq

    async def epoch(self, table_id: str) -> str:
        return self._table(table_id).epoch

    async def head(self, table_id: str) -> tuple[int, str]:
        table = self._table(table_id)
        return table.seq, table.epoch

    async def reset_epoch(self, table_id: str, seen: str) -> str:
        table = self._table(table_id)
        if table.epoch == seen:
            table.epoch = new_epoch()
        return table.epoch

    async def events_after(self, table_id: str, seq: int, limit: int = 1000) -> list[Event] | None:
        table = self._table(table_id)
        if seq >= table.seq:
            return []
        first = table.events[0]["seq"] if table.events else table.seq + 1
        if seq < first - 1:
            return None
        start = seq - first + 1
        return [table.events[i] for i in range(start, min(start + limit, len(table.events)))]

    async def round_events(self, table_id: str, round_no: int) -> list[Event] | None:
        record = self._table(table_id).rounds.get(round_no)
        return list(record.events) if record is not None and record.events else None

    async def follow(self, table_id: str, after_seq: int) -> AsyncIterator[Event]:
        table = self._table(table_id)
        while True:
            wakeup = table.wakeup
            events = await self.events_after(table_id, after_seq, limit=10_000)
            if events is None:
                raise LookupError(f"events after {after_seq} are no longer held")
            for ev in events:
                yield ev
                after_seq = ev["seq"]
            if not events:
                await wakeup.wait()
