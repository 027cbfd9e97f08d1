"""Capture real protocol messages for docs/protocol.md.

Starts server nodes in-process (the memory engine, fast test timings), drives WebSocket
clients through every client message, every server message, every error and bet-rejection
code and every close code (and the abort of a client too slow to read), and prints what goes
over the wire:

    -> {...}      a message this script sent
    <- {...}      a message the server sent (msgpack frames are shown decoded)
    ## ...        a section header
    .. ...        a note (close codes, HTTP answers, frame bytes)

Run from the repository root:  .venv/bin/python tools/capture_examples.py

A few answers need a failing store (UNAVAILABLE, INTERNAL, close 1011, a failed re-join) or a
forced void (round_voided): the script swaps one store method for a failing one, or commits a
void through the store with the owner's fencing token; everything the client sees is still
produced by the unchanged server code. The slow client gets small kernel socket buffers (as
tests/transport/test_slow_client.py does) so that its backlog reaches the server's own buffer
quickly. The resync after the history went back is forced by putting the memory store's state
and event history back as they were earlier, as a Redis restarted from an older dump holds
them. Nothing here changes the server.
"""

from __future__ import annotations

import asyncio
import contextlib
import json
import random
import socket
import sys
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import msgpack
from websockets.asyncio.client import ClientConnection, connect
from websockets.exceptions import ConnectionClosed

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from server.app import Node, configure_logging
from server.config import Settings
from server.core.table import void_round
from server.store.base import StoreUnavailable
from server.store.memory import MemoryStore

JSON = "baccarat.v1.json"
MSGPACK = "baccarat.v1.msgpack"
TIMEOUT = 15.0
# Seeds the main table's shuffle so the examples are stable: with 24 the second round is a
# Banker win with a Player pair (bets never influence the cards; only the seed does).
SEED = 24

MAIN = Settings.from_options(
    port=0,
    tables="classic8",
    betting_window=0.5,
    deal_interval=0.02,
    close_pause=0.02,
    result_pause=0.02,
    next_round_pause=0.05,
)


def show(prefix: str, data: object) -> None:
    print(prefix, json.dumps(data, ensure_ascii=False), flush=True)


def section(title: str) -> None:
    print(f"\n## {title}", flush=True)


def note(text: str) -> None:
    print(f".. {text}", flush=True)


Match = Callable[[dict[str, Any]], bool]


def is_type(kind: str) -> Match:
    return lambda m: m.get("type") == kind


def is_event(kind: str, round_no: int | None = None) -> Match:
    return lambda m: (
        m.get("type") == "event"
        and m.get("kind") == kind
        and (round_no is None or m.get("round") == round_no)
    )


class Client:
    """A plain websockets client that prints every message it sends and receives."""

    def __init__(self, ws: ClientConnection, name: str, quiet: bool = False) -> None:
        self.ws = ws
        self.name = name
        self.quiet = quiet
        self.last_seq = 0

    @classmethod
    async def open(
        cls, port: int, name: str, subprotocols: list[str] | None = None, quiet: bool = False
    ) -> Client:
        ws = await connect(
            f"ws://127.0.0.1:{port}/ws",
            subprotocols=subprotocols,  # type: ignore[arg-type]
            compression=None,
        )
        note(f"{name}: connected, subprotocol={ws.subprotocol!r}")
        return cls(ws, name, quiet)

    async def send(self, message: object, binary: bool = False) -> None:
        show(f"-> [{self.name}]", message)
        if binary:
            await self.ws.send(msgpack.packb(message, use_bin_type=True))
        else:
            await self.ws.send(json.dumps(message))

    async def recv(self) -> dict[str, Any]:
        async with asyncio.timeout(TIMEOUT):
            frame = await self.ws.recv()
        message = json.loads(frame) if isinstance(frame, str) else msgpack.unpackb(frame)
        if isinstance(message, dict) and message.get("type") in ("event", "snapshot", "joined"):
            self.last_seq = message["seq"]
        if not self.quiet:
            show(f"<- [{self.name}]", message)
        return message  # type: ignore[no-any-return]

    async def until(self, match: Match, show_skipped: bool = True) -> dict[str, Any]:
        """Read until a message matches; skipped messages are printed unless told not to."""
        quiet = self.quiet
        while True:
            self.quiet = quiet or not show_skipped
            try:
                message = await self.recv()
            finally:
                self.quiet = quiet
            if match(message):
                if not show_skipped and not quiet:
                    show(f"<- [{self.name}]", message)
                return message

    async def closed(self) -> None:
        """Wait for the server to close the connection and say how."""
        try:
            async with asyncio.timeout(TIMEOUT):
                while True:
                    await self.ws.recv()
        except ConnectionClosed:
            pass
        code, reason = self.ws.close_code, self.ws.close_reason
        note(f"{self.name}: closed by server: code={code} reason={reason!r}")

    async def close(self) -> None:
        await self.ws.close()


