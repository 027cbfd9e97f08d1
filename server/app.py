"""Composition root: settings -> store -> table loops -> hub -> WebSocket server (and the
admin listener beside it).

The only module that sees concrete engines. `Node` runs one server node in-process (tests
use it directly); `serve_from_args` is `baccarat serve`.
"""

from __future__ import annotations

import argparse
import asyncio
import signal
import sys
from collections import Counter
from pathlib import Path
from typing import Any

import structlog
from aiohttp import web
from websockets.asyncio.server import Server

from server.config import Settings
from server.core.rules import PRESETS, TableRules, rules_preset
from server.logs import configure_logging
from server.metrics import Metrics
from server.runtime.clock import Clock, SystemClock
from server.runtime.collector import NodeCollector, kept_for_stats, tuning_wanted
from server.runtime.outbox import OutboxSender
from server.runtime.table_loop import TableLoop
from server.store.audit import DAY_MS
from server.store.base import Store, StoreRefused, StoreUnavailable
from server.tables_file import TABLE_ID, read_tables_file
from server.transport.admin import AdminRoutes, bound_port, start_admin
from server.transport.http import HttpRoutes
from server.transport.hub import Hub
from server.transport.operator_api import OperatorApi, table_rows
from server.transport.protocol import keep_connected_guests
from server.transport.server import Listen, start_server
from server.transport.session import SessionContext, close_all
from server.transport.wallet_bets import WalletLink
from server.wallet.http_client import HttpWallet
from server.workers import serve_workers

__all__ = [
    "GUEST_SWEEP_INTERVAL",
    "Node",
    "configure_logging",
    "parse_tables",
    "run_node",
    "serve_from_args",
    "tables_of",
]

GUEST_SWEEP_INTERVAL = 5.0  # seconds between two expire_guests calls of a node
READY_CHECK_TIMEOUT_S = 1.0  # /readyz, /status: a store slower than this counts as unreachable
STOP_TIMEOUT_S = 10.0  # after draining, the longest a stop may take before the node quits


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
    options: dict[str, Any] = {
        "history_events": settings.history_events,
        "history_rounds": settings.history_rounds,
        "recall_rounds": settings.recall_rounds,
        "max_bets_per_round": settings.max_bets_per_round,
        "audit_keep_ms": settings.audit_days * DAY_MS,
        "audit_entries": settings.audit_entries,
        "outbox": not settings.wallet.internal,  # an HTTP wallet: credits go to the outbox
    }
    if settings.redis:
        from server.store.redis import RedisStore  # only load redis when asked

        return RedisStore.from_url(settings.redis, **options)
    from server.store.memory import MemoryStore

    return MemoryStore(clock.now_ms, **options)


