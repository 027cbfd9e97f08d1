"""Make a memory store's history go backwards, as a Redis that lost its last writes does, and
check that a client resyncs to the new history."""

from __future__ import annotations

from collections import deque

from server.store.memory import MemoryStore
from tests.transport.conftest import TABLE, Client, Message, within

__all__ = ["resynced", "rewind"]


async def resynced(store: MemoryStore, client: Client, old_epoch: str) -> tuple[Message, Message]:
    """After the history went back: the client's fresh snapshot (not `recovered`, in the
    store's new epoch) and the `joined` after it, in that epoch. The client's events are
    cleared at the snapshot, so they hold what came after it."""
    fresh = await client.expect(lambda m: m["type"] == "snapshot", within(3))
    assert fresh["recovered"] is False and fresh["epoch"] != old_epoch
    assert fresh["epoch"] == await store.epoch(TABLE)
    client.events.clear()
    rejoined = await client.reply("joined")
    assert rejoined["epoch"] == fresh["epoch"]
    return fresh, rejoined


def rewind(store: MemoryStore, table_id: str, to_seq: int) -> None:
    """Hold the table's events only up to `to_seq`, under the same epoch: what a Redis
    restarted from an older dump, or a lagging replica after a failover, looks like. The
    state is left as it is; the next commit writes seqs that were delivered before."""
    table = store._tables[table_id]
    table.seq = to_seq
    table.events = deque(e for e in table.events if e["seq"] <= to_seq)
    for record in table.rounds.values():
        record.events = [e for e in record.events if e["seq"] <= to_seq]
