"""Fan-out: N spectators on one table, on our server and on the two peers, side by side.

For one engine and one N: start the server (pinned to the server core), connect and join N
spectators from this process (the generator, on the other core), then for a window of seconds
count every delivery, and time every arrival of the card events stamped inside the window
(those still arriving when it closes too, for up to FINISH_S). The spectators are
bench/light_ws.py clients, the same for every server: a generator built on the `websockets`
client spent ~20 µs per message and was the limit at 5,000 and 10,000 spectators. Results:

* connect_s: from the first connect to the last `joined`;
* rss_per_conn_kib: the server's RSS growth from before the connections to after the joins,
  per connection;
* latency of each card delivery (arrival minus the event's `ts`), p50 / p99 / max; `ts` is a
  whole ms by the server's clock, so every engine's latency carries the same +0..1 ms;
* first_ms: per card event, its first delivery (how long before the server's first write);
* spread of each card event from its first to its last client, p50 / p99 / max (one clock);
* server_us_per_delivery: server CPU (user + system) in the window / deliveries in it;
* generator_cpu: this process's CPU share in the window (near 100% means the generator, not
  the server, was the limit);
* worker_cores: each serving process's CPU seconds per wall second in the window (one per
  node, or per worker of --workers), redis_cores Redis's, deliveries_per_s;
* gc: our node's collector pauses from the first connect to the window's end (all its
  processes, and each in `processes`), from BACCARAT_GC_STATS (bench/common.py).
"""

from __future__ import annotations

import asyncio
import contextlib
import math
import os
import sys
import time
from collections import defaultdict
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import msgpack
import psutil

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from bench.common import (
    SERVER_CORE,
    CpuMeter,
    Pause,
    ServerProcess,
    baccarat_serve,
    can_pin,
    generator_collector_held,
    pause_summary,
    quantile,
    rss_bytes,
)
from bench.light_ws import LightClient, MessageHandler, light_connect
from tests.redis_server import RedisProcess, start_redis

__all__ = ["ENGINES", "Cadence", "Meters", "Site", "measure_fanout"]

ENGINES = ("memory", "redis", "redis2", "bare", "socketio", "redisw2")
WORKER_CORES = "0,1"  # redisw2: one node of two worker processes, on both cores
TABLE = "t1"
PEERS = str(Path(__file__).resolve().parent / "peers.py")
CONNECT_CONCURRENCY = 500  # handshakes in flight at once
OPEN_TIMEOUT_S = 30.0
FINISH_S = 2.0  # after the window, the most its last events' deliveries are waited for


@dataclass(frozen=True)
class Cadence:
    """The table's rhythm, the same for every engine at one N."""

    betting_window: float = 0.5
    deal_interval: float = 0.1

    @classmethod
    def for_spectators(cls, n: int) -> Cadence:
        # About 40,000 deliveries a second at most, so the server is loaded but not saturated
        # and the latency measured is fan-out, not a queue that grows for the whole window.
        return cls(deal_interval=round(max(0.05, n / 40_000), 3))

    def serve_options(self) -> dict[str, object]:
        x = self.deal_interval
        return {
            "betting_window": self.betting_window,
            "deal_interval": x,
            "close_pause": x,
            "result_pause": x,
            "next_round_pause": x,
        }

    def peer_argv(self) -> list[str]:
        return [f"--{k.replace('_', '-')}={v}" for k, v in self.serve_options().items()]


