"""Accepted bets per second and bet acknowledgement latency, end to end over WebSockets.

`clients` player connections (spread over the nodes) each place bets back to back, one in
flight at a time, inside one long betting window, for `seconds`: the most the site takes, and
the latency of a queue kept full (with 100 in flight, p50 is about 100 / the rate). Then, on
the same connections, paced steps: bets offered at a fixed total rate (2,000/s, 4,000/s, ...)
whatever the answers, each step for a few seconds, until the ack p99 passes 5 ms: the highest
rate a site answers within 5 ms at p99 (`best_paced_per_s`). Sites: the bare
acknowledgement server (`bench/peers.py ack`: plain `websockets`, each bet answered with
`bet_accepted`'s shape, the library's limit), the `floor` (our memory node with its bet
handler replaced by that same answer, bench/floor_node.py: what our node costs per bet
outside the handler; closed loop only), the memory engine on one node, the Redis engine
on one node and on two nodes sharing the table (nodes and Redis on the server core, the
generator on the other). Per site: the node's CPU per accepted bet (`node_us_per_bet`, the
closed loop's), and on Redis, Redis's own CPU per bet from `INFO cpu` (`redis_us_per_bet`:
used_cpu_sys + used_cpu_user over the closed loop, divided by the bets accepted in it).
Per site and per paced step, the cores each serving process used (`worker_cores`: one per
node, or per worker of --workers), Redis's (`redis_cores`) and the generator's; and our
node's collector pauses over the whole measurement (`gc`, bench/common.py).
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

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from bench.common import (
    SERVER_CORE,
    ServerProcess,
    baccarat_serve,
    can_pin,
    generator_collector_held,
    quantile,
    redis_cpu_s,
)
from bench.fanout import PEERS, TABLE, WORKER_CORES, Meters, Site
from bench.light_ws import LightClient, light_connect
from tests.redis_server import start_redis

__all__ = ["SITES", "measure_bets"]

SITES = ("bare", "floor", "memory", "redis", "redis2", "redisw2")
FLOOR_NODE = str(Path(__file__).resolve().parent / "floor_node.py")
WINDOW_S = 120.0  # one betting window holds the whole measurement
# The paced steps: offered bets/s from PACED_FIRST up by PACED_STEP, until the ack p99 passes
# ACK_P99_MS (issue 10's target: 15,000/s at p99 <= 5 ms).
ACK_P99_MS = 5.0
PACED_FIRST = 2_000
PACED_STEP = 2_000
PACED_LAST = 20_000
PACED_GRACE_S = 10.0  # a step's answers may come this long after its last send


async def _start(site_name: str) -> Site:
    options: dict[str, object] = {
        "tables": f"{TABLE}=classic8",
        "betting_window": WINDOW_S,
        "initial_balance": 10**12,
        # Off: the per-connection limit (50 bets/s) would cap the site at 50 x clients, and
        # what is measured is how many bets a node takes, not what one client may send.
        "rate_bets": 0,
        # Every connection bets all through one long window: the per-round cap is off too.
        "max_bets_per_round": 1_000_000,
    }
    if site_name == "bare":  # the library's limit: bench/peers.py ack
        return Site([await ServerProcess("ack", [sys.executable, PEERS, "ack"]).start()])
    if site_name == "floor":  # our node, its bet handler replaced by the bare peer's answer
        node = baccarat_serve("floor", options, program=[FLOOR_NODE])
        return Site([await node.start()])
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


async def _redis_cpu_s(site: Site) -> float:
    """Redis's own CPU seconds so far (INFO cpu: used_cpu_sys + used_cpu_user); 0 without."""
    return 0.0 if site.redis is None else await redis_cpu_s(site.redis.url)


async def _player(url: str) -> tuple[LightClient, int, int]:
    """A connection joined to the table: (ws, open round, ms left in its window)."""
    ws = await light_connect(url, "baccarat.v1.msgpack")
    await ws.recv()  # welcome
    ws.send(msgpack.packb({"type": "join", "table": TABLE}))
    while True:
        message = msgpack.unpackb(await ws.recv())
        if message.get("type") == "snapshot" and message.get("phase") == "betting":
            return ws, message["round"], message["time_left_ms"]
        if message.get("type") == "event" and message.get("kind") == "round_opened":
            return ws, message["round"], message["closes_at"] - message["ts"]


