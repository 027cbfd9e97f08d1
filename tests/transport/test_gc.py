"""A node and Python's collector: what `baccarat serve` sets up, on a live in-process node.

With `tune_collector` (what `baccarat serve` passes) the node freezes what start-up made and
sets the thresholds; every node reports collector pauses on /metrics; and connections that
close after they were frozen are freed once the freezer thaws (no leak). Behaviour only:
pause lengths are bench/gc_pauses.py's.
"""

from __future__ import annotations

import asyncio
import gc
import weakref
from collections.abc import AsyncIterator, Awaitable, Callable

import pytest

from server.app import Node
from server.config import Settings
from server.runtime import collector
from server.runtime.collector import THRESHOLDS
from tests.transport.conftest import FAST, Client, ClientFactory, within
from tests.transport.test_metrics import _scrape, _value

TunedNode = Callable[[], Awaitable[Node]]


@pytest.fixture
async def tuned_node() -> AsyncIterator[TunedNode]:
    """Nodes as `baccarat serve` makes them (tune_collector), stopped at the end."""
    before = gc.get_threshold()
    nodes: list[Node] = []

    async def start() -> Node:
        node = Node(Settings.from_options(port=0, admin_port=0, **FAST), tune_collector=True)
        await node.start()
        nodes.append(node)
        return node

    try:
        yield start
    finally:
        for node in nodes:
            await node.stop()
        assert gc.get_freeze_count() == 0  # the node gave the collector back
        assert gc.get_threshold() == before


async def test_the_node_freezes_after_start_and_sets_thresholds(tuned_node: TunedNode) -> None:
    await tuned_node()
    assert gc.get_freeze_count() > 0
    assert gc.get_threshold() == THRESHOLDS


async def test_collector_pauses_are_on_metrics(tuned_node: TunedNode) -> None:
    """baccarat_gc_pause_seconds, by generation, counts a forced full collection."""
    node = await tuned_node()
    _, before = await _scrape(node)
    gc.collect()
    types, after = await _scrape(node)
    assert types["baccarat_gc_pause_seconds"] == "histogram"
    name = "baccarat_gc_pause_seconds_count"
    assert _value(after, name, generation="2") >= _value(before, name, generation="2") + 1


async def test_untuned_nodes_leave_the_collector_alone(
    make_node: Callable[..., Awaitable[Node]],
) -> None:
    """A node made without tune_collector (every other test's) freezes nothing."""
    before = gc.get_threshold()
    await make_node()
    assert gc.get_freeze_count() == 0 and gc.get_threshold() == before


async def test_connections_closed_after_a_freeze_are_freed(
    tuned_node: TunedNode, open_client: ClientFactory, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Connections frozen while open and then closed (their objects die in cycles) are freed
    when enough of them have closed: the freezer thaws, collects and freezes again."""
    monkeypatch.setattr(collector, "THAW_MIN_CLOSED", 4)
    node = await tuned_node()
    clients: list[Client] = [await open_client(node) for _ in range(6)]
    for client in clients:
        await client.join()
    assert node.collector.freezer is not None
    gc.collect()  # a full collection: the hook freezes the open connections
    node.collector.freezer.step()
    conns = [weakref.ref(session.ws) for session in node.ctx.sessions]
    assert len(conns) == 6
    for client in clients[:4]:
        await client.ws.close()
    freezer = node.collector.freezer
    async with asyncio.timeout(within()):  # closed, and the keeper's next look thaws
        while len(node.ctx.sessions) > 2 or freezer.thaws == 0:  # noqa: ASYNC110 - polled state
            await asyncio.sleep(0.02)
    gc.collect()
    assert sum(ref() is None for ref in conns) == 4
    assert gc.get_freeze_count() > 0  # frozen again after the thaw