@contextlib.contextmanager
def failing(store: object, method: str, replacement: Callable[..., Any]) -> Iterator[None]:
    """Replace one method of the store object for the duration of the block."""
    setattr(store, method, replacement)
    try:
        yield
    finally:
        delattr(store, method)  # the class's own method shows through again


async def http_get(port: int, path: str) -> None:
    reader, writer = await asyncio.open_connection("127.0.0.1", port)
    writer.write(f"GET {path} HTTP/1.1\r\nHost: localhost\r\n\r\n".encode())
    await writer.drain()
    raw = await reader.read()
    writer.close()
    head, _, body = raw.partition(b"\r\n\r\n")
    lines = head.decode().split("\r\n")
    note(f"GET {path} -> {lines[0]}")
    for line in lines[1:]:
        note(f"   {line}")
    note(f"   body: {body.decode(errors='replace')!r}")


def _seeds(number: int) -> Callable[[], bytes]:
    """A reproducible source of shoe seeds (the server's own draws from the OS CSPRNG)."""
    source = random.Random(number)
    return lambda: source.randbytes(32)


async def capture_main() -> None:
    node = Node(MAIN)
    node.loops[0].seeds = _seeds(SEED)
    async with node:
        port = node.port
        table = "classic8"

        section("welcome (JSON connection)")
        c1 = await Client.open(port, "c1", [JSON])
        await c1.recv()

        section("entropy in the new shoe's first window (round 1): the event, then refusals")
        await c1.send({"type": "entropy", "table": table, "value": "lucky 7", "ref": "e1"})
        await c1.recv()
        await c1.send({"type": "entropy", "table": table, "value": "again", "ref": "e2"})
        await c1.recv()
        await c1.send({"type": "entropy", "table": table, "value": "x" * 65, "ref": "e3"})
        await c1.recv()

        section("ping / pong")
        await c1.send({"type": "ping", "ref": "p1"})
        await c1.recv()
        await c1.send({"type": "ping"})
        await c1.recv()

        section("error replies")
        await c1.send([1, 2])
        await c1.recv()
        await c1.send({"type": "hello", "ref": 1})
        await c1.recv()
        await c1.send({"type": "join", "ref": 2})
        await c1.recv()
        await c1.send({"type": "join", "table": table, "since": -1})
        await c1.recv()
        await c1.send({"type": "join", "table": table, "since": "5"})
        await c1.recv()
        await c1.send({"type": "join", "table": "x" * 65})
        await c1.recv()
        await c1.send({"type": "join", "table": "nope", "ref": "j1"})
        await c1.recv()
        await c1.send({"type": "leave", "table": "nope"})
        await c1.recv()
        await c1.send({"type": "replay", "table": table, "round": 999_999, "ref": "r1"})
        await c1.recv()
        await c1.send({"type": "replay", "table": table, "round": 1.0})
        await c1.recv()
        await c1.send({"type": "bet", "table": table, "round": 1, "spot": "player"})
        await c1.recv()
        await c1.send(
            {
                "type": "bet",
                "table": table,
                "round": 1,
                "bet_id": 7,
                "spot": "player",
                "amount": 100,
            }
        )
        await c1.recv()

        section("ref: echoed only when a string or an integer of at most 64 characters")
        await c1.send({"type": "hello", "ref": "x" * 65})
        await c1.recv()
        await c1.send({"type": "hello", "ref": 2**64})
        await c1.recv()
        await c1.send({"type": "hello", "ref": {"id": 1}})
        await c1.recv()
        await c1.send({"type": "ping", "ref": 1.5})
        await c1.recv()
        await c1.send({"type": "ping", "ref": 2**64 - 1})
        await c1.recv()

        section("bet on an unknown table")
        await c1.send(
            {
                "type": "bet",
                "table": "nope",
                "round": 1,
                "bet_id": "x-1",
                "spot": "player",
                "amount": 100,
            }
        )
        await c1.recv()

        section("join (no since): snapshot, joined, then live events")
        await c1.send({"type": "join", "table": table})
        await c1.until(is_type("joined"))

        section("a round: bets while it is open, rejections, events to settlement")
        opened = await c1.until(is_event("round_opened"))
        r = opened["round"]

        def bet(bet_id: str, spot: object, amount: object, round_no: object = r) -> dict[str, Any]:
            return {
                "type": "bet",
                "table": table,
                "round": round_no,
                "bet_id": bet_id,
                "spot": spot,
                "amount": amount,
            }

        bets = [
            bet("b-1", "banker", 1000),
            bet("b-2", "tie", 100),
            bet("b-3", "player_pair", 100),
            bet("b-1", "banker", 1000),  # the same bet_id again: same answer, no second debit
            bet("w-1", "player", 100, r + 1),
            bet("w-2", "player", 100, float(r)),  # 2.0 is not the integer 2
            bet("s-1", "dragon", 100),
            bet("a-1", "player", 10.5),
            bet("a-2", "player", -5),
            bet("l-1", "tie", 50),  # 100 already on tie: 150 in all meets the minimum
            bet("l-0", "banker_pair", 50),
            bet("l-2", "player", 600_000),
        ]
        for message in bets:  # all at once: the window is short; answers keep this order
            await c1.send(message)
        answers = 0
        while answers < len(bets):
            message = await c1.recv()
            if message["type"] in ("bet_accepted", "bet_rejected"):
                answers += 1
        # joining again re-sends a snapshot: it lists this player's bets in the round
        await c1.send({"type": "join", "table": table})
        await c1.until(is_type("joined"))
        await c1.until(is_event("betting_closed", r))
        await c1.send(bet("c-1", "player", 100))
        await c1.until(is_type("bet_rejected"))
        await c1.send({"type": "entropy", "table": table, "value": "late", "ref": "e4"})
        await c1.until(is_type("error"))
        await c1.until(is_type("settlement"))

        section("replay of the round just played")
        await c1.send({"type": "replay", "table": table, "round": r})
        await c1.until(is_type("replay"), show_skipped=False)

        section("replay of round 1 (shoe_shuffled and burn open the shoe)")
        await c1.send({"type": "replay", "table": table, "round": 1})
        await c1.until(is_type("replay"), show_skipped=False)

        section("leave")
        await c1.send({"type": "leave", "table": table})
        await c1.until(is_type("left"), show_skipped=False)
        seen = c1.last_seq
        note(f"c1 last seq seen: {seen}")

        section("reconnect with since = last seq seen: the missed events, no snapshot")
        c3 = await Client.open(port, "c3", [JSON])
        await c3.recv()
        await asyncio.sleep(0.3)  # let a few events happen while "disconnected"
        await c3.send({"type": "join", "table": table, "since": seen})
        await c3.until(is_type("joined"))
        await c3.recv()

        section("join with a since beyond the table's last seq: snapshot with recovered false")
        await c3.send({"type": "join", "table": table, "since": 1_000_000})
        await c3.until(is_type("joined"))
        await c3.recv()

        section("a failed re-join (store down) leaves the earlier subscription in place")

        async def down(*args: object, **kwargs: object) -> Any:
            raise StoreUnavailable("connection refused")

        with failing(node.store, "snapshot", down):
            await c3.send({"type": "join", "table": table, "ref": "rejoin"})
            await c3.until(is_type("error"))
        for _ in range(2):
            await c3.recv()
        await c3.close()

        section("INSUFFICIENT_FUNDS")
        c2 = await Client.open(port, "c2", [JSON], quiet=True)
        await c2.recv()
        await c2.send({"type": "join", "table": table})
        opened = await c2.until(is_event("round_opened"))
        r2 = opened["round"]
        c2.quiet = False
        for bet_id, spot, amount in (
            ("f-1", "player", 500_000),
            ("f-2", "banker", 500_000),
            ("f-3", "tie", 100),
        ):
            await c2.send(
                {
                    "type": "bet",
                    "table": table,
                    "round": r2,
                    "bet_id": bet_id,
                    "spot": spot,
                    "amount": amount,
                }
            )
        await c2.until(lambda m: m.get("bet_id") == "f-3")

        section("snapshot of a round being dealt (join with no since)")
        await c2.until(lambda m: m.get("kind") == "card" and m.get("index") == 2)
        c11 = await Client.open(port, "c11", [JSON], quiet=True)
        await c11.recv()
        c11.quiet = False
        await c11.send({"type": "join", "table": table})
        await c11.until(is_type("snapshot"), show_skipped=False)
        await c11.close()
        await c2.close()

        section("round_voided (forced through the store, as the loop does when a shoe fails)")
        c4 = await Client.open(port, "c4", [JSON], quiet=True)
        await c4.recv()
        await c4.send({"type": "join", "table": table})
        opened = await c4.until(is_event("round_opened"))
        r4 = opened["round"]
        c4.quiet = False
        await c4.send(
            {
                "type": "bet",
                "table": table,
                "round": r4,
                "bet_id": "v-1",
                "spot": "player",
                "amount": "2500",
            }
        )
        await c4.until(is_type("bet_rejected"))
        # a rejected bet_id is not remembered: the same id may be used again
        await c4.send(
            {
                "type": "bet",
                "table": table,
                "round": r4,
                "bet_id": "v-1",
                "spot": "player",
                "amount": 2500,
            }
        )
        await c4.until(is_type("bet_accepted"))
        loop = node.loops[0]
        state = await node.store.load_state(table)
        assert state is not None and loop.token is not None
        transition, refunds = void_round(
            state, await node.store.round_bets(table, r4), "the shoe cannot finish this coup"
        )
        await node.store.commit(
            table, loop.token, state.version, transition.state, transition.events, refunds
        )
        await c4.until(is_type("settlement"))
        await c4.until(is_event("round_opened"))
        await c4.close()

        section("store outage: UNAVAILABLE, INTERNAL, close 1011")
        c5 = await Client.open(port, "c5", [JSON])
        await c5.recv()
        store = node.store

        async def broken(*args: object, **kwargs: object) -> Any:
            raise RuntimeError("a bug")

        with failing(store, "place_bet", down):
            bet_u1 = {
                "type": "bet",
                "table": table,
                "round": 1,
                "bet_id": "u-1",
                "spot": "player",
                "amount": 100,
            }
            await c5.send(bet_u1)
            await c5.recv()
        with failing(store, "now_ms", down):
            await c5.send({"type": "ping", "ref": 9})
            await c5.recv()
        with failing(store, "round_events", broken):
            await c5.send({"type": "replay", "table": table, "round": 1, "ref": "r2"})
            await c5.recv()
        await c5.close()
        with failing(store, "ensure_player", down):
            c6 = await Client.open(port, "c6", [JSON])
            await c6.closed()

        section("msgpack: the default when no subprotocol is asked for")
        m1 = await Client.open(port, "m1", None)
        frame = await m1.ws.recv()
        assert isinstance(frame, bytes)
        note(f"m1: welcome is a binary frame of {len(frame)} bytes, starting {frame[:24].hex(' ')}")
        show("<- [m1]", msgpack.unpackb(frame))
        await m1.send({"type": "ping", "ref": "text-on-msgpack"})  # a JSON text frame
        frame = await m1.ws.recv()
        assert isinstance(frame, bytes)
        note(f"m1: answer is {type(frame).__name__}: {frame.hex(' ')}")
        show("<- [m1]", msgpack.unpackb(frame))
        await m1.send({"type": "ping", "ref": "binary"}, binary=True)  # a msgpack frame
        try:
            async with asyncio.timeout(3):
                frame = await m1.ws.recv()
            show("<- [m1]", msgpack.unpackb(frame))
            await m1.close()
        except ConnectionClosed:
            await m1.closed()

        section("msgpack explicitly, and JSON preferred by order")
        m2 = await Client.open(port, "m2", [MSGPACK])
        await m2.recv()
        await m2.close()
        m3 = await Client.open(port, "m3", [JSON, MSGPACK])
        await m3.recv()
        await m3.close()
        m4 = await Client.open(port, "m4", ["chat"])
        await m4.close()

        section("close 1003: an undecodable frame")
        c7 = await Client.open(port, "c7", [JSON], quiet=True)
        await c7.recv()
        note("-> [c7] text frame '{not json'")
        await c7.ws.send("{not json")
        await c7.closed()
        c8 = await Client.open(port, "c8", [JSON], quiet=True)
        await c8.recv()
        note("-> [c8] binary frame c1 (not msgpack)")
        await c8.ws.send(b"\xc1")
        await c8.closed()

        section("close 1009: a frame over max_frame_bytes")
        c9 = await Client.open(port, "c9", [JSON], quiet=True)
        await c9.recv()
        note("-> [c9] a 20000-byte text frame")
        await c9.ws.send(json.dumps({"type": "ping", "ref": "x" * 20_000}))
        await c9.closed()

        section("HTTP endpoints")
        await http_get(port, "/healthz")
        await http_get(port, "/status")
        await http_get(port, "/")
        await http_get(port, "/nothing-here.js")
        await http_get(port, "/ws")

        section("close 1001: the node shuts down")
        c10 = await Client.open(port, "c10", [JSON], quiet=True)
        await c10.recv()
        stopping = asyncio.create_task(node.stop())
        await c10.closed()
        await stopping
        node.server = None  # already stopped: __aexit__ must not stop it twice
        node.stop = _noop  # type: ignore[method-assign]