class Node:
    """One server node: its tables' loops (owned when free), its hub and its server."""

    def __init__(
        self,
        settings: Settings,
        clock: Clock | None = None,
        store: Store | None = None,
        demo_secret: str | None = None,  # demo mode: the secret this node's workers share
        tune_collector: bool = False,  # freeze the heap, set the gc thresholds: the process's
    ) -> None:
        self.settings = settings
        self.clock = clock or SystemClock()
        self.node_id = settings.resolved_node_id()
        self.store = store or make_store(settings, self.clock)
        self.tables = tables_of(settings)
        self.timings = settings.timings
        # Who may connect; in demo mode its secret is this node's own (guest tokens are
        # then good on this node only, until a shared --secret is configured).
        self.auth = settings.auth.policy(demo_secret)
        self.metrics = Metrics()  # this node's own registry: tests run several nodes per process
        self.hub = Hub(self.store, self.metrics, clock=self.clock)
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
        self.wallet, self.outbox = self._operator_wallet()
        self.ctx = self._session_context()
        self.metrics.watch_connections(self._connection_counts)
        self.server: Server | None = None
        self.admin: web.AppRunner | None = None  # the admin listener, unless --no-admin
        self.draining = False
        self.stopped = False
        self._loop_tasks: list[asyncio.Task[None]] = []
        self._sweeper: asyncio.Task[None] | None = None
        self._guest_keeper: asyncio.Task[None] | None = None
        # Pauses to /metrics; `baccarat serve` also tunes the collector, a test's nodes do not.
        self.collector = NodeCollector(self.metrics.gc_paused, self.ctx.sessions, tune_collector)
        self._outbox_task: asyncio.Task[None] | None = None
        self.log = structlog.get_logger("node").bind(node=self.node_id)

    def _operator_wallet(self) -> tuple[WalletLink | None, OutboxSender | None]:
        """With --wallet-url: the operator's wallet, and this node's sender of its outbox."""
        config = self.settings.wallet
        if config.internal:
            return None, None
        wallet = HttpWallet(config.url, config.secret_bytes() or b"", config.currency,
                            config.timeout, observe=self.metrics.wallet_call)  # fmt: skip
        sender = OutboxSender(self.store, wallet, self.node_id, self.clock,
                              timeout_s=config.timeout, retry_hours=config.retry_hours,
                              metrics=self.metrics)  # fmt: skip
        return WalletLink.of(wallet, config.timeout), sender

    def _session_context(self) -> SessionContext:
        """What every session on this node shares."""
        settings = self.settings
        return SessionContext(
            self.store,
            self.hub,
            self.tables,
            self.node_id,
            initial_balance=settings.resolved_initial_balance(),
            max_buffer_bytes=settings.max_buffer_bytes,
            limits=settings.limits,
            max_replay_events=settings.max_replay_events,
            metrics=self.metrics,
            auth=self.auth,
            max_connections_per_player=settings.max_connections_per_player,
            wallet=self.wallet,
        )

    @property
    def port(self) -> int:
        assert self.server is not None
        port: int = next(iter(self.server.sockets)).getsockname()[1]
        return port

    @property
    def admin_port(self) -> int | None:
        """The admin listener's port; None with --no-admin."""
        return bound_port(self.admin) if self.admin is not None else None

    async def start(self) -> None:
        for table_id, rules in self.tables.items():
            await self.store.create_table(table_id, rules)
        static = Path(self.settings.static_dir)
        static_dir = static if static.is_dir() else None  # noqa: ASYNC240 - once at start-up
        self.serves_pages = static_dir is not None
        routes = HttpRoutes(
            static_dir, self.readiness, lobby=self.lobby, draining=lambda: self.draining
        )
        listen = Listen(
            self.settings.host,
            self.settings.port,
            max_frame_bytes=self.settings.max_frame_bytes,
            handshake_timeout=self.settings.handshake_timeout,
            max_connections_per_ip=self.settings.max_connections_per_ip,
            origins=tuple(self.settings.origins()),
            reuse_port=self.settings.workers > 1,  # the other workers bind this port too
        )
        if self.settings.admin.enabled:
            self.admin = await self._start_admin()
        try:
            self.server = await start_server(self.ctx, listen, routes)
        except BaseException:
            if self.admin is not None:
                await self.admin.cleanup()
            raise
        # Loops start once the ports are bound: a node that cannot serve never takes a table.
        self._loop_tasks = [asyncio.create_task(loop.run()) for loop in self.loops]
        self._sweeper = asyncio.create_task(self._sweep_guests())
        self._guest_keeper = asyncio.create_task(keep_connected_guests(self.ctx, self.clock.sleep))
        self.collector.start(self.clock.sleep)  # start-up is done: what it made is frozen
        if self.outbox is not None:
            self._outbox_task = asyncio.create_task(self.outbox.run())
        engine = "redis" if self.settings.redis else "memory"
        self.log.info(
            "listening",
            host=self.settings.host,
            port=self.port,
            admin_host=self.settings.admin.host if self.admin is not None else None,
            admin_port=self.admin_port,
            engine=engine,
            tables=list(self.tables),
        )

    async def _start_admin(self) -> web.AppRunner:
        api = OperatorApi(
            self.auth,
            self.store,
            self.table_rows,
            self.wake_table,
            self.metrics,
            body_timeout=self.settings.handshake_timeout,  # a body is bounded like a handshake
            wallet_external=not self.settings.wallet.internal,
        )
        routes = AdminRoutes(
            self.status,
            self.metrics.render,
            api,
            status_needs_operator=not self.auth.demo,  # demo mode: /status stays open
        )
        return await start_admin(
            routes,
            self.settings.admin.host,
            self.settings.resolved_admin_port(),
            reuse_port=self.settings.workers > 1,  # the other workers bind this port too
        )

    async def readiness(self) -> str | None:
        """None when this node should get clients; else why not (for /readyz)."""
        if self.draining:
            return "draining"
        try:
            async with asyncio.timeout(READY_CHECK_TIMEOUT_S):
                await self.store.now_ms()
        except (StoreUnavailable, TimeoutError, OSError):
            return "store unreachable"
        return None

    def begin_drain(self) -> None:
        """Say not ready (/readyz 503) while still serving everything as before."""
        if not self.draining:
            self.draining = True
            self.log.info("draining", seconds=self.settings.drain_seconds)

    async def drain_and_stop(self, interrupt: asyncio.Event | None = None) -> None:
        """Drain for `drain_seconds` (or until `interrupt` is set), then stop: a load
        balancer polling /readyz stops sending clients before they are closed with 1001.
        The log says what happens: an interrupt already set (SIGINT) skips the drain, one
        set during it (a second SIGTERM) cuts it short."""
        interrupt = interrupt or asyncio.Event()
        if interrupt.is_set():
            self.draining = True
            self.log.info("stopping_now", drain="skipped")
        else:
            self.begin_drain()
            started = asyncio.get_running_loop().time()
            try:
                await asyncio.wait_for(interrupt.wait(), self.settings.drain_seconds)
            except TimeoutError:
                pass
            else:
                waited = round(asyncio.get_running_loop().time() - started, 3)
                self.log.info("drain_cut_short", seconds=waited)
        await self.stop()

    async def _sweep_guests(self) -> None:
        """Forget guests that stayed away (any node may sweep; the store makes it safe)."""
        while True:
            await self.clock.sleep(GUEST_SWEEP_INTERVAL)
            try:
                removed = await self.store.expire_guests()
            except StoreUnavailable as error:
                self.log.warning("guest_sweep_failed", error=str(error))
            except Exception:  # a bug must not stop the sweeps for good
                self.log.exception("guest_sweep_failed")
            else:
                if removed:
                    self.log.info("guests_expired", count=removed)

    def _connection_counts(self) -> Counter[tuple[str, str]]:
        return Counter((s.role, s.encoding.name.lower()) for s in self.ctx.sessions)

    def wake_table(self, table_id: str) -> None:
        """An operator paused or resumed a table: its loop looks now if this node owns it."""
        for loop in self.loops:
            if loop.table_id == table_id:
                loop.wake()

    async def table_rows(self) -> list[dict[str, Any]]:
        """GET /api/tables: every table's state, owner and counts."""
        return await table_rows(self.store, self.hub.subscriber_counts())

    def lobby(self) -> dict[str, Any]:
        """GET /lobby, open to all: how many connections of this node watch each table, and
        whether a connection without a token may come in as a guest (the page offers "another
        tab as a new guest" only then)."""
        return {
            "node": self.node_id,
            "subscribers": self.hub.subscriber_counts(),
            "guests": self.auth.guests_allowed,
        }

    async def status(self) -> dict[str, Any]:
        """GET /status. While the store does not answer, what this node knows without it (the
        tables it last held, with no lease expiry; nothing about pauses) and an `error`: the
        route answers that with 503, not a traceback per call."""
        report: dict[str, Any] = {
            "node": self.node_id,
            "engine": "redis" if self.settings.redis else "memory",
            "owned": [],
            "following": sorted(self.hub.feeds),
            "connections": len(self.ctx.sessions),
            "subscribers": self.hub.subscriber_counts(),
            "draining": self.draining,
        }
        try:
            async with asyncio.timeout(READY_CHECK_TIMEOUT_S):
                report["owned"] = [
                    {"table": table_id, "token": token, "lease_expires_at": expires}
                    for table_id, token, expires in await self._owned()
                ]
                report["paused"] = [t for t in self.tables if await self.store.paused(t)]
        except (StoreUnavailable, TimeoutError, OSError):
            report["owned"] = [
                {"table": loop.table_id, "token": loop.token, "lease_expires_at": None}
                for loop in self.loops
                if loop.token is not None
            ]
            report["error"] = "storage is unavailable"
        return report

    async def _owned(self) -> list[tuple[str, int, int | None]]:
        """The tables this node's loops hold: id, lease token and the lease's expiry."""
        owned = []
        for loop in self.loops:
            if loop.token is not None:
                lease = await self.store.lease(loop.table_id)
                owned.append((loop.table_id, loop.token, lease.expires_at_ms if lease else None))
        return owned

    async def stop(self) -> None:
        """Graceful stop: hand the tables over, close clients, then the store. Once."""
        if self.stopped:
            return
        self.stopped = self.draining = True
        helpers = (self._sweeper, self._guest_keeper, self._outbox_task)
        tasks = [*self._loop_tasks, *(t for t in helpers if t)]
        for task in tasks:
            task.cancel()
        await asyncio.gather(*tasks, return_exceptions=True)
        for loop in self.loops:
            await loop.release()
        if self.server is not None:
            self.server.close(close_connections=False)
            await close_all(self.ctx, 1001, "server shutting down")
            await self.server.wait_closed()
        if self.admin is not None:
            await self.admin.cleanup()
        await self.hub.close()
        if self.wallet is not None:
            await self.wallet.wallet.close()
        await self.store.close()
        await self.collector.stop()
        self.log.info("stopped")

    async def __aenter__(self) -> Node:
        await self.start()
        return self

    async def __aexit__(self, *exc: object) -> None:
        await self.stop()


