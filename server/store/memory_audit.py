"""The memory engine's audit log: the twin of the Redis engine's per-player streams.

A player's log is a deque of entries with stream IDs made as Redis makes them for `XADD *`
(the clock's ms, or the last entry's if the clock went back, then a counter). Appending trims
the log as the Redis script does: at most `max_entries`, none older than `keep_ms`. A log that
got no entry for `keep_ms` holds only entries too old to read, and is dropped (Redis lets
such a stream expire): the logs are kept in order of their last entry, so each append drops
the stale ones from the front, in time proportional to what it drops.
"""

from __future__ import annotations

from collections import OrderedDict, deque
from collections.abc import Callable
from dataclasses import dataclass, field

from server.store.audit import AUDIT_PAGE, AuditEntry, first_seq

__all__ = ["MemoryAudit"]


@dataclass(slots=True)
class _Log:
    entries: deque[AuditEntry]
    last: tuple[int, int] = (0, -1)  # the last ID given, as Redis keeps a stream's
    written_ms: int = 0  # the clock when the last entry was appended
    ids: deque[tuple[int, int]] = field(default_factory=deque)  # each entry's, for trimming


class MemoryAudit:
    def __init__(self, now_ms: Callable[[], int], keep_ms: int, max_entries: int) -> None:
        self._now_ms = now_ms
        self.keep_ms = max(keep_ms, 1)
        self.max_entries = max(max_entries, 1)
        self._logs: OrderedDict[str, _Log] = OrderedDict()  # by last append, oldest first

    def append(
        self,
        kind: str,
        player: str,
        amount: int,
        balance: int,
        table: str | None = None,
        round_no: int | None = None,
        ref: str | None = None,
    ) -> None:
        """Append one entry; the caller moved the money in the same synchronous section."""
        now = self._now_ms()
        floor = (now - self.keep_ms, 0)
        while self._logs:  # logs idle for keep_ms hold nothing readable: Redis expires them
            name, oldest = next(iter(self._logs.items()))
            if oldest.written_ms >= now - self.keep_ms:
                break
            del self._logs[name]
        log = self._logs.pop(player, None)
        if log is None:
            log = _Log(deque())
        self._logs[player] = log  # the newest now
        ms = max(now, log.last[0])
        log.last = (ms, log.last[1] + 1 if ms == log.last[0] else 0)
        log.written_ms = now
        bet_id = ref if kind == "bet" else None
        key = ref if kind in ("operator_credit", "operator_debit") else None
        seq = f"{log.last[0]}-{log.last[1]}"
        log.entries.append(
            AuditEntry(seq, now, kind, player, table, round_no, bet_id, key, amount, balance)
        )
        log.ids.append(log.last)
        while len(log.entries) > self.max_entries or log.ids[0] < floor:
            log.entries.popleft()
            log.ids.popleft()

    def read(
        self,
        player: str,
        since_ms: int | None = None,
        limit: int = AUDIT_PAGE,
        after: str | None = None,
    ) -> list[AuditEntry]:
        log = self._logs.get(player)
        if log is None or limit <= 0:
            return []
        start = first_seq(self._now_ms(), self.keep_ms, since_ms, after)
        found = []
        for entry, seq in zip(log.entries, log.ids, strict=True):
            if seq >= start:
                found.append(entry)
                if len(found) == limit:
                    break
        return found
