"""In-process nodes on port 0 and real websockets clients that wait on messages, not time.

Every wait is on a message with a timeout of `within(seconds)`, scaled by TEST_TIMEOUT_SCALE
for slow machines; the betting window scales with it, so pipelined bets still land inside it.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
import os
import time
import uuid
from collections.abc import AsyncIterator, Awaitable, Callable, Iterator
from pathlib import Path
from typing import Any

import pytest
import structlog.testing
from websockets.asyncio.client import ClientConnection, connect
from websockets.typing import Subprotocol

from server.app import Node
from server.config import Settings
from server.store.audit import DAY_MS
from server.store.base import Store
from server.wire.codec import Encoding, Frame, decode, encode
from tests.redis_server import delete_keys
from tests.wallet.conftest import make_demo  # noqa: F401 - the reference wallet, for wallet tests

SCALE = float(os.environ.get("TEST_TIMEOUT_SCALE", "1"))
TABLE = "t1"
FAST: dict[str, Any] = {
    "betting_window": 0.4 * SCALE,
    "deal_interval": 0.01,
    "close_pause": 0.01,
    "result_pause": 0.01,
    "next_round_pause": 0.02,
    "tables": f"{TABLE}=classic8",
    "node_id": "test-node",
    "static_dir": "/nonexistent/baccarat-static",
}

Message = dict[str, Any]


def within(seconds: float = 5.0) -> float:
    """A timeout, scaled for slow machines."""
    return seconds * SCALE


def _uri(node: Node) -> str:
    return f"ws://127.0.0.1:{node.port}/ws"


class Client:
    """A WebSocket client that decodes by its encoding and keeps every event it receives."""

    def __init__(self, ws: ClientConnection) -> None:
        self.ws = ws
        self.encoding = Encoding(ws.subprotocol) if ws.subprotocol else Encoding.MSGPACK
        self.events: list[Message] = []
        self.lags_ms: list[float] = []  # per event: wall-clock arrival minus the event's ts
        self.welcome: Message = {}

    async def send(self, message: Message) -> None:
        await self.ws.send(encode(message, self.encoding))

    async def send_frame(self, frame: Frame) -> None:
        await self.ws.send(frame)

    async def recv(self) -> Message:
        """The next message; frames must match the connection's encoding."""
        frame = await self.ws.recv()
        expected = bytes if self.encoding is Encoding.MSGPACK else str
        assert isinstance(frame, expected), f"{type(frame).__name__} frame on {self.encoding}"
        message = decode(frame)
        assert isinstance(message, dict)
        if message["type"] == "event":
            self.events.append(message)
            self.lags_ms.append(time.time() * 1000 - message["ts"])
        return message

    async def expect(self, match: Callable[[Message], bool], seconds: float = 5.0) -> Message:
        """Read until a message matches (events read on the way are kept in `events`)."""
        async with asyncio.timeout(within(seconds)):
            while True:
                message = await self.recv()
                if match(message):
                    return message

    async def reply(self, kind: str, seconds: float = 5.0) -> Message:
        """The next message of this type that is not a table event."""
        return await self.expect(lambda m: m["type"] == kind, seconds)

    async def event(self, kind: str, after_round: int = -1, seconds: float = 5.0) -> Message:
        """The next event of this kind in a round after `after_round`."""
        return await self.expect(
            lambda m: m["type"] == "event" and m["kind"] == kind and m["round"] > after_round,
            seconds,
        )

    async def until_seq(self, seq: int, seconds: float = 5.0) -> Message:
        return await self.expect(lambda m: m["type"] == "event" and m["seq"] >= seq, seconds)

    async def join(self, table: str = TABLE) -> Message:
        await self.send({"type": "join", "table": table})
        return await self.reply("snapshot")

    async def ping(self, ref: object = "p") -> Message:
        """A round trip: every message sent before the pong has been handled."""
        await self.send({"type": "ping", "ref": ref})
        return await self.expect(lambda m: m["type"] == "pong" and m["ref"] == ref)

    def round_events(self, round_no: int) -> list[Message]:
        return [e for e in self.events if e["round"] == round_no]


ClientFactory = Callable[..., Awaitable[Client]]
NodeFactory = Callable[..., Awaitable[Node]]


