"""Composition root: settings -> store -> table loops -> hub -> WebSocket server.

The only module that sees concrete engines. `Node` runs one server node in-process (tests
use it directly); `serve_from_args` is `baccarat serve`.
"""

from __future__ import annotations

import argparse
import asyncio
import logging
import signal
import sys
from collections import Counter
from pathlib import Path
from typing import Any

import structlog
from websockets.asyncio.server import Server

from server.config import Settings
from server.core.rules import PRESETS, TableRules, rules_preset
from server.metrics import Metrics
from server.runtime.clock import Clock, SystemClock
from server.runtime.table_loop import TableLoop, Timings
from server.store.base import Store, StoreUnavailable
from server.tables_file import TABLE_ID, read_tables_file
from server.transport.http import HttpRoutes
from server.transport.hub import Hub
from server.transport.server import start_server
from server.transport.session import SessionContext, close_all, push_settlement

__all__ = ["Node", "configure_logging", "parse_tables", "serve_from_args", "tables_of"]


def parse_tables(spec: str) -> dict[str, TableRules]:
    """'id=preset,...' or 'preset,...'; empty means one table per preset, named after it."""
    if not spec.strip():
        return dict(PRESETS)
    tables: dict[str, TableRules] = {}
    for item in filter(None, (part.strip() for part in spec.split(","))):
        table_id, _, preset = (part.strip() for part in item.partition("="))
        if not TABLE_ID.fullmatch(table_id):
            raise ValueError(f"table id {table_id!r}: use 1-64 letters, digits, '.', '_' or '-'")
        if table_id in tables:
            raise ValueError(f"table id {table_id!r} is given twice")
        tables[table_id] = rules_preset(preset or table_id)
    if not tables:
        raise ValueError(f"no tables in {spec!r}")
    return tables


def tables_of(settings: Settings) -> dict[str, TableRules]:
    """The node's tables: from --tables-file when given (then --tables must be empty)."""
    if not settings.tables_file:
        return parse_tables(settings.tables)
    if settings.tables.strip():
        raise ValueError("give --tables or --tables-file, not both")
    return read_tables_file(settings.tables_file)


def make_store(settings: Settings, clock: Clock) -> Store:
    if settings.redis:
        from server.store.redis import RedisStore  # only load redis when asked

        return RedisStore.from_url(
            settings.redis,
            history_events=settings.history_events,
            history_rounds=settings.history_rounds,
        )
    from server.store.memory import MemoryStore

    return MemoryStore(
        clock.now_ms,
        history_events=settings.history_events,
        history_rounds=settings.history_rounds,
    )