async def _noop() -> None:
    await asyncio.sleep(0)


async def capture_shoe_end() -> None:
    """A four-deck table with zero pauses plays a whole shoe in about half a second."""
    settings = Settings.from_options(
        port=0,
        tables="short=fourdeck",
        betting_window=0.01,
        deal_interval=0.0,
        close_pause=0.0,
        result_pause=0.0,
        next_round_pause=0.0,
        history_events=40,
    )
    async with Node(settings) as node:
        section("cut_card and the next shoe (tables=short=fourdeck, zero pauses)")
        c = await Client.open(node.port, "s1", [JSON], quiet=True)
        await c.recv()
        await c.send({"type": "join", "table": "short"})
        await c.until(is_type("joined"))
        # The cut card comes out either before a hand (that hand is the last) or during one
        # (one more hand, or this one is the last if the cards behind the cut cannot finish
        # another coup). Watch shoes until the first two cases were seen (the third is rare).
        wanted = {"before a hand", "during a hand, one more"}
        seen: set[str] = set()
        this_round: list[dict[str, Any]] = []
        loop = asyncio.get_running_loop()
        deadline = loop.time() + 60
        while not wanted <= seen and loop.time() < deadline:
            message = await c.recv()
            if message.get("type") != "event":
                continue
            if this_round and message["round"] != this_round[-1]["round"]:
                this_round = []
            this_round.append(message)
            if message.get("kind") != "cut_card":
                continue
            if not any(m.get("kind") == "card" for m in this_round):
                case = "before a hand"
                this_round.append(await c.until(is_event("round_opened")))
            elif message["last_round"] > message["round"]:
                case = "during a hand, one more"
                this_round.append(await c.until(is_event("card")))
            else:
                case = "during a hand, the last"
                this_round.append(await c.until(is_event("card")))
            if case in seen:
                continue
            seen.add(case)
            note(f"cut card {case}: round {message['round']}, shoe {message['shoe']}")
            for event_ in this_round:
                show("<- [s1]", event_)
            if case == "before a hand":
                this_round = []
        c.quiet = False
        await c.until(is_event("shoe_shuffled"))
        await c.until(is_event("round_opened"))
        await c.close()

        section("reconnect with a since no longer held: snapshot with recovered false")
        s2 = await Client.open(node.port, "s2", [JSON], quiet=True)
        await s2.recv()
        s2.quiet = False
        await s2.send({"type": "join", "table": "short", "since": 1})
        await s2.until(is_type("joined"))
        await s2.close()


