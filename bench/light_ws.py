"""A minimal WebSocket client for the load generator: the handshake, whole frames in, masked
frames out, pings answered, and nothing else.

The generator must be lighter than the servers it measures, or a run measures the generator.
The `websockets` client costs the generator ~20 µs per message (its sans-I/O parser, the
message assembler, a task woken per message); at 5,000 and 10,000 spectators it ran at 70-100%
of its core while the servers had room. This client parses frames in one `data_received` call
and hands each message to a callback: a few µs per message. It is the same client for every
server measured (ours, bare websockets, python-socketio), so the comparison stays fair.

It is not a general client: no fragmented messages (none of the servers fragments these small
frames), no compression, no close handshake (the generator aborts its connections), and the
server's `Sec-WebSocket-Accept` is not checked. Outgoing frames use a zero mask (allowed: the
mask only has to be present).
"""

from __future__ import annotations

import asyncio
import base64
import os
from collections.abc import Callable
from urllib.parse import urlsplit

__all__ = ["LightClient", "MessageHandler", "light_connect"]

OP_TEXT, OP_BINARY, OP_CLOSE, OP_PING, OP_PONG = 0x1, 0x2, 0x8, 0x9, 0xA
ZERO_MASK = b"\x00\x00\x00\x00"

MessageHandler = Callable[[bytes | str], None]


def _frame(opcode: int, payload: bytes) -> bytes:
    n = len(payload)
    if n < 126:
        header = bytes((0x80 | opcode, 0x80 | n))
    elif n < 1 << 16:
        header = bytes((0x80 | opcode, 0x80 | 126)) + n.to_bytes(2, "big")
    else:
        header = bytes((0x80 | opcode, 0x80 | 127)) + n.to_bytes(8, "big")
    return header + ZERO_MASK + payload  # XOR with a zero mask leaves the payload as it is


class LightClient(asyncio.Protocol):
    """One connection. Until `on_message` is set, messages wait in `inbox` (for the join
    exchange, read with `recv()`); after, each goes straight to the callback."""

    def __init__(self, request: bytes) -> None:
        self._request = request
        self.transport: asyncio.Transport | None = None
        self._buffer = bytearray()
        self._upgraded = False
        self.opened: asyncio.Future[None] = asyncio.get_running_loop().create_future()
        self.inbox: asyncio.Queue[bytes | str | None] = asyncio.Queue()
        self.on_message: MessageHandler | None = None
        self.closed = False

    # --- asyncio.Protocol ----------------------------------------------------------------
    def connection_made(self, transport: asyncio.BaseTransport) -> None:
        assert isinstance(transport, asyncio.Transport)
        self.transport = transport
        transport.write(self._request)

    def data_received(self, data: bytes) -> None:
        self._buffer += data
        if not self._upgraded:
            end = self._buffer.find(b"\r\n\r\n")
            if end < 0:
                return
            status = bytes(self._buffer[: self._buffer.find(b"\r\n")])
            del self._buffer[: end + 4]
            if b" 101 " not in status + b" ":
                self._fail(ConnectionError(f"handshake refused: {status.decode(errors='replace')}"))
                return
            self._upgraded = True
            self.opened.set_result(None)
        self._parse()

    def connection_lost(self, exc: Exception | None) -> None:
        self.closed = True
        self._fail(exc or ConnectionError("connection closed"))

    # --- frames ----------------------------------------------------------------------------
    def _parse(self) -> None:
        buf = self._buffer
        size = len(buf)
        pos = 0
        while size - pos >= 2:
            opcode = buf[pos] & 0x0F
            length = buf[pos + 1] & 0x7F
            start = pos + 2
            if length == 126:
                if size - pos < 4:
                    break
                length = int.from_bytes(buf[pos + 2 : pos + 4], "big")
                start = pos + 4
            elif length == 127:
                if size - pos < 10:
                    break
                length = int.from_bytes(buf[pos + 2 : pos + 10], "big")
                start = pos + 10
            end = start + length
            if end > size:
                break
            payload = bytes(buf[start:end])
            pos = end
            if opcode == OP_BINARY:
                self._deliver(payload)
            elif opcode == OP_TEXT:
                self._deliver(payload.decode())
            elif opcode == OP_PING:
                self._write(OP_PONG, payload)
            elif opcode == OP_CLOSE:
                self.abort()
                break
        del buf[:pos]

    def _deliver(self, message: bytes | str) -> None:
        if self.on_message is not None:
            self.on_message(message)
        else:
            self.inbox.put_nowait(message)

    def _fail(self, error: BaseException) -> None:
        if not self.opened.done():
            self.opened.set_exception(error)
        self.inbox.put_nowait(None)

    def _write(self, opcode: int, payload: bytes) -> None:
        if self.transport is not None and not self.transport.is_closing():
            self.transport.write(_frame(opcode, payload))

    # --- what the generator calls ------------------------------------------------------------
    def send(self, message: bytes | str) -> None:
        if isinstance(message, str):
            self._write(OP_TEXT, message.encode())
        else:
            self._write(OP_BINARY, message)

    async def recv(self) -> bytes | str:
        message = await self.inbox.get()
        if message is None:
            self.inbox.put_nowait(None)  # every later recv() hears it too
            raise ConnectionError("connection closed")
        return message

    def abort(self) -> None:
        self.closed = True
        if self.transport is not None:
            self.transport.abort()


async def light_connect(url: str, subprotocol: str | None = None) -> LightClient:
    """Open a WebSocket connection to a ws:// URL and complete its handshake."""
    parts = urlsplit(url)
    host, port = parts.hostname or "127.0.0.1", parts.port or 80
    target = parts.path or "/"
    if parts.query:
        target += "?" + parts.query
    key = base64.b64encode(os.urandom(16)).decode()
    lines = [
        f"GET {target} HTTP/1.1",
        f"Host: {host}:{port}",
        "Upgrade: websocket",
        "Connection: Upgrade",
        f"Sec-WebSocket-Key: {key}",
        "Sec-WebSocket-Version: 13",
    ]
    if subprotocol:
        lines.append(f"Sec-WebSocket-Protocol: {subprotocol}")
    request = ("\r\n".join(lines) + "\r\n\r\n").encode()
    loop = asyncio.get_running_loop()
    _, client = await loop.create_connection(lambda: LightClient(request), host, port)
    try:
        await client.opened
    except BaseException:
        client.abort()
        raise
    return client
