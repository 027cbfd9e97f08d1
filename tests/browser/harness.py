"""Server nodes, a plain observer client and Chromium's whereabouts for the browser tests.

Chromium is Debian's (`apt-get install chromium`), driven by Playwright for Python (`pip
install playwright`, no `playwright install`: its browser download is not used). Without
either, every test here is skipped with a message saying so; the rest of the suite runs.

The server: two in-process nodes on one memory store in a background thread. `owner` runs the
tables' round loops; `front` serves the page. Stopping and restarting `front` on the same port
is a server restart as the page sees it, while `owner` keeps dealing: the page must catch up
on what it missed, with no gap and no duplicate.
"""

from __future__ import annotations

import asyncio
import contextlib
import json
import os
import random
import shutil
import threading
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

from server.app import Node
from server.config import Settings
from server.core.cards import Card, full_deck
from server.runtime.clock import SystemClock
from server.store.memory import MemoryStore

SCALE = float(os.environ.get("TEST_TIMEOUT_SCALE", "1"))
CLIENT_DIR = Path(__file__).resolve().parents[2] / "client_demo"
CHROMIUM_ARGS = [
    "--headless",
    "--no-sandbox",
    "--disable-gpu",
    "--disable-background-networking",
    "--no-first-run",
    "--disable-component-update",
    "--disable-sync",
]
INSTALL_HINT = (
    "browser tests need Chromium and Playwright for Python: `apt-get install -y chromium` "
    "and `pip install playwright` (or `pip install -e '.[test]'`); set BACCARAT_CHROMIUM to "
    "use another Chromium binary"
)
# Short rounds: about 5 s each (3 s to bet, cards 0.2 s apart).
TIMINGS: dict[str, Any] = {
    "betting_window": 3.0 * SCALE,
    "deal_interval": 0.2,
    "close_pause": 0.2,
    "result_pause": 0.3,
    "next_round_pause": 0.4,
    "lease_ttl": 3.0,
}
TABLES = "t1=classic8,t2=punto6"
# The nodes of one live server share a secret, as a cluster does (a demo node's own random
# secret would make a restarted node refuse the page's stored guest token): guests, anonymous
# spectators and the demo balance stay on, as in demo mode.
SHARED_IDENTITY: dict[str, Any] = {
    "secret": "browser-tests-" + "0" * 32,
    "allow_guests": True,
    "allow_anonymous_spectators": True,
    "initial_balance": 1_000_000,
}
ROUND_SECONDS = 5.0 * SCALE

Message = dict[str, Any]


def within(seconds: float) -> float:
    return seconds * SCALE


def chromium_path() -> str | None:
    """BACCARAT_CHROMIUM if set (only it), else Debian's chromium or one on PATH."""
    chosen = os.environ.get("BACCARAT_CHROMIUM")
    if chosen:
        return chosen if os.access(chosen, os.X_OK) else None
    for candidate in (
        "/usr/bin/chromium",
        shutil.which("chromium"),
        shutil.which("chromium-browser"),
        shutil.which("google-chrome"),
    ):
        if candidate and os.access(candidate, os.X_OK):
            return candidate
    return None


class StackedRandom(random.Random):
    """A random source whose first shuffle deals `top` first (then the rest of the shoe's
    cards in some order), and whose later shuffles are random: Fisher-Yates driven backwards,
    so the server's own shuffle (server/core/shoe.py) stacks the shoe. `top` starts with the
    burn card."""

    def __init__(self, decks: int, top: list[Card], seed: int = 1) -> None:
        super().__init__(seed)
        cards = full_deck() * decks
        rest = list(cards)
        for card in top:
            rest.remove(card)  # ValueError: the shoe does not hold that many of it
        target = top + rest
        self.answers: list[int] = []
        for i in range(len(cards) - 1, 0, -1):  # fisher_yates: j = randrange(i + 1)
            j = cards.index(target[i], 0, i + 1)
            self.answers.append(j)
            cards[i], cards[j] = cards[j], cards[i]
        self.answers.reverse()  # consumed from the end

    def randrange(self, start: int, stop: int | None = None, step: int = 1) -> int:  # type: ignore[override]
        if self.answers and stop is None and step == 1:
            j = self.answers.pop()
            assert j < start, "a shuffle of another shoe size"
            return j
        return super().randrange(start, stop, step)