async def capture_bet_id_per_table() -> None:
    """The same bet_id on two tables is two bets; again on one table, the first receipt."""
    settings = Settings.from_options(
        port=0,
        tables="classic8,punto6",
        betting_window=0.5,
        deal_interval=0.02,
        close_pause=0.02,
        result_pause=0.02,
        next_round_pause=0.05,
    )
    async with Node(settings) as node:
        section("bet_id is per player and table (tables=classic8,punto6)")
        c = await Client.open(node.port, "t1", [JSON], quiet=True)
        await c.recv()
        for table in ("classic8", "punto6"):
            await c.send({"type": "join", "table": table})
        placed: dict[str, int] = {}
        while len(placed) < 2:
            message = await c.recv()
            if is_event("round_opened")(message) and message["table"] not in placed:
                placed[message["table"]] = message["round"]
                c.quiet = False
                await c.send(
                    {
                        "type": "bet",
                        "table": message["table"],
                        "round": message["round"],
                        "bet_id": "same-1",
                        "spot": "player",
                        "amount": 100,
                    }
                )
                await c.until(is_type("bet_accepted"), show_skipped=False)
                c.quiet = True
        c.quiet = False
        await c.send(
            {
                "type": "bet",
                "table": "classic8",
                "round": placed["classic8"],
                "bet_id": "same-1",
                "spot": "banker",
                "amount": 500,
            }
        )
        await c.until(is_type("bet_accepted"), show_skipped=False)
        await c.close()


