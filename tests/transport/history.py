"""Make a memory store's history go backwards, as a Redis that lost its last writes does."""

from __future__ import annotations

from collections import deque

from server.store.memory import MemoryStore

__all__ = ["rewind"]


def rewind(store: MemoryStore, table_id: str, to_seq: int) -> None:
    """Hold the table's events only up to `to_seq`, under the same epoch: what a Redis
    restarted from an older dump, or a lagging replica after a failover, looks like. The
    state is left as it is; the next commit writes seqs that were delivered before."""
    table = store._tables[table_id]
    table.seq = to_seq
    table.events = deque(e for e in table.events if e["seq"] <= to_seq)
    for record in table.rounds.values():
        record.events = [e for e in record.events if e["seq"] <= to_seq]