class StopTimedOut(Exception):
    """The node's stop outlasted STOP_TIMEOUT_S after its drain."""


async def _serve(settings: Settings, demo_secret: str | None) -> None:
    node = Node(settings, demo_secret=demo_secret, tune_collector=tuning_wanted())
    await node.start()
    # SIGTERM (an orchestrator) drains first; SIGINT (Ctrl-C), or a second SIGTERM, stops now.
    term, now = asyncio.Event(), asyncio.Event()

    def on_term() -> None:
        (now if term.is_set() else term).set()

    def on_int() -> None:
        term.set()
        now.set()

    loop = asyncio.get_running_loop()
    loop.add_signal_handler(signal.SIGTERM, on_term)
    loop.add_signal_handler(signal.SIGINT, on_int)
    print(f"baccarat: serving on ws://{settings.host}:{node.port}/ws", file=sys.stderr, flush=True)
    if node.serves_pages:  # the address a newcomer opens (the ws:// one answers a browser 426)
        print(f"baccarat: play at http://{settings.host}:{node.port}/", file=sys.stderr, flush=True)
    if node.admin_port is not None:
        print(
            f"baccarat: admin on http://{settings.admin.host}:{node.admin_port}/ "
            "(/metrics, /status, /api/)",
            file=sys.stderr,
            flush=True,
        )
    await term.wait()
    try:
        # A stop that never ends (a store call that never answers) must not keep a stopped
        # node, or a worker its parent gave up on, alive: it is logged and the node quits.
        async with asyncio.timeout(settings.drain_seconds + STOP_TIMEOUT_S):
            await node.drain_and_stop(interrupt=now)
    except TimeoutError:
        node.log.error("stop_timed_out", seconds=settings.drain_seconds + STOP_TIMEOUT_S)
        raise StopTimedOut from None