class Node:
    """One server node: its tables' loops (owned when free), its hub and its server."""

    def __init__(
        self, settings: Settings, clock: Clock | None = None, store: Store | None = None
    ) -> None:
        self.settings = settings
        self.clock = clock or SystemClock()
        self.node_id = settings.resolved_node_id()
        self.store = store or make_store(settings, self.clock)
        self.tables = tables_of(settings)
        self.timings = Timings(
            betting_window=settings.betting_window,
            deal_interval=settings.deal_interval,
            close_pause=settings.close_pause,
            result_pause=settings.result_pause,
            next_round_pause=settings.next_round_pause,
            lease_ttl=settings.lease_ttl,
        )
        self.metrics = Metrics()  # this node's own registry: tests run several nodes per process
        self.hub = Hub(self.store, push_settlement, self.metrics)
        self.loops = [
            TableLoop(
                self.store,
                table_id,
                rules,
                self.node_id,
                self.clock,
                self.timings,
                on_commit=self.hub.offer,
                metrics=self.metrics,
            )
            for table_id, rules in self.tables.items()
        ]
        self.ctx = SessionContext(
            self.store,
            self.hub,
            self.tables,
            self.node_id,
            demo_balance=settings.demo_balance,
            max_buffer_bytes=settings.max_buffer_bytes,
            metrics=self.metrics,
        )
        self.metrics.watch_connections(self._connection_counts)
        self.server: Server | None = None
        self.draining = False
        self._loop_tasks: list[asyncio.Task[None]] = []
        self.log = structlog.get_logger("node").bind(node=self.node_id)

    @property
    def port(self) -> int:
        assert self.server is not None
        port: int = next(iter(self.server.sockets)).getsockname()[1]
        return port

    async def start(self) -> None:
        for table_id, rules in self.tables.items():
            await self.store.create_table(table_id, rules)
        static = Path(self.settings.static_dir)
        static_dir = static if static.is_dir() else None  # noqa: ASYNC240 - once at start-up
        routes = HttpRoutes(self.status, static_dir, self._healthy, self.metrics.render)
        self.server = await start_server(
            self.ctx, self.settings.host, self.settings.port, routes, self.settings.max_frame_bytes
        )
        # Loops start once the port is bound: a node that cannot serve never takes a table.
        self._loop_tasks = [asyncio.create_task(loop.run()) for loop in self.loops]
        engine = "redis" if self.settings.redis else "memory"
        self.log.info(
            "listening",
            host=self.settings.host,
            port=self.port,
            engine=engine,
            tables=list(self.tables),
        )

    def _healthy(self) -> bool:
        return not self.draining

    def _connection_counts(self) -> Counter[tuple[str, str]]:
        # Every connection is a guest player until issue 8 brings roles.
        return Counter(("player", s.encoding.name.lower()) for s in self.ctx.sessions)

    async def status(self) -> dict[str, Any]:
        owned = []
        for loop in self.loops:
            if loop.token is not None:
                lease = await self.store.lease(loop.table_id)
                owned.append(
                    {
                        "table": loop.table_id,
                        "token": loop.token,
                        "lease_expires_at": lease.expires_at_ms if lease else None,
                    }
                )
        return {
            "node": self.node_id,
            "engine": "redis" if self.settings.redis else "memory",
            "owned": owned,
            "following": sorted(self.hub.feeds),
            "connections": len(self.ctx.sessions),
            "subscribers": {t: f.subscriber_count for t, f in self.hub.feeds.items()},
            "draining": self.draining,
        }

    async def stop(self) -> None:
        """Graceful stop: hand the tables over, close clients, then the store."""
        self.draining = True
        for task in self._loop_tasks:
            task.cancel()
        await asyncio.gather(*self._loop_tasks, return_exceptions=True)
        for loop in self.loops:
            await loop.release()
        if self.server is not None:
            self.server.close(close_connections=False)
            await close_all(self.ctx, 1001, "server shutting down")
            await self.server.wait_closed()
        await self.hub.close()
        await self.store.close()
        self.log.info("stopped")

    async def __aenter__(self) -> Node:
        await self.start()
        return self

    async def __aexit__(self, *exc: object) -> None:
        await self.stop()


def configure_logging(log_format: str, level: str) -> None:
    """structlog with JSON lines, or readable lines on a terminal."""
    as_json = log_format == "json" or (log_format == "auto" and not sys.stderr.isatty())
    renderer: Any = (
        structlog.processors.JSONRenderer() if as_json else structlog.dev.ConsoleRenderer()
    )
    structlog.configure(
        processors=[
            structlog.contextvars.merge_contextvars,
            structlog.processors.add_log_level,
            structlog.processors.TimeStamper(fmt="iso"),
            structlog.processors.format_exc_info,
            renderer,
        ],
        wrapper_class=structlog.make_filtering_bound_logger(
            logging.getLevelNamesMapping()[level.upper()]
        ),
        logger_factory=structlog.PrintLoggerFactory(sys.stderr),
        cache_logger_on_first_use=True,
    )


async def _serve(settings: Settings) -> None:
    node = Node(settings)
    await node.start()
    stop = asyncio.Event()
    loop = asyncio.get_running_loop()
    for sig in (signal.SIGINT, signal.SIGTERM):
        loop.add_signal_handler(sig, stop.set)
    print(f"baccarat: serving on ws://{settings.host}:{node.port}/ws", file=sys.stderr, flush=True)
    await stop.wait()
    await node.stop()


def serve_from_args(args: argparse.Namespace) -> int:
    """Run `baccarat serve`; a bad setting raises ValueError before anything starts."""
    settings = Settings.from_args(args)
    tables_of(settings)  # a bad table list or file stops here, in one line
    configure_logging(settings.log_format, settings.log_level)
    try:
        import uvloop  # optional on platforms without it
    except ImportError:
        runner = asyncio.run
    else:
        runner = uvloop.run
    try:
        runner(_serve(settings))
    except (OSError, StoreUnavailable) as error:  # port taken, bad host, Redis down at start
        print(f"baccarat serve: cannot start: {error}", file=sys.stderr)
        return 1
    return 0
