"""A spectator's snapshot of a table, read once and shared by every spectator joining meanwhile.

A spectator (no player) is sent the same snapshot as every other spectator at the same seq: no
bets of its own, no balance. A burst of joins (thousands of spectators at once) therefore
needs a few store reads, not one each; on Redis each read is a script whose reply carries the
whole shoe, and thousands of them in a burst made joins cost 1.5x the memory engine's. The
table's feed (server/transport/feed.py, TableFeed.spectator_snapshot) decides which joins it
serves; this holds it and builds its message once.

Only two fields differ between joins: `time_left_ms` (from the store's clock, estimated from
the clock read with the snapshot plus the time elapsed on this node since) and `recovered`.
"""

from __future__ import annotations

import asyncio
from dataclasses import dataclass, field

from server.store.base import Snapshot
from server.wire import shapes

__all__ = ["SharedSnapshot"]


@dataclass(slots=True)
class SharedSnapshot:
    table: str
    snapshot: Snapshot  # read with player None: nobody's bets
    now_ms: int  # the store's clock, read right after the snapshot
    taken: float  # the event loop's clock at that moment
    generation: int  # the feed's generation it was read in (a rebase makes it stale)
    vouched: bool  # read at or ahead of the feed in its history: a place the feed can serve
    _base: shapes.Snapshot | None = field(default=None, repr=False)

    @property
    def seq(self) -> int:
        return self.snapshot.seq

    @property
    def epoch(self) -> str:
        return self.snapshot.epoch

    def age(self) -> float:
        """Seconds since it was read."""
        return asyncio.get_running_loop().time() - self.taken

    def message(self, recovered: bool | None = None) -> shapes.Snapshot:
        """The snapshot message for one spectator joining now. Every call returns a new
        top-level dict; the nested values are shared and only ever read (encoded)."""
        if self._base is None:
            snap = self.snapshot
            self._base = shapes.snapshot(
                self.table,
                snap.seq,
                snap.epoch,
                snap.state,
                self.now_ms,
                snap.rules,
                (),
                snap.totals,
                snap.bettors,
                None,
            )
        message = self._base.copy()
        now_ms = self.now_ms + int(self.age() * 1000)  # the store's clock now, as best known
        message["time_left_ms"] = shapes.time_left_ms(self.snapshot.state, now_ms)
        if recovered is not None:
            message["recovered"] = recovered
        return message