def serve_from_args(args: argparse.Namespace) -> int:
    """Run `baccarat serve`; a bad setting raises ValueError before anything starts."""
    settings = Settings.from_args(args)
    tables_of(settings)  # a bad table list or file stops here, in one line
    settings.resolved_admin_port()  # and so does an admin port that cannot be
    if settings.workers > 1:
        return serve_workers(settings, run_node)  # each worker process calls run_node
    return run_node(settings)


def run_node(settings: Settings, demo_secret: str | None = None) -> int:
    """Run one node in this process until it stops; the exit status. `demo_secret`: in demo
    mode, the secret the worker processes of one node share (a guest's token is good on each)."""
    configure_logging(settings.log_format, settings.log_level)
    try:
        import uvloop  # optional on platforms without it
    except ImportError:
        runner = asyncio.run
    else:
        runner = uvloop.run
    try:
        with kept_for_stats():  # BACCARAT_GC_STATS=path: every collector pause, at the stop
            runner(_serve(settings, demo_secret))
    except StopTimedOut:
        return 1
    except StoreRefused as error:  # a setting only the store can judge: a usage error
        print(f"baccarat serve: cannot start: {error}", file=sys.stderr)
        return 2
    except (OSError, StoreUnavailable) as error:  # port taken, bad host, Redis down at start
        print(f"baccarat serve: cannot start: {error}", file=sys.stderr)
        return 1
    return 0
