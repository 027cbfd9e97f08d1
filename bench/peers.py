"""The peers the fan-out benchmark compares against, dealing like our table loop.

* `bare`: a plain `websockets` server with the same options as ours (no compression, the same
  frame limit, queue and keepalive). Each event is encoded once and sent with
  `websockets.broadcast` to every joined connection: the library's own limit.
* `socketio`: python-socketio on aiohttp, msgpack serializer, WebSocket transport only; each
  event is one `emit` to the table's room.
* `ack`: the bets benchmark's peer (bench/bets.py, site `bare`): a plain `websockets` server
  with our options and subprotocols that answers `welcome`, a join with a betting-phase
  `snapshot`, and each bet frame with an acknowledgement of `bet_accepted`'s shape, in the
  connection's encoding (msgpack or JSON, as our node): the library's limit for a bet.

`bare` and `socketio` deal rounds with our table loop's cadence and event shapes
(round_opened, betting_closed after the window, a card every deal interval, round_result with
the last card, round_settled), cards from a real shuffled shoe resolved by the game core,
`ts` in ms since the epoch.

    python bench/peers.py bare|socketio|ack [--port 0] [--betting-window S] [--deal-interval S]
"""

from __future__ import annotations

import argparse
import asyncio
import contextlib
import json
import random
import sys
import time
from collections.abc import Awaitable, Callable
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

import msgpack
from websockets.asyncio.server import ServerConnection, broadcast, serve
from websockets.typing import Subprotocol

from server.core.coup import resolve_coup
from server.core.shoe import MAX_COUP_CARDS, Shoe

TABLE = "t1"
# The options of server/transport/server.py, so that only what a server does differs.
SERVER_OPTIONS: dict[str, Any] = {
    "compression": None,
    "max_size": 16 * 1024,
    "max_queue": 64,
    "close_timeout": 2,
    "ping_interval": 20,
    "ping_timeout": 20,
}
Event = dict[str, Any]


