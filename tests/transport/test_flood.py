"""A flood from some connections does not delay the others (issue 7, rate limits).

Flooders run in another process (their client work must not share this event loop) and send
frames as fast as the node takes them, with the rate limits off so only the node's fairness
protects the others: each connection's handler yields to the loop after every frame. A quiet
client's pings must stay within tens of milliseconds. A behaviour test, not a benchmark:
bounded counts, and a generous bound.
"""

from __future__ import annotations

import asyncio
import json
import sys
import time

from server.app import Node
from tests.transport.conftest import ClientFactory, NodeFactory, ServerLog, within

FLOODERS = 4
MAX_FRAMES = 50_000  # per flooding connection; the test stops them sooner
PINGS = 100


async def _start_flooders(node: Node) -> asyncio.subprocess.Process:
    proc = await asyncio.create_subprocess_exec(
        sys.executable,
        "-m",
        "tests.transport.flooder",
        str(node.port),
        str(FLOODERS),
        str(MAX_FRAMES),
        stdin=asyncio.subprocess.PIPE,
        stdout=asyncio.subprocess.PIPE,
    )
    assert proc.stdout is not None
    line = await asyncio.wait_for(proc.stdout.readline(), within(15))
    assert line == b"flooding\n"
    return proc


async def _stop(proc: asyncio.subprocess.Process) -> dict[str, int]:
    assert proc.stdin is not None and proc.stdout is not None
    proc.stdin.close()
    out = await asyncio.wait_for(proc.stdout.read(), within(15))
    await asyncio.wait_for(proc.wait(), within(5))
    totals: dict[str, int] = json.loads(out)
    return totals


async def test_a_quiet_clients_pings_stay_fast_while_others_flood(
    server_log: ServerLog, make_node: NodeFactory, open_client: ClientFactory
) -> None:
    """With 4 connections flooding (limits off), 100 pings from a quiet client: p99 < 100 ms."""
    node = await make_node(rate_bets=0, rate_pings=0, rate_joins=0, rate_replays=0, max_refusals=0)
    quiet = await open_client(node)
    flooders = await _start_flooders(node)
    try:
        rtts_ms = []
        for n in range(PINGS):
            start = time.perf_counter()
            await quiet.ping(n)
            rtts_ms.append((time.perf_counter() - start) * 1000)
    finally:
        totals = await _stop(flooders)
    rtts_ms.sort()
    p99 = rtts_ms[int(len(rtts_ms) * 0.99) - 1]
    assert totals["sent"] < FLOODERS * MAX_FRAMES, totals  # still flooding after the pings
    assert p99 < within(0.1) * 1000, (p99, rtts_ms[-5:], totals)
    assert server_log.failures() == []
