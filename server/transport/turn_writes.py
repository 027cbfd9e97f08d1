"""A connection's direct answers written to its socket once, at the end of the loop's turn.

An answer (a bet's `bet_accepted`, a pong, a snapshot) is framed into the connection's
WebSocket buffer at once, so it keeps its place among the table's events (the feed's
`broadcast` appends to the same buffer and writes it out), but the socket write itself waits
for the end of the event loop's turn: every connection answered in one turn is written in
one burst (`TurnWrites.flush`, scheduled once a turn).

Why: on loopback and in VMs most of a write's kernel cost is waking the reader. Answers
written one by one, each between two handlers, wake the client for each; written in a burst,
the first wakes it and the others find it awake. Measured on `make bench`'s bets site, three
alternated pairs: the node's CPU per bet 44.3 / 44.0 / 41.4 -> 39.0 / 40.3 / 40.9 us, the load
generator's CPU about -30 % (docs/benchmarks.md, "The bet path"). An answer waits at most
for the rest of its turn's callbacks.
"""

from __future__ import annotations

import asyncio

from websockets.asyncio.server import ServerConnection, broadcast
from websockets.protocol import State

from server.wire.codec import Frame

__all__ = ["TurnWrites"]


class TurnWrites:
    """The connections with answers framed but not yet written, flushed once a turn."""

    __slots__ = ("_waiting",)

    def __init__(self) -> None:
        # Insertion-ordered: connections are written in the order they were answered.
        self._waiting: dict[ServerConnection, None] = {}

    def write(self, ws: ServerConnection, frame: Frame) -> None:
        """Frame `frame` on `ws` now; write it to the socket at the end of this turn."""
        if ws.protocol.state is not State.OPEN or ws.send_in_progress is not None:
            broadcast([ws], frame)  # closing, or a fragmented send: broadcast's own rules
            return
        if isinstance(frame, str):
            ws.protocol.send_text(frame.encode())
        else:
            ws.protocol.send_binary(frame)
        if not self._waiting:
            asyncio.get_running_loop().call_soon(self.flush)
        self._waiting[ws] = None

    def flush(self) -> None:
        """Write every waiting connection's framed data (what the feed has not written yet)."""
        waiting, self._waiting = self._waiting, {}
        for ws in waiting:
            try:
                ws.send_data()
            except Exception:  # the connection is gone: its session stops as usual
                continue

    @property
    def waiting(self) -> int:
        """Connections with data framed and not yet written (for tests)."""
        return len(self._waiting)