async def _bet_loop(
    ws: LightClient,
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
        ws.send(msgpack.packb({**bet, "spot": "player", "amount": 100}))
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


async def _paced_step(
    conns: list[LightClient], round_no: int, rate: float, seconds: float, meters: Meters
) -> dict[str, Any]:
    """`rate` bets a second for `seconds`, the k-th due at k / rate and sent on connection
    k mod n, whatever the answers (an open loop: a server that falls behind does not slow
    the sends, so the bets queued behind a slow one are charged their wait). One pacer sends
    what is due each time it wakes (the loop's timers have a 1 ms grain) and each answer is
    timed from its own bet's send, by a callback on its connection: no task per client."""
    total = max(1, int(seconds * rate))
    sent: dict[str, float] = {}
    acks: list[float] = []
    codes: Counter[str] = Counter()
    answered = 0
    done = asyncio.Event()

    def on_message(frame: bytes | str) -> None:
        nonlocal answered
        message = msgpack.unpackb(frame)
        kind = message.get("type")
        if kind == "bet_accepted":
            acks.append((time.perf_counter() - sent[message["bet_id"]]) * 1000)
            codes["accepted"] += 1
        elif kind in ("bet_rejected", "error"):
            codes[str(message.get("code"))] += 1
        else:
            return
        answered += 1
        if answered >= total:
            done.set()

    for ws in conns:
        ws.on_message = on_message
    step = int(rate)  # the bet ids of one step: the offered rate is unique per step
    meters.start()
    started = time.perf_counter()
    try:
        async with asyncio.timeout(seconds + PACED_GRACE_S):
            first = 0
            while first < total:
                due = min(total, int((time.perf_counter() - started) * rate) + 1)
                for k in range(first, due):
                    bet_id = f"r{step}-{k}"
                    sent[bet_id] = time.perf_counter()
                    bet = {"type": "bet", "table": TABLE, "round": round_no, "bet_id": bet_id}
                    bet |= {"spot": "player", "amount": 100}
                    conns[k % len(conns)].send(msgpack.packb(bet))
                first = due
                await asyncio.sleep(0.001)
            await done.wait()
    finally:
        for ws in conns:
            ws.on_message = None
    elapsed = time.perf_counter() - started
    meters.stop()
    acks.sort()
    return {
        "offered_per_s": round(rate),
        **meters.shares(),
        "accepted_per_s": round(codes["accepted"] / elapsed),
        "ack_ms": {
            "p50": round(quantile(acks, 0.5), 3),
            "p99": round(quantile(acks, 0.99), 3),
            "max": round(acks[-1], 3) if acks else 0.0,
        },
        "rejected": {k: v for k, v in codes.items() if k != "accepted"},
    }


async def _paced(
    conns: list[LightClient], round_no: int, seconds: float, meters: Meters
) -> tuple[list[dict[str, Any]], int]:
    """Offered rates from PACED_FIRST up by PACED_STEP, `seconds` each, until the ack p99
    passes ACK_P99_MS (or the server no longer keeps up); the steps and the highest rate
    taken within it."""
    steps: list[dict[str, Any]] = []
    best = 0
    rate = PACED_FIRST
    retried = False
    while rate <= PACED_LAST:
        try:
            step = await _paced_step(conns, round_no, rate, seconds, meters)
        except TimeoutError:  # answers still missing after the grace: far past the limit
            steps.append({"offered_per_s": rate, "error": "answers missing"})
            break
        step["retry"] = retried
        steps.append(step)
        kept_up = step["accepted_per_s"] >= 0.95 * rate and not step["rejected"]
        if kept_up and step["ack_ms"]["p99"] > ACK_P99_MS and not retried:
            # Kept up but over the p99: one stall of ~15 ms (this machine's, the bare server
            # shows them too) holds every bet in flight and decides a 2 s step alone. Once
            # more at the same rate; a second miss ends the steps.
            retried = True
            continue
        if not kept_up or step["ack_ms"]["p99"] > ACK_P99_MS:
            break
        best, retried = rate, False
        rate += PACED_STEP
    return steps, best


async def measure_bets(
    site_name: str, clients: int, seconds: float, step_seconds: float = 0.0
) -> dict[str, Any]:
    """The closed loop for `seconds` (the most a site takes), then the paced steps of
    `step_seconds` each (none if 0), all in one betting window."""
    with generator_collector_held():
        return await _measure_bets(site_name, clients, seconds, step_seconds)


async def _measure_bets(
    site_name: str, clients: int, seconds: float, step_seconds: float
) -> dict[str, Any]:
    site = await _start(site_name)
    conns: list[tuple[LightClient, int, int]] = []
    try:
        since = time.time()
        urls = [s.url for s in site.servers]
        conns = [await _player(urls[i % len(urls)]) for i in range(clients)]
        round_no = max(c[1] for c in conns)
        left_s = min(c[2] for c in conns if c[1] == round_no) / 1000 - 1.0
        # every step, each maybe run twice (see _paced), and its grace
        paced_s = 2 * (step_seconds + 1) * (PACED_LAST // PACED_STEP) if step_seconds else 0
        if any(c[1] != round_no for c in conns) or left_s < seconds + paced_s:
            raise RuntimeError("the betting window is too short for the measurement")
        acks: list[float] = []
        codes: Counter[str] = Counter()
        workers = site.worker_pids()
        meters = Meters.of(site, workers)
        redis_info_cpu = await _redis_cpu_s(site)
        meters.start()
        until = time.perf_counter() + seconds
        await asyncio.gather(
            *(
                _bet_loop(ws, f"c{i}", round_no, until, acks, codes)
                for i, (ws, _, _) in enumerate(conns)
            )
        )
        meters.stop()
        redis_info_cpu = await _redis_cpu_s(site) - redis_info_cpu
        paced: list[dict[str, Any]] = []
        best = 0
        if step_seconds > 0:
            each = Meters.of(site, workers)  # the closed loop's stay in `meters`
            paced, best = await _paced([ws for ws, _, _ in conns], round_no, step_seconds, each)
        ended = time.time()
    finally:
        for ws, _, _ in conns:
            ws.abort()
        await site.stop()
    return _bets_result(site_name, site, clients, meters, acks, codes, redis_info_cpu) | {
        "paced": paced,
        "best_paced_per_s": best,  # the highest offered rate answered within ACK_P99_MS
        "gc": site.collector(since, ended, workers),
    }


def _bets_result(
    site_name: str,
    site: Site,
    clients: int,
    meters: Meters,
    acks: list[float],
    codes: Counter[str],
    redis_info_cpu: float,
) -> dict[str, Any]:
    """The closed loop's figures (`meters`: its span)."""
    acks.sort()
    accepted = codes["accepted"]
    elapsed = meters.server.wall
    server_cpu = meters.server.cpu
    return {
        "site": site_name,
        "nodes": len(site.servers),
        "clients": clients,
        "seconds": round(elapsed, 3),
        "accepted": accepted,
        "rejected": {k: v for k, v in codes.items() if k != "accepted"},
        "bets_per_s": round(accepted / elapsed, 1),
        "ack_ms": {
            "p50": round(quantile(acks, 0.5), 3),
            "p99": round(quantile(acks, 0.99), 3),
            "max": round(acks[-1], 3) if acks else 0.0,
        },
        "server_cpu": round(server_cpu / elapsed, 3),
        "redis_cpu": round(meters.redis.cpu / max(meters.redis.wall, 1e-9), 3),
        **meters.shares(),
        # CPU per accepted bet in the closed loop: the node's (all its processes), and
        # Redis's own by INFO cpu (none without Redis)
        "node_us_per_bet": round(server_cpu / max(accepted, 1) * 1e6, 2),
        "redis_us_per_bet": (
            round(redis_info_cpu / max(accepted, 1) * 1e6, 2) if site.redis is not None else None
        ),
    }
