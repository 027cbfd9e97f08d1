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
from dataclasses import dataclass

from server.store.audit import AUDIT_PAGE, AuditEntry, first_seq

__all__ = ["MemoryAudit"]


# An entry as kept: its ID, then what AuditEntry holds but the player (the log's) and the
# seq string; read() builds AuditEntry values. Appending is on the bet path: a tuple is the
# cheapest record to make per bet.
_Kept = tuple[tuple[int, int], int, str, str | None, int | None, str | None, int, int]


@dataclass(slots=True)
class _Log:
    entries: deque[_Kept]
    last: tuple[int, int] = (0, -1)  # the last ID given, as Redis keeps a stream's
    written_ms: int = 0  # the clock when the last entry was appended


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
        now: int | None = None,
    ) -> None:
        """Append one entry; the caller moved the money in the same synchronous section
        (at `now` on the store's clock, if it read it already)."""
        if now is None:
            now = self._now_ms()
        logs = self._logs
        while logs:  # logs idle for keep_ms hold nothing readable: Redis expires them
            name, oldest = next(iter(logs.items()))
            if oldest.written_ms >= now - self.keep_ms:
                break
            del logs[name]
        log = logs.get(player)
        if log is None:
            log = logs[player] = _Log(deque())
        else:
            logs.move_to_end(player)  # the newest now
        last_ms, count = log.last
        ms = now if now > last_ms else last_ms
        log.last = ident = (ms, count + 1 if ms == last_ms else 0)
        log.written_ms = now
        entries = log.entries
        entries.append((ident, now, kind, table, round_no, ref, amount, balance))
        floor = (now - self.keep_ms, 0)
        while len(entries) > self.max_entries or entries[0][0] < floor:
            entries.popleft()

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
        for ident, ts, kind, table, round_no, ref, amount, balance in log.entries:
            if ident >= start:
                bet_id = ref if kind == "bet" else None
                key = ref if kind in ("operator_credit", "operator_debit") else None
                seq = f"{ident[0]}-{ident[1]}"
                found.append(
                    AuditEntry(seq, ts, kind, player, table, round_no, bet_id, key, amount, balance)
                )
                if len(found) == limit:
                    break
        return found