async def capture_slow_client() -> None:
    """A client that stops reading while it asks for replays is cut off, without a close."""
    settings = Settings.from_options(
        port=0,
        tables="classic8",
        betting_window=0.5,
        max_buffer_bytes=16 * 1024,
        rate_replays=0,  # no rate limit: show the buffer limit at work
        deal_interval=0.02,
        close_pause=0.02,
        result_pause=0.02,
        next_round_pause=0.05,
    )
    async with Node(settings) as node:
        section("a client too far behind is cut off (max_buffer_bytes=16384, small buffers)")
        assert node.server is not None
        for listener in node.server.sockets:  # accepted sockets inherit SO_SNDBUF
            listener.setsockopt(socket.SOL_SOCKET, socket.SO_SNDBUF, 4096)
        sock = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
        sock.setsockopt(socket.SOL_SOCKET, socket.SO_RCVBUF, 4096)
        sock.setblocking(False)
        await asyncio.get_running_loop().sock_connect(sock, ("127.0.0.1", node.port))
        ws = await connect(
            f"ws://127.0.0.1:{node.port}/ws",
            sock=sock,
            subprotocols=[JSON],  # type: ignore[list-item]
            compression=None,
            ping_interval=None,
        )
        c = Client(ws, "d1")
        note(f"d1: connected, subprotocol={ws.subprotocol!r}")
        await c.recv()
        ws.transport.pause_reading()  # the client stops reading
        note("d1: stops reading, then sends replay requests for round 1 until it is cut off")
        session = next(iter(node.ctx.sessions))
        dropped = asyncio.ensure_future(session.ws.wait_closed())
        sent = 0
        request = json.dumps({"type": "replay", "table": "classic8", "round": 1})
        with contextlib.suppress(ConnectionClosed, ConnectionError):
            while not dropped.done() and not ws.transport.is_closing():
                await ws.send(request)
                sent += 1
                await asyncio.sleep(0)
        note(f"d1: sent {sent} replay requests before the server cut the connection")
        ws.transport.resume_reading()
        received = 0
        try:
            async with asyncio.timeout(TIMEOUT):
                while True:
                    await ws.recv()
                    received += 1
        except ConnectionClosed:
            pass
        note(
            f"d1: read {received} answers that had reached it, then: "
            f"code={ws.close_code} reason={ws.close_reason!r}"
        )
        dropped.cancel()


