"""The generator's light WebSocket client (bench/light_ws.py) against a real websockets server:
every frame size it may meet, text and binary, pings answered, the subprotocol asked for."""

from __future__ import annotations

import asyncio

import pytest
from websockets.asyncio.server import ServerConnection, serve
from websockets.typing import Subprotocol

from bench.light_ws import LightClient, light_connect

WAIT_S = 5.0
SIZES = (0, 1, 125, 126, 65_535, 65_536, 200_000)  # every length encoding, both sides of each


async def test_messages_of_every_size_in_order_and_pings_answered() -> None:
    answered = asyncio.Event()
    echoed: list[bytes | str] = []

    async def handler(ws: ServerConnection) -> None:
        assert ws.subprotocol == "baccarat.v1.msgpack"
        for size in SIZES:
            await ws.send(bytes([size % 251]) * size)
        await ws.send("text é")
        pong = await ws.ping(b"are you there")
        await asyncio.wait_for(pong, WAIT_S)  # the light client answered the ping
        answered.set()
        echoed.extend([await ws.recv(), await ws.recv()])  # its masked frames, read back
        await ws.send("done")
        await ws.wait_closed()

    async with serve(
        handler, "127.0.0.1", 0, subprotocols=[Subprotocol("baccarat.v1.msgpack")], max_size=None
    ) as server:
        port = server.sockets[0].getsockname()[1]
        client = await light_connect(f"ws://127.0.0.1:{port}/ws", "baccarat.v1.msgpack")
        try:
            got = [await asyncio.wait_for(client.recv(), WAIT_S) for _ in range(len(SIZES) + 1)]
            assert got == [bytes([n % 251]) * n for n in SIZES] + ["text é"]
            await asyncio.wait_for(answered.wait(), WAIT_S)
            client.send(b"\x00\xff" * 100)
            client.send("x" * 70_000)
            assert await asyncio.wait_for(client.recv(), WAIT_S) == "done"
            assert echoed == [b"\x00\xff" * 100, "x" * 70_000]
        finally:
            client.abort()


async def test_callback_takes_over_and_a_refused_handshake_raises() -> None:
    async def handler(ws: ServerConnection) -> None:
        await ws.recv()
        for i in range(3):
            await ws.send(bytes([i]))
        await ws.wait_closed()

    async with serve(handler, "127.0.0.1", 0, subprotocols=[Subprotocol("only-this")]) as server:
        port = server.sockets[0].getsockname()[1]
        client: LightClient = await light_connect(f"ws://127.0.0.1:{port}/", "only-this")
        seen: list[bytes | str] = []
        three = asyncio.Event()

        def on_message(message: bytes | str) -> None:
            seen.append(message)
            if len(seen) == 3:
                three.set()

        client.on_message = on_message
        client.send(b"go")
        await asyncio.wait_for(three.wait(), WAIT_S)
        assert seen == [b"\x00", b"\x01", b"\x02"]
        client.abort()

    async def never(ws: ServerConnection) -> None:  # pragma: no cover - refused before
        await ws.wait_closed()

    async with serve(
        never, "127.0.0.1", 0, process_request=lambda ws, request: ws.respond(403, "no")
    ) as server:
        port = server.sockets[0].getsockname()[1]
        with pytest.raises(ConnectionError, match="403"):
            await light_connect(f"ws://127.0.0.1:{port}/")
