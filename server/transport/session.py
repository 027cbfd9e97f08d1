"""One WebSocket connection: the thin adapter between websockets and the protocol handler.

It reads frames, decodes them and hands each message to the connection's `PlayerSession`
(server/transport/protocol.py), and it is that handler's output port: every message is
encoded here and framed at once through `push_frame` (the socket write waits for the end of
the loop's turn, server/transport/turn_writes.py), so direct answers and table events keep one
order. It also owns what only a socket has: the send-buffer limit (a client too far behind is
cut) and the close codes.

Frames are handled one at a time, and the adapter yields to the event loop after each, so a
client flooding frames gets its turn like every other connection and cannot starve them; its
requests are also rate-limited per kind (see limits.py).
"""

from __future__ import annotations

import asyncio
from typing import Any

import structlog
from websockets.asyncio.server import ServerConnection
from websockets.exceptions import ConnectionClosed

from server.auth import Admission
from server.store.base import StoreUnavailable
from server.transport.context import SessionContext
from server.transport.port import FLOOD_CLOSE_CODE, STORE_CLOSE_CODE
from server.transport.protocol import PlayerSession
from server.wire import shapes
from server.wire.codec import (
    MAX_JSON_DEPTH,
    Encoding,
    Frame,
    Undecodable,
    Unencodable,
    decode,
    encode,
)
from server.wire.messages import ErrorCode

__all__ = [
    "FLOOD_CLOSE_CODE",
    "UNDECODABLE_CLOSE_CODE",
    "Session",
    "SessionContext",
    "close_all",
]

UNDECODABLE_CLOSE_CODE = 1003  # a frame that is not a message of the connection's encoding


class Session:
    """The WebSocket port of one PlayerSession."""

    # One per connection: slots keep it small. `__dict__` stays for tests that wrap a method
    # on one session; it is only made when something is set on it.
    __slots__ = ("__dict__", "_dropped", "ctx", "encoding", "handler", "ws")

    def __init__(
        self, ws: ServerConnection, ctx: SessionContext, admission: Admission | None = None
    ) -> None:
        self.ws = ws
        self.ctx = ctx
        self.encoding = Encoding(ws.subprotocol) if ws.subprotocol else Encoding.MSGPACK
        self._dropped = False
        self.handler = PlayerSession(self, ctx, admission or ctx.auth.new_guest())

    @property
    def log(self) -> Any:
        return self.handler.log

    # --- who it is (for the node's status, metrics and tests) ---------------------------
    @property
    def player(self) -> str | None:
        """The player the connection names (a token-holding spectator included)."""
        return self.handler.identity.player

    @property
    def role(self) -> str:
        return self.handler.role

    @property
    def number(self) -> int:
        return self.handler.number

    # --- the Port ---------------------------------------------------------------------------
    @property
    def connection(self) -> object:
        return self.ws

    @property
    def dropped(self) -> bool:
        return self._dropped

    def push_frame(self, frame: Frame) -> None:
        self.ctx.turn_writes.write(self.ws, frame)

    def send(self, message: shapes.ServerMessage) -> None:
        self.push(message)

    def push(self, message: shapes.ServerMessage) -> None:
        if self._dropped:
            return
        if self.over_buffer_limit():  # asks (pings, replays) but never reads: drop it too
            self.ctx.hub.unsubscribe_everywhere(self.handler)
            self.drop_slow()
            return
        try:
            self.push_frame(encode(message, self.encoding))
            self.ctx.metrics.message_out(message["type"])
        except Unencodable as error:  # a bug (client strings are checked at parsing)
            self.log.error("unsendable_message", type=message.get("type"), error=str(error))
            if message.get("type") != "error":
                answer = "the server could not encode its answer"
                self.send(shapes.error(ErrorCode.INTERNAL, answer))

    def over_buffer_limit(self) -> bool:
        transport = self.ws.transport
        return (
            transport is not None and transport.get_write_buffer_size() > self.ctx.max_buffer_bytes
        )

    def drop_slow(self) -> None:
        if self._dropped:
            return
        self._dropped = True  # stop serving frames it already sent: nobody will read answers
        self.ctx.metrics.slow_client_dropped()
        self.log.warning("slow_client_dropped")
        # Not ws.close(): its closing handshake first waits for the send buffer to drain,
        # which a stalled client never lets happen. Cut the connection; unsent data is dropped.
        self.ws.transport.abort()

    async def close(self, code: int, reason: str) -> None:
        await self.ws.close(code, reason)

    # --- the connection's life ----------------------------------------------------------
    async def serve(self) -> None:
        # One task per connection: every log line it causes names the connection.
        structlog.contextvars.bind_contextvars(conn=self.number, player=self.player)
        self.ctx.sessions.add(self)
        try:
            await self.handler.start()
            async for frame in self.ws:
                if self._dropped or not await self._handle_frame(frame):
                    break
                # A queued frame is returned without a pause: yield, so a connection flooding
                # frames takes turns with the others instead of holding the loop. Without one
                # queued, reading the next frame waits (and yields) anyway.
                if _frames_queued(self.ws):
                    await asyncio.sleep(0)
        except ConnectionClosed:
            pass
        except StoreUnavailable:
            self.ctx.metrics.store_error("session")
            await self.ws.close(STORE_CLOSE_CODE, "store unavailable; reconnect later")
        finally:
            try:
                await self.handler.stop()
            finally:
                self.ctx.sessions.discard(self)

    async def _handle_frame(self, frame: Frame) -> bool:
        try:
            message = decode(frame, MAX_JSON_DEPTH)
        except Undecodable as error:
            await self.ws.close(UNDECODABLE_CLOSE_CODE, str(error)[:120])
            return False
        return await self.handler.handle(message)


def _frames_queued(ws: ServerConnection) -> bool:
    """Whether frames already received wait to be read (websockets' receive queue); True
    when it cannot tell, so a connection then always yields."""
    frames = getattr(getattr(ws, "recv_messages", None), "frames", None)
    try:
        return len(frames) > 0  # type: ignore[arg-type]
    except TypeError:
        return True


async def close_all(ctx: SessionContext, code: int, reason: str) -> None:
    await asyncio.gather(*(s.ws.close(code, reason) for s in ctx.sessions), return_exceptions=True)
