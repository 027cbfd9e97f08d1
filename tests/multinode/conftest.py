"""Fixtures for tests that run several `baccarat serve` processes on one real Redis."""

from __future__ import annotations

from collections.abc import AsyncIterator, Awaitable, Callable, Iterator

import pytest

from tests.multinode.nodes import NodeProcess
from tests.redis_server import RedisProcess, start_redis

StartNode = Callable[..., Awaitable[NodeProcess]]


@pytest.fixture
def redis_server() -> Iterator[RedisProcess]:
    """A redis-server of this test's own (it may be killed and restarted), with an
    append-only file fsynced on every write, so a restart keeps every table and balance."""
    with start_redis(None, "--appendonly", "yes", "--appendfsync", "always") as server:
        yield server


@pytest.fixture
async def start_node(
    redis_server: RedisProcess, request: pytest.FixtureRequest
) -> AsyncIterator[StartNode]:
    """Start nodes on the test's Redis; all are stopped after the test, logs shown on failure."""
    started: list[NodeProcess] = []

    async def start(node_id: str, **options: str) -> NodeProcess:
        node = await NodeProcess(redis_server.url, node_id, **options).start()
        started.append(node)
        return node

    yield start
    for node in started:
        await node.stop()
    report = getattr(request.node, "rep_call", None)
    if report is not None and report.failed:
        for node in started:
            print(f"----- {node.node_id} -----\n" + "".join(node.log[-60:]))


@pytest.hookimpl(tryfirst=True, hookwrapper=True)
def pytest_runtest_makereport(item: pytest.Item, call: pytest.CallInfo[None]) -> Iterator[None]:
    outcome = yield
    report = outcome.get_result()  # type: ignore[attr-defined]
    setattr(item, "rep_" + report.when, report)