@dataclass
class Recorder:
    """The deliveries counted while the window is open (`active`), and every arrival of the
    card events stamped inside it (per seq, and each node's first for two nodes), however
    late they come. Timing by stamp, not by arrival: an event stamped before the window
    opened may be half delivered already, and timing only its later arrivals made its first
    write look as late as the broadcast was long (one such event, 25-38 ms at 5,000
    spectators, was a whole run's first-write p99); the last event's broadcast may also end
    after the window closes, and its late arrivals count too."""

    active: bool = False
    since_ms: float = math.inf  # the window, by the same clock as the events' `ts`
    until_ms: float = math.inf
    deliveries: int = 0
    ts: dict[int, int] = field(default_factory=dict)
    arrivals: dict[int, list[float]] = field(default_factory=lambda: defaultdict(list))
    by_node: dict[int, dict[int, float]] = field(default_factory=lambda: defaultdict(dict))

    clients: int = 0  # set at the close: how many connections read events
    # The connections that got an event stamped after the window: each connection gets a
    # table's events in order, so such a connection has had every event stamped inside it.
    past: set[object] = field(default_factory=set)
    finished: asyncio.Event = field(default_factory=asyncio.Event)  # every connection is past

    def open(self) -> None:
        self.since_ms = time.time() * 1000
        self.active = True

    def close(self, clients: int) -> None:
        self.active = False
        self.until_ms = time.time() * 1000
        self.clients = clients

    def seen(self, event: dict[str, Any], node: int, client: object) -> None:
        """One event as `client` (a connection of `node`) read it."""
        now = time.time()
        if self.active:
            self.deliveries += 1
        ts = event.get("ts", -math.inf)  # every event has one; none: not timed
        if ts >= self.until_ms:
            self.past.add(client)
            if len(self.past) >= self.clients:
                self.finished.set()
            return
        if event.get("kind") != "card" or ts < self.since_ms:
            return
        seq = event["seq"]
        self.ts[seq] = ts
        self.arrivals[seq].append(now)
        first = self.by_node[node]
        if seq not in first:
            first[seq] = now


# --- clients of each engine ------------------------------------------------------------------


async def _joined(ws: LightClient) -> LightClient:
    """Join the table and wait for `joined` (ours and the bare peer speak alike)."""
    ws.send(msgpack.packb({"type": "join", "table": TABLE}))
    while msgpack.unpackb(await ws.recv()).get("type") != "joined":
        pass
    return ws


async def _join_project(url: str) -> LightClient:
    async with asyncio.timeout(OPEN_TIMEOUT_S):
        ws = await light_connect(url + "?role=spectator", "baccarat.v1.msgpack")
        await ws.recv()  # welcome
        return await _joined(ws)


async def _join_bare(url: str) -> LightClient:
    async with asyncio.timeout(OPEN_TIMEOUT_S):
        return await _joined(await light_connect(url))


def _sio_url(url: str) -> str:
    return url.replace("/ws", "/socket.io/") + "?EIO=4&transport=websocket"


async def _join_socketio(url: str) -> LightClient:
    """Engine.IO 4 over a WebSocket, socket.io packets in msgpack binary frames."""
    async with asyncio.timeout(OPEN_TIMEOUT_S):
        ws = await light_connect(_sio_url(url))
        opened = await ws.recv()
        assert isinstance(opened, str) and opened.startswith("0"), opened
        ws.send(msgpack.packb({"type": 0, "nsp": "/"}))  # CONNECT
        await ws.recv()  # its CONNECT answer with the sid
        ws.send(msgpack.packb({"type": 2, "nsp": "/", "data": ["join", TABLE]}))
        while True:
            frame = await ws.recv()
            if isinstance(frame, bytes):
                if msgpack.unpackb(frame).get("data", [None])[0] == "joined":
                    return ws
            elif frame == "2":  # engine.io ping
                ws.send("3")


def _reader(ws: LightClient, engine: str, node: int, recorder: Recorder) -> MessageHandler:
    """What one connection does with each message from now on (messages that came before
    are dropped: the recorder is not active yet)."""

    def on_message(frame: bytes | str) -> None:
        if isinstance(frame, str):
            if frame == "2":  # engine.io ping
                ws.send("3")
            return
        message = msgpack.unpackb(frame)
        if engine == "socketio":
            data = message.get("data") or [None]
            if data[0] != "event":
                return
            message = data[1]
        if message.get("type") == "event":
            recorder.seen(message, node, ws)

    return on_message


# --- servers ---------------------------------------------------------------------------------


