"""A WebSocket proxy on loopback that can change what the server says, or cut connections.

Bots connect to the proxy as if it were the server; it opens one upstream connection per
client (same path, query and subprotocol) and relays both ways. Server-to-client messages go
through `change`, which may return another message, or None to cut the client's connection
abruptly (as a network failure would).
"""

from __future__ import annotations

import asyncio
import contextlib
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

from websockets.asyncio.client import connect
from websockets.asyncio.server import Server, ServerConnection, serve
from websockets.exceptions import ConnectionClosed
from websockets.typing import Subprotocol

from server.wire.codec import Encoding, decode, encode

Message = dict[str, Any]


@dataclass
class Link:
    """One client connection through the proxy."""

    number: int
    messages: int = 0
    state: dict[str, Any] = field(default_factory=dict)


Change = Callable[[Link, Message], Message | None]


class Proxy:
    def __init__(self, upstream: str, change: Change) -> None:
        self.upstream = upstream.rstrip("/")
        self.change = change
        self.server: Server | None = None
        self.links = 0
        self.from_clients: list[Message] = []  # every client message, decoded

    @property
    def url(self) -> str:
        assert self.server is not None
        port = next(iter(self.server.sockets)).getsockname()[1]
        return f"ws://127.0.0.1:{port}/ws"

    async def __aenter__(self) -> Proxy:
        offered = [Subprotocol(e.value) for e in Encoding]
        self.server = await serve(self._relay, "127.0.0.1", 0, subprotocols=offered)
        return self

    async def __aexit__(self, *exc: object) -> None:
        assert self.server is not None
        self.server.close()
        await self.server.wait_closed()

    async def _relay(self, client: ServerConnection) -> None:
        self.links += 1
        link = Link(self.links)
        encoding = Encoding(client.subprotocol) if client.subprotocol else Encoding.MSGPACK
        path = client.request.path if client.request else "/ws"
        target = self.upstream.rsplit("/ws", 1)[0] + path
        async with connect(target, subprotocols=[Subprotocol(encoding.value)]) as server:

            async def up() -> None:
                with contextlib.suppress(ConnectionClosed):
                    async for frame in client:
                        message = decode(frame)
                        assert isinstance(message, dict)
                        self.from_clients.append(message)
                        await server.send(frame)

            async def down() -> None:
                with contextlib.suppress(ConnectionClosed):
                    async for frame in server:
                        message = decode(frame)
                        assert isinstance(message, dict)
                        link.messages += 1
                        changed = self.change(link, message)
                        if changed is None:
                            client.transport.abort()  # no closing handshake: a dropped link
                            return
                        await client.send(encode(changed, encoding))

            tasks = [asyncio.create_task(up()), asyncio.create_task(down())]
            await asyncio.wait(tasks, return_when=asyncio.FIRST_COMPLETED)
            for task in tasks:
                task.cancel()
            await asyncio.gather(*tasks, return_exceptions=True)
