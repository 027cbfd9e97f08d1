"""bench/common.py's servers write their collector pauses: every process of a node (each
worker of --workers) its own file, read at the stop, and a run counts only its own span."""

from __future__ import annotations

import time
import uuid

from bench.common import ServerProcess, baccarat_serve


async def _started_and_stopped(
    options: dict[str, object], redis: str = ""
) -> tuple[ServerProcess, float]:
    node = baccarat_serve("gc-stats", options, redis)
    assert node.gc_stats is not None and node.gc_stats.is_dir()
    await node.start()
    since = time.time()
    await node.stop()
    return node, since


async def test_a_node_writes_its_pauses_and_a_run_counts_only_its_span() -> None:
    node, since = await _started_and_stopped({"tables": "t1=classic8"})
    assert list(node.pauses) == [node.pid]  # one process, one file
    pauses = node.pauses[node.pid]
    # `baccarat serve` tunes the collector: one full collection at start, before it serves
    assert any(generation == 2 and at < since for generation, at, _, _ in pauses)
    counted = node.collector_pauses(since, time.time())[node.pid]
    assert all(at - seconds >= since for _, at, seconds, _ in counted)
    assert len(counted) < len(pauses)
    assert node.gc_stats is not None and not node.gc_stats.exists()  # read, then removed


async def test_each_worker_writes_its_own_pauses(redis_url: str) -> None:
    table = f"gc{uuid.uuid4().hex[:8]}"
    options = {"tables": f"{table}=classic8", "workers": 2, "node_id": table}
    node, _ = await _started_and_stopped(options, redis_url)
    assert len(node.pauses) == 2 and node.pid not in node.pauses  # the workers, not the parent
    assert all(pauses for pauses in node.pauses.values())
