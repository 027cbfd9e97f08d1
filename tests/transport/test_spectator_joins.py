"""Spectators joining over real WebSockets share one snapshot read (TableFeed.spectator_snapshot),
on both engines: a burst of joins costs the store one read, players still read their own,
and every spectator, whenever it joins, gets the table's events after its snapshot once each."""

from __future__ import annotations

import contextlib
from collections.abc import AsyncIterator, Awaitable, Callable

import pytest
from websockets.asyncio.client import connect
from websockets.typing import Subprotocol

import server.transport.hub as hub_module
from server.app import Node
from server.store.base import Snapshot
from server.store.memory import MemoryStore
from server.wire.codec import Encoding
from tests.transport.conftest import (
    SCALE,
    TABLE,
    Client,
    ClientFactory,
    Message,
    NodeFactory,
    within,
)
from tests.transport.history import resynced, rewind

pytestmark = pytest.mark.timeout(60)

Watch = Callable[[Node], Awaitable[Client]]


@pytest.fixture
async def watch() -> AsyncIterator[Watch]:
    """Connect anonymous spectators (?role=spectator) that have read their welcome."""
    async with contextlib.AsyncExitStack() as stack:

        async def factory(node: Node) -> Client:
            ws = await stack.enter_async_context(
                connect(
                    f"ws://127.0.0.1:{node.port}/ws?role=spectator",
                    subprotocols=[Subprotocol(Encoding.JSON.value)],
                    open_timeout=within(),
                )
            )
            client = Client(ws)
            client.welcome = await client.reply("welcome")
            assert client.welcome["role"] == "spectator"
            return client

        yield factory


def count_snapshots(node: Node, monkeypatch: pytest.MonkeyPatch) -> list[str | None]:
    """The player of every snapshot read from the node's store from now on (a thin wrapper
    around the real store's method: Redis or memory answers it)."""
    reads: list[str | None] = []
    real = node.store.snapshot

    async def snapshot(table_id: str, player: str | None) -> Snapshot | None:
        reads.append(player)
        return await real(table_id, player)

    monkeypatch.setattr(node.store, "snapshot", snapshot)
    return reads


async def _join(client: Client) -> tuple[Message, list[Message], Message]:
    """Join: the snapshot, the catch-up events after it, and joined."""
    await client.send({"type": "join", "table": TABLE})
    snapshot = await client.reply("snapshot")
    client.events.clear()
    joined = await client.reply("joined")
    return snapshot, list(client.events), joined


async def test_a_burst_of_spectator_joins_reads_the_store_once_and_players_their_own(
    make_node: NodeFactory,
    watch: Watch,
    open_client: ClientFactory,
    engine: str,
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """With the round's betting window open (no events meanwhile), 20 spectators joining at
    once cost the store at most one snapshot read (none when the shared one is current),
    each still caught up to the same place; each player's join still reads its own (its
    bets and balance)."""
    monkeypatch.setattr(hub_module, "SNAPSHOT_REUSE_S", 600.0)  # age plays no part here
    node = await make_node(engine, betting_window=600 * SCALE)
    first = await watch(node)
    snapshot, _, _ = await _join(first)
    if snapshot["phase"] != "betting":
        await first.event("round_opened")
    spectators = [await watch(node) for _ in range(20)]
    reads = count_snapshots(node, monkeypatch)
    for spectator in spectators:
        await spectator.send({"type": "join", "table": TABLE})
    joined_seqs = set()
    for spectator in spectators:
        snap = await spectator.reply("snapshot")
        assert (snap["balance"], snap["bets"]) == (None, [])
        assert "recovered" not in snap
        if snap["phase"] == "betting":
            assert 0 < snap["time_left_ms"] <= 600_000 * SCALE
        spectator.events.clear()
        joined = await spectator.reply("joined")
        caught_up = [e["seq"] for e in spectator.events]
        assert caught_up == list(range(snap["seq"] + 1, joined["seq"] + 1))
        joined_seqs.add(joined["seq"])
    assert len(joined_seqs) == 1
    assert len(reads) <= 1 and reads.count(None) == len(reads)
    players = [await open_client(node) for _ in range(3)]
    for player in players:
        mine, _, _ = await _join(player)
        assert mine["balance"] is not None
    assert reads.count(None) <= 1 and len(reads) - reads.count(None) == 3


async def test_spectators_joining_during_play_get_every_event_once(
    make_node: NodeFactory, watch: Watch, engine: str
) -> None:
    """Spectators join one after another while cards are dealt: after its snapshot each gets
    exactly the table's events (those a spectator watching all along got), in order, from
    the snapshot's seq on: no gap, no duplicate, the epoch of joined."""
    node = await make_node(engine)
    reference = await watch(node)
    _, _, ref_joined = await _join(reference)
    seen: dict[int, Message] = {}
    late: list[tuple[Client, Message, Message]] = []
    for _ in range(6):
        client = await watch(node)
        snapshot, catch_up, joined = await _join(client)
        assert snapshot["epoch"] == joined["epoch"] == ref_joined["epoch"]
        assert [e["seq"] for e in catch_up] == list(range(snapshot["seq"] + 1, joined["seq"] + 1))
        late.append((client, snapshot, joined))
        await client.event("card")  # let the table move on before the next one joins
    last = max(c.events[-1]["seq"] for c, _, _ in late) + 3
    await reference.until_seq(last)
    for event in reference.events:
        seen[event["seq"]] = event
    for client, snapshot, _ in late:
        await client.until_seq(last)
        upto = [e for e in client.events if e["seq"] <= last]
        assert [e["seq"] for e in upto] == list(range(snapshot["seq"] + 1, last + 1))
        assert all(e == seen[e["seq"]] for e in upto)


async def test_spectators_resync_to_a_new_epoch_when_the_history_goes_back(
    node: Node, watch: Watch
) -> None:
    """The memory store loses its last events: every joined spectator gets a fresh snapshot
    of the new epoch (recovered false; not the shared one of the old history), joined, and
    then exactly the stored events after it."""
    store = node.store
    assert isinstance(store, MemoryStore)
    spectators = [await watch(node) for _ in range(3)]
    for spectator in spectators:
        _, _, joined = await _join(spectator)
    old_epoch = joined["epoch"]
    seen = await spectators[0].until_seq(joined["seq"] + 3)
    rewind(store, TABLE, seen["seq"] - 2)
    for spectator in spectators:
        fresh, rejoined = await resynced(store, spectator, old_epoch)
        after = await spectator.until_seq(rejoined["seq"] + 2)
        held = {e["seq"]: e for e in await store.events_after(TABLE, fresh["seq"], 1000) or []}
        assert [e["seq"] for e in spectator.events] == list(
            range(fresh["seq"] + 1, after["seq"] + 1)
        )
        assert all(e == held[e["seq"]] for e in spectator.events)