@dataclass
class Site:
    servers: list[ServerProcess]
    redis: RedisProcess | None = None

    @property
    def pids(self) -> list[int]:
        """The servers' processes and their children (the workers of --workers)."""
        pids = []
        for server in self.servers:
            pids.append(server.pid)
            with contextlib.suppress(psutil.Error):
                pids += [c.pid for c in psutil.Process(server.pid).children(recursive=True)]
        return pids

    def worker_pids(self) -> list[int]:
        """The processes that serve: each server's workers (--workers), or the server."""
        pids = []
        for server in self.servers:
            try:
                children = [c.pid for c in psutil.Process(server.pid).children()]
            except psutil.Error:
                children = []
            pids += children or [server.pid]
        return pids

    def collector(self, since: float, until: float, pids: list[int]) -> dict[str, Any] | None:
        """After stop(): our nodes' collector pauses begun between the two unix times, in all
        and per process (`pids` first, in their order); None for a peer (no stats)."""
        found: dict[int, list[Pause]] = {}
        for server in self.servers:
            found |= server.collector_pauses(since, until)
        if not any(server.gc_stats for server in self.servers):
            return None
        order = [pid for pid in pids if pid in found] + [pid for pid in found if pid not in pids]
        every = [pause for pid in order for pause in found[pid]]
        processes = [{"pid": pid, **pause_summary(found[pid])} for pid in order]
        return {**pause_summary(every), "processes": processes, "missing": len(pids) - len(order)}

    @property
    def redis_pid(self) -> int | None:
        return self.redis.pid if self.redis is not None else None

    async def stop(self) -> None:
        for server in self.servers:
            await server.stop()
        if self.redis is not None:
            self.redis.close()


async def start_site(engine: str, cadence: Cadence) -> Site:
    if engine in ("bare", "socketio"):
        argv = [sys.executable, PEERS, engine, *cadence.peer_argv()]
        return Site([await ServerProcess(engine, argv).start()])
    options = {**cadence.serve_options(), "tables": f"{TABLE}=classic8"}
    if engine == "memory":
        return Site([await baccarat_serve("memory", options).start()])
    redis = start_redis()
    site = Site([], redis)
    if can_pin() and site.redis_pid is not None:
        os.sched_setaffinity(site.redis_pid, {SERVER_CORE})  # Redis on the server core too
    if engine == "redisw2":
        node = baccarat_serve("node", {**options, "workers": 2}, redis.url, cores=WORKER_CORES)
        site.servers.append(await node.start())
        return site
    count = 2 if engine == "redis2" else 1
    for i in range(count):
        node = baccarat_serve(f"node{i}", {**options, "node_id": f"bench-{i}"}, redis.url)
        site.servers.append(await node.start())
    return site


# --- one measurement -------------------------------------------------------------------------


async def _connect_all(engine: str, urls: list[str], n: int) -> tuple[list[Any], float, int]:
    join = {"bare": _join_bare, "socketio": _join_socketio}.get(engine, _join_project)
    gate = asyncio.Semaphore(CONNECT_CONCURRENCY)
    failures = 0

    async def one(i: int) -> tuple[LightClient, int] | None:
        nonlocal failures
        async with gate:
            try:
                return await join(urls[i % len(urls)]), i % len(urls)
            except (OSError, TimeoutError, ConnectionError):
                failures += 1
                return None

    started = time.perf_counter()
    results = await asyncio.gather(*(one(i) for i in range(n)))
    elapsed = time.perf_counter() - started
    return [r for r in results if r is not None], elapsed, failures


def _summary(values: list[float]) -> dict[str, float]:
    values.sort()
    return {
        "p50": round(quantile(values, 0.50), 3),
        "p99": round(quantile(values, 0.99), 3),
        "max": round(values[-1], 3) if values else 0.0,
    }


async def measure_fanout(engine: str, n: int, window_s: float) -> dict[str, Any]:
    with generator_collector_held():
        return await _measure_fanout(engine, n, window_s)


