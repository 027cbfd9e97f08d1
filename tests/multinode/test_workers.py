"""`baccarat serve --workers 2`: two processes on one port, both serving, stopped together."""

from __future__ import annotations

import asyncio
import contextlib
import json
import os
import signal
import socket

import pytest

from server.cli import main
from tests.multinode.conftest import StartNode
from tests.multinode.nodes import Client

TABLE = "t1"


@pytest.mark.redis
@pytest.mark.slow
async def test_two_workers_serve_one_port_without_a_gap_and_stop_together(
    start_node: StartNode,
) -> None:
    node = await start_node("w", **{"--workers": "2"})
    async with contextlib.AsyncExitStack() as stack:
        by_worker: dict[str, Client] = {}
        for _ in range(64):  # the kernel spreads connections over the workers by hash
            client = await stack.enter_async_context(Client.connect(node.url))
            by_worker.setdefault(client.welcome["node"], client)
            if len(by_worker) == 2:
                break
        assert sorted(by_worker) == ["w-0", "w-1"]  # each worker is a node of its own
        # They share the admin port as well: each answers /status (and /metrics) for itself.
        answered: set[str] = set()
        for _ in range(64):
            answered.add((await node.status())["node"])
            if len(answered) == 2:
                break
        assert answered == {"w-0", "w-1"}
        # Demo mode: the workers share one secret, so a guest's token is good on either.
        guest = by_worker["w-0"].welcome
        for _ in range(64):
            again = await stack.enter_async_context(
                Client.connect(f"{node.url}?token={guest['token']}")
            )
            if again.welcome["node"] == "w-1":
                break
        assert again.welcome["node"] == "w-1"
        assert again.welcome["player"] == guest["player"]
        assert again.welcome["balance"] == guest["balance"]
        for client in by_worker.values():
            await client.send(type="join", table=TABLE)
            snapshot = await client.next("snapshot")
            # A whole round from wherever it joined, every seq once, in order.
            await client.next("event", wait=20, kind="round_opened")
            await client.next("event", wait=20, kind="round_settled")
            seqs = [e["seq"] for e in client.events()]
            assert seqs == list(range(snapshot["seq"] + 1, seqs[-1] + 1))
    assert await node.stop() == 0  # SIGTERM to the parent: it is passed on to both workers
    stopped = [json.loads(line) for line in node.log if '"stopped"' in line]
    assert sorted(entry["node"] for entry in stopped) == ["w-0", "w-1"]
    for port in (node.port, node.admin_port):
        with pytest.raises(OSError), socket.create_connection(("127.0.0.1", port), timeout=2):
            pass  # nobody listens any more


def _children(pid: int) -> list[int]:
    with open(f"/proc/{pid}/task/{pid}/children") as f:
        return [int(child) for child in f.read().split()]


@pytest.mark.redis
@pytest.mark.slow
async def test_a_worker_that_dies_stops_the_node(start_node: StartNode) -> None:
    """No half node: when one worker dies the parent stops the other and exits non-zero."""
    node = await start_node("w", **{"--workers": "2"})
    assert node.proc is not None
    await node.wait_for_log('"node": "w-1"')  # both workers have logged: both are running
    await node.wait_for_log('"node": "w-0"')
    workers = _children(node.proc.pid)
    assert len(workers) == 2
    os.kill(workers[0], signal.SIGKILL)
    async with asyncio.timeout(20):
        code = await node.proc.wait()
    assert code != 0
    assert not any(_alive(pid) for pid in workers)  # the parent reaped both


def _alive(pid: int) -> bool:
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    return True


def test_workers_need_the_redis_engine(capsys: pytest.CaptureFixture[str]) -> None:
    assert main(["serve", "--workers", "2", "--port", "0"]) == 2
    err = capsys.readouterr().err.strip()
    assert err == (
        "baccarat serve: --workers 2 needs --redis: "
        "the memory engine cannot share tables between processes"
    )
