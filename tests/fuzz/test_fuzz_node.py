"""Generated and mutated frames through the handlers of a live node, on both engines.

One node per engine serves the whole run (its own event loop, driven example by example);
two clients, one per encoding, send each example's frames and then a ping, and read every
answer up to its pong. Checked after each example: no error or traceback was logged, every
answer is a known message in the connection's encoding (or the connection was closed with a
code for bad input), and the money ledger balances.
"""

from __future__ import annotations

import asyncio
import itertools
import logging
import os
import time
import uuid
from collections.abc import Iterator
from typing import Any

import pytest
import structlog.testing
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from websockets.asyncio.client import ClientConnection, connect
from websockets.exceptions import ConnectionClosed
from websockets.typing import Subprotocol

from server.app import Node
from server.config import Settings
from server.core.errors import RejectCode
from server.store.base import Store
from server.wire.codec import Encoding, decode
from server.wire.messages import ErrorCode
from tests.fuzz import EXAMPLES
from tests.fuzz.strategies import FrameSpec, frame_specs, frames_of
from tests.redis_server import delete_keys

SCALE = float(os.environ.get("TEST_TIMEOUT_SCALE", "1"))
TABLE = "t1"
SERVER_TYPES = {
    "welcome",
    "snapshot",
    "joined",
    "event",
    "bet_accepted",
    "bet_rejected",
    "settlement",
    "replay",
    "left",
    "pong",
    "error",
}
# Closes a client's input may cause: undecodable (1003), invalid UTF-8 in a text frame
# (1007, by the WebSocket library), flooding (1008), too big (1009).
INPUT_CLOSE_CODES = {1003, 1007, 1008, 1009}
SETTINGS: dict[str, Any] = {
    "port": 0,
    "tables": f"{TABLE}=classic8",
    "betting_window": 2.0,  # mostly open: bets at the current round are accepted
    "deal_interval": 0.005,
    "close_pause": 0.005,
    "result_pause": 0.005,
    "next_round_pause": 0.005,
    "static_dir": "/nonexistent/baccarat-static",
    # Limits off: every frame reaches the handlers (the limits have their own tests).
    "rate_bets": 0,
    "rate_pings": 0,
    "rate_joins": 0,
    "rate_replays": 0,
    "max_refusals": 0,
}


class _Failures(logging.Handler):
    """Stdlib records at ERROR or with a traceback (websockets' 'connection handler failed')."""

    def __init__(self) -> None:
        super().__init__(logging.DEBUG)
        self.records: list[str] = []

    def emit(self, record: logging.LogRecord) -> None:
        if record.levelno >= logging.ERROR or record.exc_info:
            self.records.append(f"{record.name}: {record.getMessage()}")