async def _measure_fanout(engine: str, n: int, window_s: float) -> dict[str, Any]:
    cadence = Cadence.for_spectators(n)
    site = await start_site(engine, cadence)
    recorder = Recorder()
    clients: list[Any] = []
    try:
        await asyncio.sleep(1.0)  # let the server settle before its baseline RSS
        rss_before = sum(rss_bytes(pid) for pid in site.pids)
        since = time.time()
        clients, connect_s, failures = await _connect_all(engine, [s.url for s in site.servers], n)
        rss_after = sum(rss_bytes(pid) for pid in site.pids)
        for ws, node in clients:
            ws.inbox = asyncio.Queue()  # what came since the join is not measured
            ws.on_message = _reader(ws, engine, node, recorder)
        await asyncio.sleep(1.0)  # warm-up: every reader is reading
        workers = site.worker_pids()
        meters = Meters.of(site, workers)
        meters.start()
        recorder.open()
        await asyncio.sleep(window_s)
        recorder.close(len(clients))
        meters.stop()
        until = time.time()
        # The window's last events may still be on their way: their arrivals are timed too,
        # until every connection has had an event stamped after the window (one comes every
        # deal interval or pause, at most 0.5 s apart), or FINISH_S.
        with contextlib.suppress(TimeoutError):
            await asyncio.wait_for(recorder.finished.wait(), FINISH_S)
    finally:
        for ws, _ in clients:
            ws.abort()  # no closing handshakes: tearing down is not measured
        await site.stop()
    return _result(engine, n, cadence, recorder, clients, connect_s, failures, window_s) | {
        "rss_per_conn_kib": round((rss_after - rss_before) / max(len(clients), 1) / 1024, 2),
        "server_cpu_s": round(meters.server.cpu, 3),
        "server_us_per_delivery": round(meters.server.cpu / max(recorder.deliveries, 1) * 1e6, 2),
        "redis_cpu_s": round(meters.redis.cpu, 3),
        "deliveries_per_s": round(recorder.deliveries / max(meters.server.wall, 1e-9)),
        **meters.shares(),
        "gc": site.collector(since, until, workers),
    }


@dataclass
class Meters:
    """CPU of a site's serving processes (each), its Redis and the generator, over one span."""

    server: CpuMeter
    redis: CpuMeter
    generator: CpuMeter

    @classmethod
    def of(cls, site: Site, workers: list[int]) -> Meters:
        redis = [site.redis_pid] if site.redis_pid else []
        return cls(CpuMeter(workers), CpuMeter(redis), CpuMeter([os.getpid()]))

    def start(self) -> None:
        for meter in (self.server, self.redis, self.generator):
            meter.start()

    def stop(self) -> None:
        for meter in (self.server, self.redis, self.generator):
            meter.stop()

    def shares(self) -> dict[str, Any]:
        """Cores used: each serving process's, Redis's and the generator's (CPU ÷ wall)."""
        return {
            "worker_cores": self.server.shares(),
            "redis_cores": round(self.redis.cpu / max(self.redis.wall, 1e-9), 3),
            "generator_cpu": round(self.generator.cpu / max(self.generator.wall, 1e-9), 3),
        }


def _result(
    engine: str,
    n: int,
    cadence: Cadence,
    recorder: Recorder,
    clients: list[Any],
    connect_s: float,
    failures: int,
    window_s: float,
) -> dict[str, Any]:
    latency: list[float] = []
    first: list[float] = []
    spread: list[float] = []
    for seq, arrivals in recorder.arrivals.items():
        ts = recorder.ts[seq]
        latency += [t * 1000 - ts for t in arrivals]
        first.append(min(arrivals) * 1000 - ts)
        if len(arrivals) >= 0.99 * len(clients):  # events every client got in the window
            spread.append((max(arrivals) - min(arrivals)) * 1000)
    result: dict[str, Any] = {
        "engine": engine,
        "spectators": n,
        "connected": len(clients),
        "connect_failures": failures,
        "connect_s": round(connect_s, 3),
        "deal_interval_s": cadence.deal_interval,
        "window_s": window_s,
        "card_events": len(recorder.arrivals),
        "deliveries": recorder.deliveries,
        "latency_ms": _summary(latency),
        "first_ms": _summary(first),
        "spread_ms": _summary(spread),
    }
    if engine == "redis2":
        result["second_node_added_ms"] = _second_node(recorder)
    return result


def _second_node(recorder: Recorder) -> dict[str, float]:
    """Per card event, the second node's first delivery minus the first node's."""
    a, b = recorder.by_node.get(0, {}), recorder.by_node.get(1, {})
    return _summary([(b[s] - a[s]) * 1000 for s in a.keys() & b.keys()])
