"""Accepted bets per second and bet acknowledgement latency, end to end over WebSockets.

`clients` player connections (spread over the nodes) each place bets back to back, one in
flight at a time, inside one long betting window, for `seconds`. Sites: the memory engine on
one node, the Redis engine on one node and on two nodes sharing the table (nodes and Redis
on the server core, the generator on the other).
"""

from __future__ import annotations

import asyncio
import os
import sys
import time
from collections import Counter
from pathlib import Path
from typing import Any

import msgpack
from websockets.asyncio.client import ClientConnection, connect
from websockets.typing import Subprotocol

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from bench.common import SERVER_CORE, CpuMeter, baccarat_serve, can_pin, quantile
from bench.fanout import TABLE, WORKER_CORES, Site
from tests.redis_server import start_redis

__all__ = ["SITES", "measure_bets"]

SITES = ("memory", "redis", "redis2", "redisw2")
WINDOW_S = 120.0  # one betting window holds the whole measurement


async def _start(site_name: str) -> Site:
    options: dict[str, object] = {
        "tables": f"{TABLE}=classic8",
        "betting_window": WINDOW_S,
        "initial_balance": 10**12,
        # Off: the per-connection limit (50 bets/s) would cap the site at 50 x clients, and
        # what is measured is how many bets a node takes, not what one client may send.
        "rate_bets": 0,
    }
    if site_name == "memory":
        return Site([await baccarat_serve("memory", options).start()])
    site = Site([], start_redis())
    if can_pin() and site.redis_pid is not None:
        os.sched_setaffinity(site.redis_pid, {SERVER_CORE})
    if site_name == "redisw2":  # one node of two workers, on both cores (WORKER_CORES)
        options = {**options, "workers": 2, "node_id": "bets"}
        node = baccarat_serve("node", options, site.redis.url, cores=WORKER_CORES)  # type: ignore[union-attr]
        site.servers.append(await node.start())
        return site
    for i in range(2 if site_name == "redis2" else 1):
        node = baccarat_serve(f"node{i}", {**options, "node_id": f"bets-{i}"}, site.redis.url)  # type: ignore[union-attr]
        site.servers.append(await node.start())
    return site


async def _player(url: str) -> tuple[ClientConnection, int, int]:
    """A connection joined to the table: (ws, open round, ms left in its window)."""
    ws = await connect(url, subprotocols=[Subprotocol("baccarat.v1.msgpack")], compression=None)
    await ws.recv()  # welcome
    await ws.send(msgpack.packb({"type": "join", "table": TABLE}))
    while True:
        message = msgpack.unpackb(await ws.recv())
        if message.get("type") == "snapshot" and message.get("phase") == "betting":
            return ws, message["round"], message["time_left_ms"]
        if message.get("type") == "event" and message.get("kind") == "round_opened":
            return ws, message["round"], message["closes_at"] - message["ts"]


async def _bet_loop(
    ws: ClientConnection,
    name: str,
    round_no: int,
    until: float,
    acks: list[float],
    codes: Counter[str],
) -> None:
    n = 0
    while time.perf_counter() < until:
        n += 1
        bet = {"type": "bet", "table": TABLE, "round": round_no, "bet_id": f"{name}-{n}"}
        sent = time.perf_counter()
        await ws.send(msgpack.packb({**bet, "spot": "player", "amount": 100}))
        while True:
            message = msgpack.unpackb(await ws.recv())
            kind = message.get("type")
            if kind == "bet_accepted":
                acks.append((time.perf_counter() - sent) * 1000)
                codes["accepted"] += 1
                break
            if kind in ("bet_rejected", "error"):
                codes[str(message.get("code"))] += 1
                break


async def measure_bets(site_name: str, clients: int, seconds: float) -> dict[str, Any]:
    site = await _start(site_name)
    conns: list[tuple[ClientConnection, int, int]] = []
    try:
        urls = [s.url for s in site.servers]
        conns = [await _player(urls[i % len(urls)]) for i in range(clients)]
        round_no = max(c[1] for c in conns)
        left_s = min(c[2] for c in conns if c[1] == round_no) / 1000 - 1.0
        if any(c[1] != round_no for c in conns) or left_s < seconds:
            raise RuntimeError("the betting window is too short for the measurement")
        acks: list[float] = []
        codes: Counter[str] = Counter()
        server_cpu = CpuMeter(site.pids)
        redis_cpu = CpuMeter([site.redis_pid] if site.redis_pid else [])
        generator_cpu = CpuMeter([os.getpid()])
        for meter in (server_cpu, redis_cpu, generator_cpu):
            meter.start()
        until = time.perf_counter() + seconds
        started = time.perf_counter()
        await asyncio.gather(
            *(
                _bet_loop(ws, f"c{i}", round_no, until, acks, codes)
                for i, (ws, _, _) in enumerate(conns)
            )
        )
        elapsed = time.perf_counter() - started
        for meter in (server_cpu, redis_cpu, generator_cpu):
            meter.stop()
    finally:
        for ws, _, _ in conns:
            ws.transport.abort()
        await site.stop()
    acks.sort()
    return {
        "site": site_name,
        "nodes": len(site.servers),
        "clients": clients,
        "seconds": round(elapsed, 3),
        "accepted": codes["accepted"],
        "rejected": {k: v for k, v in codes.items() if k != "accepted"},
        "bets_per_s": round(codes["accepted"] / elapsed, 1),
        "ack_ms": {
            "p50": round(quantile(acks, 0.5), 3),
            "p99": round(quantile(acks, 0.99), 3),
            "max": round(acks[-1], 3) if acks else 0.0,
        },
        "server_cpu": round(server_cpu.cpu / server_cpu.wall, 3),
        "redis_cpu": round(redis_cpu.cpu / max(redis_cpu.wall, 1e-9), 3),
        "generator_cpu": round(generator_cpu.cpu / generator_cpu.wall, 3),
    }
