"""The history's epoch over real WebSockets: on snapshot and joined, in join, and the
resync every joined client gets when the history goes back (memory engine)."""

from __future__ import annotations

import asyncio

import pytest

from server.app import Node
from server.store.base import StoreUnavailable
from server.store.memory import MemoryStore
from tests.transport.conftest import TABLE, Client, ClientFactory, Message, within
from tests.transport.history import resynced, rewind


async def _joined(client: Client, **join: object) -> tuple[list[Message], Message]:
    """Join; every message up to and including `joined`."""
    await client.send({"type": "join", "table": TABLE, **join})
    seen: list[Message] = []
    while True:
        message = await client.recv()
        seen.append(message)
        if message["type"] in ("joined", "error"):
            return seen[:-1], message


async def test_snapshot_and_joined_carry_the_epoch(node: Node, open_client: ClientFactory) -> None:
    """A join's snapshot and its joined name the table's current epoch."""
    client = await open_client(node)
    [snap, *_events], joined = await _joined(client)
    epoch = await node.store.epoch(TABLE)
    assert snap["type"] == "snapshot" and snap["epoch"] == epoch
    assert joined["epoch"] == epoch


async def test_a_join_with_the_current_epoch_catches_up(
    node: Node, open_client: ClientFactory
) -> None:
    """`since` with the epoch it came with: the missed events, no snapshot."""
    first = await open_client(node)
    [snap, *_], joined = await _joined(first)
    await first.until_seq(joined["seq"] + 2)
    again = await open_client(node)
    caught_up, rejoined = await _joined(again, since=snap["seq"], epoch=snap["epoch"])
    assert [m["type"] for m in caught_up] == ["event"] * len(caught_up)
    assert [m["seq"] for m in caught_up] == list(range(snap["seq"] + 1, rejoined["seq"] + 1))
    assert rejoined["epoch"] == snap["epoch"]


async def test_a_join_with_another_epoch_gets_a_fresh_snapshot(
    node: Node, open_client: ClientFactory
) -> None:
    """A seq of another history (say, before Redis lost writes) is not caught up from: a
    snapshot with recovered false and the current epoch comes instead."""
    client = await open_client(node)
    [snap, *_], _ = await _joined(client)
    other = await open_client(node)
    [fresh, *events], joined = await _joined(other, since=snap["seq"], epoch="an-old-history")
    assert fresh["type"] == "snapshot" and fresh["recovered"] is False
    assert fresh["epoch"] == joined["epoch"] == await node.store.epoch(TABLE)
    assert [e["seq"] for e in events] == list(range(fresh["seq"] + 1, joined["seq"] + 1))


async def test_a_bad_epoch_is_bad_field(node: Node, open_client: ClientFactory) -> None:
    """`epoch` must be a string of 1-64 characters (null means none)."""
    client = await open_client(node)
    for epoch in (5, "", "x" * 65, ["a"]):
        await client.send({"type": "join", "table": TABLE, "since": 0, "epoch": epoch})
        error = await client.reply("error")
        assert error["code"] == "BAD_FIELD" and "epoch" in error["message"]
    [snap, *_], _ = await _joined(client, since=None, epoch=None)
    assert snap["type"] == "snapshot" and "recovered" not in snap


async def test_history_going_back_resyncs_every_joined_client(
    node: Node, open_client: ClientFactory
) -> None:
    """The store holds less than the clients were sent, then the owner writes those seqs
    again: each joined client promptly gets a snapshot with recovered false and a new
    epoch, then joined, then exactly the stored events after the snapshot."""
    store = node.store
    assert isinstance(store, MemoryStore)
    clients = [await open_client(node) for _ in range(2)]
    old_epoch = ""
    for client in clients:
        _, joined = await _joined(client)
        old_epoch = joined["epoch"]
    seen = await clients[0].until_seq(joined["seq"] + 3)
    rewind(store, TABLE, seen["seq"] - 2)
    for client in clients:
        fresh, rejoined = await resynced(store, client, old_epoch)
        client.events.clear()
        last = await client.event("round_opened", fresh["round"])
        held = await store.events_after(TABLE, rejoined["seq"], 1000) or []
        assert client.events == held[: len(client.events)]
        assert [e["seq"] for e in client.events] == list(
            range(rejoined["seq"] + 1, last["seq"] + 1)
        )


async def test_a_resync_the_store_cannot_serve_closes_the_connection(
    node: Node, open_client: ClientFactory, monkeypatch: pytest.MonkeyPatch
) -> None:
    """The resync's snapshot cannot be read, even after retries: the connection is closed
    with 1011 (reconnect), never left joined but silently unsubscribed."""
    store = node.store
    assert isinstance(store, MemoryStore)
    node.hub.retry_delay = 0.001
    client = await open_client(node, max_queue=None)
    _, joined = await _joined(client)
    seen = await client.until_seq(joined["seq"] + 2)

    async def down(*args: object) -> None:
        raise StoreUnavailable("redis is unreachable: connection refused")

    monkeypatch.setattr(store, "snapshot", down)
    rewind(store, TABLE, seen["seq"] - 1)
    async with asyncio.timeout(within(5)):
        await client.ws.wait_closed()
    assert client.ws.close_code == 1011