class LiveServer:
    """Server nodes on a loop of their own, driven from the (synchronous) test thread.
    `rngs` gives tables (by id) a random source of the test's, e.g. a StackedRandom."""

    def __init__(
        self,
        tables: str = TABLES,
        rngs: dict[str, random.Random] | None = None,
        **overrides: Any,
    ) -> None:
        self.overrides = {
            "tables": tables,
            "static_dir": str(CLIENT_DIR),
            **TIMINGS,
            **SHARED_IDENTITY,
            **overrides,
        }
        self.rngs = rngs or {}
        self.loop = asyncio.new_event_loop()
        self.thread = threading.Thread(target=self.loop.run_forever, name="live-server")
        self.thread.start()
        self.store: MemoryStore | None = None
        self.owner: Node | None = None
        self.front: Node | None = None
        self.port = 0

    def call(self, coro: Any, timeout: float = 15.0) -> Any:
        return asyncio.run_coroutine_threadsafe(coro, self.loop).result(within(timeout))

    def settings(self, node_id: str, port: int, **changes: Any) -> Settings:
        return Settings.from_options(port=port, node_id=node_id, **{**self.overrides, **changes})

    def start(self) -> LiveServer:
        async def start() -> None:
            self.store = MemoryStore(SystemClock().now_ms)
            self.owner = Node(self.settings("owner", 0), store=self.store)
            for table_loop in self.owner.loops:
                # TESTS ONLY: the shoe is stacked by a rig, not the committed stream.
                table_loop.rig = self.rngs.get(table_loop.table_id, table_loop.rig)
            await self.owner.start()  # first: its loops take every table's lease

        self.call(start())
        self.start_front()
        return self

    def start_front(self, **changes: Any) -> None:
        """Start (or restart) the page's node; `changes` override its settings, e.g. another
        secret, as a demo node restarted with a new random one."""

        async def start() -> None:
            assert self.store is not None
            self.front = Node(self.settings("front", self.port, **changes), store=self.store)
            await self.front.start()
            self.port = self.front.port

        self.call(start())

    def stop_front(self) -> None:
        if self.front is not None:
            self.call(self.front.stop())
            self.front = None

    def drop_connections(self) -> int:
        """Cut every page's TCP connection from the server side, without a close frame."""

        async def drop() -> int:
            assert self.front is not None
            sessions = list(self.front.ctx.sessions)
            for session in sessions:
                session.ws.transport.abort()
            return len(sessions)

        return int(self.call(drop()))

    @property
    def url(self) -> str:
        return f"http://127.0.0.1:{self.port}/"

    @property
    def ws_url(self) -> str:
        return f"ws://127.0.0.1:{self.port}/ws"

    def close(self) -> None:
        with contextlib.suppress(Exception):
            self.stop_front()
        if self.owner is not None:
            with contextlib.suppress(Exception):
                self.call(self.owner.stop())
        self.loop.call_soon_threadsafe(self.loop.stop)
        self.thread.join(10)
        self.loop.close()


class Observer:
    """A plain WebSocket client (JSON) joined to a table: what the server really sent."""

    def __init__(self, ws_url: str, table: str) -> None:
        from websockets.sync.client import connect

        self.stack = contextlib.ExitStack()
        self.ws = self.stack.enter_context(
            connect(ws_url, subprotocols=["baccarat.v1.json"])  # type: ignore[list-item]
        )
        self.messages: list[Message] = []
        self.cond = threading.Condition()
        self.welcome = json.loads(self.ws.recv(timeout=within(5)))
        self.ws.send(json.dumps({"type": "join", "table": table}))
        self.thread = threading.Thread(target=self._read, name="observer", daemon=True)
        self.thread.start()

    def _read(self) -> None:
        with contextlib.suppress(Exception):
            for frame in self.ws:
                with self.cond:
                    self.messages.append(json.loads(frame))
                    self.cond.notify_all()

    def send(self, message: Message) -> None:
        self.ws.send(json.dumps(message))

    def wait_for(self, match: Callable[[Message], bool], seconds: float = 10.0) -> Message:
        deadline = time.monotonic() + within(seconds)
        with self.cond:
            while True:
                for message in self.messages:
                    if match(message):
                        return message
                left = deadline - time.monotonic()
                assert left > 0, f"no matching message in {seconds} s"
                self.cond.wait(left)

    def events(self, round_no: int, kind: str | None = None) -> list[Message]:
        with self.cond:
            return [
                m
                for m in self.messages
                if m["type"] == "event"
                and m["round"] == round_no
                and (kind is None or m["kind"] == kind)
            ]

    def close(self) -> None:
        self.stack.close()
        self.thread.join(5)
