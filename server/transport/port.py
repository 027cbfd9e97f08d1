"""A connection's output as the protocol sees it: the sans-I/O seam of the transport.

The protocol (server/transport/protocol.py and the units it delegates to) never touches a
socket: it writes messages to a `Port`, and a table's feed writes encoded frames to the same
port (its `Sink` part). server/transport/session.py is the WebSocket port; a test can hand a
PlayerSession a port that records what it is sent (tests/transport/test_session_unit.py).
"""

from __future__ import annotations

from typing import Protocol

from server.wire import shapes
from server.wire.codec import Encoding, Frame

__all__ = ["FLOOD_CLOSE_CODE", "STORE_CLOSE_CODE", "Port", "Sink"]

FLOOD_CLOSE_CODE = 1008  # policy violation: keeps sending what is refused
STORE_CLOSE_CODE = 1011  # the store cannot be read: reconnect later


class Sink(Protocol):
    """What a table's feed needs of a connection: frames encoded once for many."""

    @property
    def encoding(self) -> Encoding: ...

    @property
    def connection(self) -> object:
        """The key a feed files it under (the WebSocket, for websockets' `broadcast`)."""

    def push_frame(self, frame: Frame) -> None: ...

    def over_buffer_limit(self) -> bool: ...

    def drop_slow(self) -> None: ...


class Port(Sink, Protocol):
    """Where a PlayerSession's output goes: the transport of its connection."""

    @property
    def dropped(self) -> bool: ...

    def send(self, message: shapes.ServerMessage) -> None:
        """Encode and write one message now (dropping a client too far behind)."""

    async def close(self, code: int, reason: str) -> None: ...