async def capture_history_loss() -> None:
    """The epoch: on snapshot and joined, in join, and the resync a joined client gets when
    the stored history goes back (forced here by putting the memory store's state and history
    back as they were earlier, as a Redis restarted from an older dump holds them)."""
    async with Node(MAIN) as node:
        section("epoch on snapshot and joined; join with since and epoch")
        e1 = await Client.open(node.port, "e1", [JSON], quiet=True)
        await e1.recv()
        e1.quiet = False
        await e1.send({"type": "join", "table": "classic8"})
        snap = await e1.until(is_type("snapshot"))
        joined = await e1.until(is_type("joined"))
        store = node.store
        assert isinstance(store, MemoryStore)  # so mypy checks what is reached into below
        table = store._tables["classic8"]
        dump = (table.header, table.blob, table.seq)  # what an older Redis dump would hold
        e1.quiet = True
        await e1.until(lambda m: m.get("type") == "event" and m["seq"] >= joined["seq"] + 2)
        e2 = await Client.open(node.port, "e2", [JSON], quiet=True)
        await e2.recv()
        e2.quiet = False
        since = {"since": snap["seq"], "epoch": snap["epoch"]}
        await e2.send({"type": "join", "table": "classic8", **since})
        await e2.until(is_type("joined"))
        await e2.close()

        section("join with since and an epoch that is not the table's: recovered false")
        e3 = await Client.open(node.port, "e3", [JSON], quiet=True)
        await e3.recv()
        e3.quiet = False
        await e3.send({"type": "join", "table": "classic8", "since": 3, "epoch": "4be1d0c2a7f3"})
        await e3.until(is_type("joined"))
        await e3.close()

        section("the history went back: a resync (snapshot with recovered false, new epoch)")
        table.header, table.blob, back_to = dump
        note(f"the store is back at seq {back_to}, with its state then (e1 has seen {e1.last_seq})")
        table.seq = back_to
        table.events = type(table.events)(e for e in table.events if e["seq"] <= back_to)
        e1.quiet = False
        await e1.until(is_type("joined"), show_skipped=True)
        await e1.until(lambda m: m.get("type") == "event")
        await e1.close()


