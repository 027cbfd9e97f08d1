"""Flood a node from another process: `python -m tests.transport.flooder PORT CONNECTIONS MAX`.

Each connection sends up to MAX frames as fast as the socket takes them (pings, bets for a
round that is not open, replays of rounds not held, unknown types) while reading everything
the server answers, so it is never cut as a slow reader. It prints `flooding` once the node
has answered ANSWERED_FIRST of its frames, stops early when stdin closes, and then prints one
JSON line of totals.
"""

from __future__ import annotations

import asyncio
import contextlib
import itertools
import json
import sys
from typing import Any

from websockets.asyncio.client import ClientConnection, connect
from websockets.exceptions import ConnectionClosed

ANSWERED_FIRST = 1000
YIELD_EVERY = 64  # frames sent between two turns of this process's own loop (to see stdin)
FRAMES: list[dict[str, Any]] = [
    {"type": "ping", "ref": "f"},
    {"type": "bet", "table": "t1", "round": 0, "bet_id": "x", "spot": "player", "amount": 100},
    {"type": "replay", "table": "t1", "round": 10**6},
    {"type": "dance"},
]


async def _drain(ws: ClientConnection, counts: dict[str, int], started: asyncio.Event) -> None:
    with contextlib.suppress(ConnectionClosed):
        async for _ in ws:
            counts["received"] += 1
            if counts["received"] >= ANSWERED_FIRST:
                started.set()


async def _flood(
    ws: ClientConnection, limit: int, stop: asyncio.Event, counts: dict[str, int]
) -> None:
    frames = [json.dumps(frame) for frame in FRAMES]
    with contextlib.suppress(ConnectionClosed):
        for number, frame in enumerate(itertools.islice(itertools.cycle(frames), limit)):
            if stop.is_set():
                break
            await ws.send(frame)
            counts["sent"] += 1
            if number % YIELD_EVERY == 0:
                await asyncio.sleep(0)


async def main(port: int, connections: int, limit: int) -> None:
    counts = {"sent": 0, "received": 0}
    stop = asyncio.Event()
    loop = asyncio.get_running_loop()
    stdin_closed = loop.run_in_executor(None, sys.stdin.read)
    stdin_closed.add_done_callback(lambda _: stop.set())
    uri = f"ws://127.0.0.1:{port}/ws"
    sockets = [
        await connect(uri, subprotocols=["baccarat.v1.json"], max_size=None)  # type: ignore[list-item]
        for _ in range(connections)
    ]
    started = asyncio.Event()
    readers = [asyncio.create_task(_drain(ws, counts, started)) for ws in sockets]
    floods = asyncio.gather(*(_flood(ws, limit, stop, counts) for ws in sockets))
    await started.wait()
    print("flooding", flush=True)
    await floods
    codes = []
    for ws in sockets:
        await ws.close()
        codes.append(ws.close_code)
    await asyncio.gather(*readers)
    print(json.dumps({**counts, "close_codes": codes}), flush=True)
    stdin_closed.cancel()


if __name__ == "__main__":
    asyncio.run(main(*(int(arg) for arg in sys.argv[1:4])))