async def deal_forever(
    args: argparse.Namespace, publish: Callable[[Event], Awaitable[None]]
) -> None:
    """Our table loop's rounds, in its rhythm; `publish` gets every event."""
    seq = 0
    rng = random.Random()
    shoe = Shoe.shuffled(8, 7, rng)
    round_no = 0

    async def emit(kind: str, **fields: Any) -> None:
        nonlocal seq
        seq += 1
        event = {"type": "event", "table": TABLE, "seq": seq, "round": round_no}
        event |= {"ts": time.time_ns() // 1_000_000, "kind": kind, **fields}
        await publish(event)

    while True:
        round_no += 1
        if shoe.position + MAX_COUP_CARDS >= shoe.cut_index:
            shoe = Shoe.shuffled(8, 7, rng)
        now = time.time_ns() // 1_000_000
        await emit(
            "round_opened",
            closes_at=now + int(args.betting_window * 1000),
            shoe=1,
            last_hand=False,
            rules="classic8",
        )
        await asyncio.sleep(args.betting_window)
        await emit("betting_closed")
        coup = resolve_coup(shoe.cards[shoe.position : shoe.position + MAX_COUP_CARDS])
        shoe = Shoe(shoe.cards, shoe.position + coup.cards_used, shoe.cut_index)
        for index, (hand, card) in enumerate(coup.deal_order):
            await asyncio.sleep(args.close_pause if index == 0 else args.deal_interval)
            suit = card.suit.value if card.suit else None
            await emit("card", hand=hand.value, index=index, rank=card.rank, suit=suit)
        result = coup.to_dict()
        await emit(
            "round_result",
            **{
                k: result[k]
                for k in (
                    "winner",
                    "player_total",
                    "banker_total",
                    "natural",
                    "player_pair",
                    "banker_pair",
                    "cards_used",
                )
            },
        )
        await asyncio.sleep(args.result_pause)
        await emit("round_settled", winner=coup.winner.value, bets=0, staked=0, paid=0)
        await asyncio.sleep(args.next_round_pause)


async def run_bare(args: argparse.Namespace) -> None:
    joined: set[ServerConnection] = set()

    async def handler(ws: ServerConnection) -> None:
        try:
            async for frame in ws:
                message = msgpack.unpackb(frame) if isinstance(frame, bytes) else {}
                if isinstance(message, dict) and message.get("type") == "join":
                    await ws.send(msgpack.packb({"type": "joined", "table": TABLE, "seq": 0}))
                    joined.add(ws)
        finally:
            joined.discard(ws)

    async def publish(event: Event) -> None:
        broadcast(joined, msgpack.packb(event))  # encoded once, as our hub does

    async with serve(handler, "127.0.0.1", args.port, **SERVER_OPTIONS) as server:
        port = next(iter(server.sockets)).getsockname()[1]
        print(f"bare: serving on ws://127.0.0.1:{port}/ws", file=sys.stderr, flush=True)
        await deal_forever(args, publish)


ACK_SUBPROTOCOLS = [Subprotocol("baccarat.v1.msgpack"), Subprotocol("baccarat.v1.json")]
ACK_ROUND = 1
ACK_BALANCE = 10**12


def ack_of(bet: Event, balance: int) -> Event:
    """The acknowledgement of a bet frame, `bet_accepted`'s shape; nothing checked."""
    return {
        "type": "bet_accepted",
        "table": bet["table"],
        "round": bet["round"],
        "bet_id": bet["bet_id"],
        "spot": bet["spot"],
        "amount": bet["amount"],
        "balance": balance,
    }


async def ack_handler(ws: ServerConnection) -> None:
    """welcome; join -> a betting-phase snapshot; bet -> bet_accepted, nothing else checked."""
    as_json = ws.subprotocol == "baccarat.v1.json"
    encode: Callable[[Event], bytes | str] = (
        (lambda m: json.dumps(m, separators=(",", ":"))) if as_json else msgpack.packb
    )
    decode: Callable[[bytes | str], Any] = json.loads if as_json else msgpack.unpackb
    balance = ACK_BALANCE
    await ws.send(encode({"type": "welcome", "player": "p", "balance": balance}))
    async for frame in ws:
        message = decode(frame)
        kind = message.get("type") if isinstance(message, dict) else None
        if kind == "bet":
            balance -= message["amount"]
            await ws.send(encode(ack_of(message, balance)))
        elif kind == "join":
            snapshot: Event = {"type": "snapshot", "table": TABLE, "phase": "betting"}
            snapshot |= {"round": ACK_ROUND, "time_left_ms": 3_600_000, "seq": 0}
            await ws.send(encode(snapshot))


async def run_ack(args: argparse.Namespace) -> None:
    options = {**SERVER_OPTIONS, "subprotocols": ACK_SUBPROTOCOLS}
    async with serve(ack_handler, "127.0.0.1", args.port, **options) as server:
        port = next(iter(server.sockets)).getsockname()[1]
        print(f"ack: serving on ws://127.0.0.1:{port}/ws", file=sys.stderr, flush=True)
        await asyncio.Future()  # until the process is stopped


async def run_socketio(args: argparse.Namespace) -> None:
    import socketio
    from aiohttp import web

    sio = socketio.AsyncServer(
        async_mode="aiohttp",
        serializer="msgpack",
        transports=["websocket"],
        ping_interval=20,
        ping_timeout=20,
        max_http_buffer_size=16 * 1024,
    )

    @sio.on("join")  # type: ignore[untyped-decorator]
    async def join(sid: str, table: str) -> None:
        await sio.enter_room(sid, table)
        await sio.emit("joined", {"table": table, "seq": 0}, to=sid)

    async def publish(event: Event) -> None:
        await sio.emit("event", event, room=TABLE)

    app = web.Application()
    sio.attach(app)
    runner = web.AppRunner(app, access_log=None)
    await runner.setup()
    site = web.TCPSite(runner, "127.0.0.1", args.port)
    await site.start()
    server = site._server
    assert server is not None
    port = server.sockets[0].getsockname()[1]  # type: ignore[attr-defined,unused-ignore]
    print(f"socketio: serving on ws://127.0.0.1:{port}/socket.io/", file=sys.stderr, flush=True)
    try:
        await deal_forever(args, publish)
    finally:
        await runner.cleanup()


async def _main(args: argparse.Namespace) -> None:
    run = {"bare": run_bare, "socketio": run_socketio, "ack": run_ack}[args.peer]
    await run(args)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("peer", choices=["bare", "socketio", "ack"])
    parser.add_argument("--port", type=int, default=0)
    parser.add_argument("--betting-window", type=float, default=0.5)
    parser.add_argument("--deal-interval", type=float, default=0.1)
    parser.add_argument("--close-pause", type=float, default=0.1)
    parser.add_argument("--result-pause", type=float, default=0.1)
    parser.add_argument("--next-round-pause", type=float, default=0.1)
    args = parser.parse_args()
    try:
        import uvloop  # the loop our server runs on
    except ImportError:
        runner: Callable[[Any], object] = asyncio.run
    else:
        runner = uvloop.run
    with contextlib.suppress(KeyboardInterrupt):
        runner(_main(args))


if __name__ == "__main__":
    main()