async def capture_limits() -> None:
    """Issue 7's limits: strings UTF-8 cannot carry, rates, a flood, replay pages."""
    settings = Settings.from_options(
        port=0,
        tables="classic8",
        betting_window=1.0,
        deal_interval=0.02,
        close_pause=0.02,
        result_pause=0.02,
        next_round_pause=0.05,
        rate_pings=1,
        rate_bets=1,
        rate_burst=2,
        max_refusals=3,
        max_replay_events=4,
    )
    async with Node(settings) as node:
        section("strings UTF-8 cannot carry (a JSON text frame with a lone surrogate escape)")
        u = await Client.open(node.port, "u1", [JSON])
        await u.recv()
        for raw in (
            '{"type": "ping", "ref": "\\ud800"}',
            '{"type": "bet", "table": "classic8", "round": 1, "bet_id": "\\ud800", '
            '"spot": "player", "amount": 100}',
        ):
            note(f"-> [u1] text frame {raw}")
            await u.ws.send(raw)
            await u.until(is_type("error"))
        await u.close()

        section("rate limits: --rate-pings 1 --rate-bets 1 --rate-burst 2 --max-refusals 3")
        r = await Client.open(node.port, "r1", [JSON])
        await r.recv()
        for n in range(3):
            await r.send({"type": "ping", "ref": n})
            await r.until(lambda m: m.get("type") in ("pong", "error"))
        await r.send({"type": "join", "table": "classic8"})
        await r.until(is_type("joined"), show_skipped=False)
        opened = await r.until(is_event("round_opened"), show_skipped=False)
        for n in range(3):
            await r.send(
                {
                    "type": "bet",
                    "table": "classic8",
                    "round": opened["round"],
                    "bet_id": f"b{n}",
                    "spot": "banker",
                    "amount": 100,
                }
            )
            await r.until(lambda m: m.get("type") in ("bet_accepted", "bet_rejected"), False)
        for n in range(3, 6):
            await r.send({"type": "ping", "ref": n})
        await r.closed()

        section("replay pages: --max-replay-events 4")
        p = await Client.open(node.port, "p1", [JSON], quiet=True)
        await p.recv()
        await p.send({"type": "join", "table": "classic8"})
        snap = await p.until(is_type("snapshot"))
        settled = await p.until(
            lambda m: is_event("round_settled")(m) and m["round"] > snap["round"]
        )
        p.quiet = False
        after = None
        while True:
            request: dict[str, Any] = {"type": "replay", "table": "classic8"}
            request["round"] = settled["round"]
            if after is not None:
                request["after"] = after
            await p.send(request)
            answer = await p.until(is_type("replay"), show_skipped=False)
            if not answer["more"]:
                break
            after = answer["events"][-1]["seq"]
        await p.close()