@pytest.fixture(params=["memory", pytest.param("redis", marks=pytest.mark.redis)])
def engine(request: pytest.FixtureRequest) -> str:
    """For tests that must hold on both engines: make_node(engine=engine)."""
    name: str = request.param
    return name


@pytest.fixture
async def make_node(request: pytest.FixtureRequest) -> AsyncIterator[NodeFactory]:
    """Start in-process nodes (FAST timings, port 0) with any settings overridden; with
    engine="redis", on the session's real Redis under a key prefix of their own."""
    prefixes: list[str] = []
    url = ""
    async with contextlib.AsyncExitStack() as stack:

        async def factory(engine: str = "memory", **overrides: Any) -> Node:
            nonlocal url
            settings = Settings.from_options(port=0, **{**FAST, **overrides})
            store: Store | None = None
            if engine == "redis":
                from server.store.redis import RedisStore

                url = request.getfixturevalue("redis_url")
                prefixes.append(f"test-{uuid.uuid4().hex[:12]}")
                store = RedisStore.from_url(
                    url,
                    key_prefix=prefixes[-1],
                    history_events=settings.history_events,
                    history_rounds=settings.history_rounds,
                    max_bets_per_round=settings.max_bets_per_round,
                    audit_keep_ms=settings.audit_days * DAY_MS,
                    audit_entries=settings.audit_entries,
                    outbox=not settings.wallet.internal,  # an HTTP wallet
                )
            return await stack.enter_async_context(Node(settings, store=store))

        yield factory
    if prefixes:
        await delete_keys(url, prefixes)


@pytest.fixture
async def node(make_node: NodeFactory) -> Node:
    return await make_node()


@pytest.fixture
async def open_client() -> AsyncIterator[ClientFactory]:
    """Connect clients (JSON unless told) that have read their welcome; closed at the end."""
    async with contextlib.AsyncExitStack() as stack:

        async def factory(
            node: Node,
            encoding: Encoding | None = Encoding.JSON,
            subprotocols: list[str] | None = None,
            **options: Any,
        ) -> Client:
            if subprotocols is None and encoding is not None:
                subprotocols = [encoding.value]
            offered = [Subprotocol(s) for s in subprotocols] if subprotocols else None
            ws = await stack.enter_async_context(
                connect(_uri(node), subprotocols=offered, open_timeout=within(), **options)
            )
            client = Client(ws)
            client.welcome = await client.reply("welcome")
            return client

        yield factory


async def assert_table_deals(node: Node, open_client: ClientFactory) -> None:
    """A fresh client joins and sees cards dealt: the node is fine."""
    client = await open_client(node)
    await client.join()
    await client.event("card")


@pytest.fixture
def static_dir(tmp_path: Path) -> Path:
    folder = tmp_path / "static"
    folder.mkdir()
    (folder / "index.html").write_text("<h1>baccarat</h1>")
    (folder / "app.js").write_text("console.log(1)")
    (tmp_path / "secret.txt").write_text("outside")
    return folder


class ServerLog:
    """Everything logged while a test runs: structlog events (the server's own) and stdlib
    records (websockets logs 'connection handler failed' with a traceback there)."""

    def __init__(self, events: list[Message], caplog: pytest.LogCaptureFixture) -> None:
        self.events = events
        self.caplog = caplog

    def failures(self) -> list[object]:
        """Errors and tracebacks: client input must never cause one."""
        events = [
            e for e in self.events if e.get("log_level") in ("error", "critical") or "exc_info" in e
        ]
        records = [
            f"{r.name}: {r.getMessage()}"
            for r in self.caplog.records
            if r.levelno >= logging.ERROR or r.exc_info
        ]
        return [*events, *records]

    def names(self) -> list[str]:
        return [str(e["event"]) for e in self.events]


@pytest.fixture
def server_log(caplog: pytest.LogCaptureFixture) -> Iterator[ServerLog]:
    """Capture the log; request it before the node so the node's bound loggers see it."""
    caplog.set_level(logging.WARNING)
    with structlog.testing.capture_logs() as events:
        yield ServerLog(events, caplog)


def bet_message(
    round_no: object, bet_id: str, spot: object = "banker", amount: object = 1_000
) -> dict[str, Any]:
    """A `bet` on the tests' table (any field may be wrong on purpose)."""
    return {
        "type": "bet",
        "table": TABLE,
        "round": round_no,
        "bet_id": bet_id,
        "spot": spot,
        "amount": amount,
    }