class LiveNode:
    """A node on its own event loop, and a client per encoding, reconnected after a close."""

    def __init__(self, runner: asyncio.Runner, node: Node) -> None:
        self.runner = runner
        self.node = node
        self.store: Store = node.store
        self.clients: dict[Encoding, ClientConnection | None] = dict.fromkeys(Encoding)
        self.refs = itertools.count()
        self.frames = 0
        self.answers: dict[str, int] = {}
        self.closes: dict[int, int] = {}
        self.started = time.monotonic()

    async def client(self, encoding: Encoding) -> ClientConnection:
        ws = self.clients[encoding]
        if ws is None:
            uri = f"ws://127.0.0.1:{self.node.port}/ws"
            ws = await connect(uri, subprotocols=[Subprotocol(encoding.value)], max_size=None)
            self.clients[encoding] = ws
        return ws

    async def current_round(self) -> int:
        state = await self.store.load_state(TABLE)
        return state.round if state else 0

    async def exchange(self, frames: list[tuple[FrameSpec, Encoding]]) -> None:
        used: set[Encoding] = set()
        round_no = await self.current_round()
        for spec, encoding in frames:
            ws = await self.client(encoding)
            payload, is_text = frames_of(spec, round_no)
            used.add(encoding)
            try:
                await ws.send(payload, text=is_text)
                self.frames += 1
            except ConnectionClosed:
                await self._closed(encoding)
        for encoding in used:
            await self._read_to_pong(encoding)

    async def _read_to_pong(self, encoding: Encoding) -> None:
        ws = self.clients[encoding]
        if ws is None:
            return
        ref = f"sync-{next(self.refs)}"
        try:
            await ws.send(b'{"type":"ping","ref":"%s"}' % ref.encode(), text=True)
            async with asyncio.timeout(10 * SCALE):
                while True:
                    message = self._check(await ws.recv(), encoding)
                    if message["type"] == "pong" and message["ref"] == ref:
                        return
        except ConnectionClosed:
            await self._closed(encoding)

    def _check(self, frame: bytes | str, encoding: Encoding) -> dict[str, Any]:
        """A known server message, in the connection's encoding, with known codes."""
        assert isinstance(frame, bytes if encoding is Encoding.MSGPACK else str)
        message = decode(frame)
        assert isinstance(message, dict) and message.get("type") in SERVER_TYPES, message
        if message["type"] == "error":
            assert message["code"] in set(ErrorCode), message
            assert message["code"] != ErrorCode.INTERNAL, message
        if message["type"] == "bet_rejected":
            assert message["code"] in set(RejectCode), message
        kind = f"{message['type']}:{message.get('code', '')}".rstrip(":")
        self.answers[kind] = self.answers.get(kind, 0) + 1
        return message

    async def _closed(self, encoding: Encoding) -> None:
        ws = self.clients[encoding]
        assert ws is not None
        await ws.wait_closed()
        code = ws.close_code
        assert code in INPUT_CLOSE_CODES, f"closed with {code} {ws.close_reason!r}"
        self.closes[code] = self.closes.get(code, 0) + 1
        self.clients[encoding] = None

    async def close(self) -> None:
        for ws in self.clients.values():
            if ws is not None:
                await ws.close()


@pytest.fixture(scope="module", params=["memory", pytest.param("redis", marks=pytest.mark.redis)])
def live(request: pytest.FixtureRequest) -> Iterator[tuple[LiveNode, list[Any], _Failures]]:
    """A node (with its loop) for the module's examples; its ledger checked at the end."""
    engine: str = request.param
    failures = _Failures()
    logging.getLogger().addHandler(failures)
    prefix = f"fuzz-{uuid.uuid4().hex[:12]}"
    url = request.getfixturevalue("redis_url") if engine == "redis" else ""
    store = None
    if engine == "redis":
        from server.store.redis import RedisStore

        store = RedisStore.from_url(url, key_prefix=prefix)
    with (
        structlog.testing.capture_logs() as events,
        asyncio.Runner(loop_factory=asyncio.new_event_loop) as runner,
    ):
        node = Node(Settings.from_options(**SETTINGS, node_id=f"fuzz-{engine}"), store=store)
        runner.run(node.start())
        live = LiveNode(runner, node)
        try:
            yield live, events, failures
            ledger = runner.run(node.store.ledger())
            assert ledger.balanced, ledger
        finally:
            runner.run(live.close())
            runner.run(node.stop())
            if url:
                runner.run(delete_keys(url, [prefix]))
            logging.getLogger().removeHandler(failures)
            seconds = time.monotonic() - live.started
            print(
                f"\nfuzz {engine}: {live.frames} frames in {seconds:.1f} s; closes {live.closes};"
                f" answers {dict(sorted(live.answers.items()))}"
            )


def _logged_failures(events: list[Any], start: int) -> list[Any]:
    return [
        e for e in events[start:] if e.get("log_level") in ("error", "critical") or "exc_info" in e
    ]


@settings(
    max_examples=EXAMPLES or 100,
    deadline=None,
    suppress_health_check=list(HealthCheck),
)
@given(frames=st.lists(st.tuples(frame_specs(), st.sampled_from(list(Encoding))), max_size=10))
def test_no_frame_breaks_the_node(
    live: tuple[LiveNode, list[Any], _Failures], frames: list[tuple[FrameSpec, Encoding]]
) -> None:
    """Whatever the frames, the node answers with valid messages or closes cleanly, logs no
    error or traceback, and its ledger balances."""
    node, events, failures = live
    logged, records = len(events), len(failures.records)
    node.runner.run(node.exchange(frames))
    assert _logged_failures(events, logged) == []
    assert failures.records[records:] == []
    ledger = node.runner.run(node.store.ledger())
    assert ledger.balanced, ledger