async def capture_connection_limits() -> None:
    """Issue 7's connection limits and HTTP answers: 429, 403, /readyz, bad paths."""
    settings = Settings.from_options(
        port=0,
        tables="classic8",
        max_connections_per_ip=2,
        allowed_origins="https://play.example",
        drain_seconds=1,
    )
    async with Node(settings) as node:
        section("--max-connections-per-ip 2 --allowed-origins https://play.example")
        uri = f"ws://127.0.0.1:{node.port}/ws"
        first = await connect(uri, origin="https://play.example")  # type: ignore[arg-type]
        second = await connect(uri)
        note("two connections open (one with Origin https://play.example, one without)")
        for origin in (None, "https://evil.example"):
            try:
                await connect(uri, origin=origin)  # type: ignore[arg-type]
            except Exception as error:
                note(f"another connection, Origin {origin}: {error}")
        await first.close()
        try:
            await connect(uri, origin="https://evil.example")  # type: ignore[arg-type]
        except Exception as error:
            note(f"after closing one, Origin https://evil.example: {error}")
        await second.close()
        section("HTTP: readiness and bad paths")
        await http_get(node.port, "/readyz")
        node.begin_drain()
        await http_get(node.port, "/readyz")
        await http_get(node.port, "/healthz")
        await http_get(node.port, "/a%00b")


async def main() -> None:
    configure_logging("console", "critical")
    await capture_main()
    await capture_shoe_end()
    await capture_bet_id_per_table()
    await capture_slow_client()
    await capture_history_loss()
    await capture_limits()
    await capture_connection_limits()


if __name__ == "__main__":
    with contextlib.suppress(KeyboardInterrupt):
        asyncio.run(main())
