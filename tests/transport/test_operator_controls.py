"""Operator controls over real HTTP (issue 11): pause and resume a table, every table's state,
owner and counts, and /status behind the operator token once a secret is configured."""

from __future__ import annotations

import asyncio
import contextlib
import uuid
from collections.abc import AsyncIterator
from typing import Any

import pytest

from server.app import Node
from server.config import Settings
from server.store.redis import RedisStore
from tests.redis_server import delete_keys
from tests.transport.conftest import (
    FAST,
    TABLE,
    Client,
    ClientFactory,
    Message,
    NodeFactory,
    within,
)
from tests.transport.http_client import call, token_for

SECRET = "operator-controls-test-secret-0123456789abcdef"


async def _between(client: Client, first: str, last: str) -> tuple[Message, list[Message]]:
    """Read until event `last`; return it and the events after `first` and before it."""
    await client.event(first)
    start = len(client.events)
    end = await client.event(last, seconds=10)
    return end, client.events[start:-1]


async def _pause(node: Node, action: str = "pause", table: str = TABLE) -> dict[str, Any]:
    answer = await call(node, "POST", f"/api/tables/{table}/{action}", b"", token_for(node))
    assert answer.status == 200, answer
    body: dict[str, Any] = answer.json()
    return body


async def test_a_paused_table_finishes_its_round_and_opens_none_until_resumed(
    make_node: NodeFactory, open_client: ClientFactory, engine: str
) -> None:
    """Paused mid-round: that round is dealt and settled, then table_paused; snapshots and
    GET /api/tables say paused; no round opens before table_resumed, after which the next
    round opens."""
    node = await make_node(engine=engine)
    client = await open_client(node)
    snap = await client.join()
    assert snap["paused"] is False
    opened = await client.event("round_opened", snap["round"])
    assert await _pause(node) == {"table": TABLE, "paused": True, "changed": True}
    assert (await _pause(node))["changed"] is False  # asked twice: one pause
    paused = await client.event("table_paused")
    settled = [e for e in client.events if e["kind"] == "round_settled"]
    assert settled and settled[-1]["round"] == opened["round"] == paused["round"]
    assert (await client.join())["paused"] is True  # a snapshot taken now says so
    rows = (await call(node, "GET", "/api/tables", token=token_for(node))).json()["tables"]
    assert [(r["table"], r["paused"], r["holding"]) for r in rows] == [(TABLE, True, True)]
    assert rows[0]["owner"] == node.node_id and rows[0]["phase"] == "settled"
    status = (await call(node, "GET", "/status")).json()
    assert status["paused"] == [TABLE]
    assert (await _pause(node, "resume"))["changed"] is True
    resumed = await client.event("table_resumed")
    reopened = await client.event("round_opened")
    assert reopened["round"] == paused["round"] + 1
    # Nothing happened at the table between the pause and the resume.
    kinds = [e["kind"] for e in client.events]
    assert kinds[kinds.index("table_paused") + 1] == "table_resumed"
    assert resumed["seq"] == paused["seq"] + 1
    assert (await client.join())["paused"] is False


async def test_pausing_an_unknown_table_is_404(make_node: NodeFactory) -> None:
    node = await make_node()
    answer = await call(node, "POST", "/api/tables/nope/pause", b"", token_for(node))
    assert answer.status == 404 and answer.json()["error"] == "unknown_table"


async def test_get_tables_lists_every_table_with_owner_and_counts(
    make_node: NodeFactory, open_client: ClientFactory
) -> None:
    """Every table: phase, round, paused, owner and lease, this round's bettors and stakes,
    this node's subscribers."""
    node = await make_node(tables=f"{TABLE}=classic8,t2=punto6")
    client = await open_client(node)
    snap = await client.join()
    round_no = (await client.event("round_opened", snap["round"]))["round"]
    bet = {"type": "bet", "table": TABLE, "round": round_no, "bet_id": "b1"}
    await client.send({**bet, "spot": "banker", "amount": 100})
    await client.reply("bet_accepted")
    rows = (await call(node, "GET", "/api/tables", token=token_for(node))).json()["tables"]
    by_table = {row["table"]: row for row in rows}
    assert sorted(by_table) == [TABLE, "t2"]
    first = by_table[TABLE]
    assert first["owner"] == node.node_id and first["lease_token"] >= 1
    assert first["subscribers"] == 1 and by_table["t2"]["subscribers"] == 0
    assert first["paused"] is False and first["rules"] == "classic8"
    if first["round"] == round_no and first["phase"] == "betting":
        assert (first["bettors"], first["staked"]) == (1, 100)


# --- /status -----------------------------------------------------------------------------------


async def test_status_needs_an_operator_token_once_a_secret_is_set(
    make_node: NodeFactory,
) -> None:
    """With a secret: 401 without a token, 403 for a player, 200 for an operator."""
    node = await make_node(secret=SECRET)
    assert (await call(node, "GET", "/status")).status == 401
    player = token_for(node, "bob", role="player")
    assert (await call(node, "GET", "/status", token=player)).status == 403
    ok = await call(node, "GET", "/status", token=token_for(node))
    assert ok.status == 200 and ok.json()["node"] == node.node_id


async def test_status_stays_open_in_demo_mode(make_node: NodeFactory) -> None:
    node = await make_node()
    answer = await call(node, "GET", "/status")
    assert answer.status == 200 and answer.json()["paused"] == []


# --- two nodes on one Redis --------------------------------------------------------------------


@contextlib.asynccontextmanager
async def _cluster(redis_url: str) -> AsyncIterator[tuple[Node, Node]]:
    """Two nodes sharing a Redis (one key prefix) and a secret; guests may still play."""
    prefix = f"test-{uuid.uuid4().hex[:12]}"
    nodes = []
    try:
        for name in ("node-a", "node-b"):
            settings = Settings.from_options(
                port=0, **{**FAST, "node_id": name, "secret": SECRET, "allow_guests": True}
            )
            store = RedisStore.from_url(redis_url, key_prefix=prefix)
            node = Node(settings, store=store)
            await node.start()
            nodes.append(node)
        yield nodes[0], nodes[1]
    finally:
        for node in nodes:
            await node.stop()
        await delete_keys(redis_url, [prefix])


async def _owner(a: Node, b: Node) -> tuple[Node, Node]:
    """(the node owning TABLE, the other), once one does."""
    async with asyncio.timeout(within()):
        while True:
            for owner, other in ((a, b), (b, a)):
                if owner.loops[0].owning:
                    return owner, other
            await asyncio.sleep(0.01)


@pytest.mark.redis
async def test_a_pause_holds_on_every_node_and_across_failover(
    redis_url: str, open_client: ClientFactory
) -> None:
    """Paused through the node that does not own the table: the owner stops opening rounds.
    The owner stops; the other node takes the table over and keeps it paused; resuming opens
    the next round there."""
    async with _cluster(redis_url) as (a, b):
        owner, other = await _owner(a, b)
        watcher = await open_client(other)  # follows the table through the store
        snap = await watcher.join()
        await watcher.event("round_opened", snap["round"])
        assert (await _pause(other))["changed"] is True
        paused = await watcher.event("table_paused", seconds=10)
        await owner.stop()  # the owner goes away while the table is paused
        async with asyncio.timeout(within()):
            while not other.loops[0].owning:  # noqa: ASYNC110 - no event says "lease taken"
                await asyncio.sleep(0.01)
        rows = (await call(other, "GET", "/api/tables", token=token_for(other))).json()
        row = rows["tables"][0]
        assert (row["owner"], row["paused"], row["holding"]) == (other.node_id, True, True)
        assert (await _pause(other, "resume"))["changed"] is True
        await watcher.event("table_resumed")
        reopened = await watcher.event("round_opened")
        assert reopened["round"] == paused["round"] + 1
        kinds = [e["kind"] for e in watcher.events]
        assert kinds[kinds.index("table_paused") + 1] == "table_resumed"  # no round between


async def test_lobby_counts_stay_public_with_a_secret(
    make_node: NodeFactory, open_client: ClientFactory
) -> None:
    """/lobby gives any page this node's watchers per table, and whether guests may come in,
    without a token."""
    node = await make_node(secret=SECRET, allow_guests=True)
    client = await open_client(node)
    await client.join()
    answer = await call(node, "GET", "/lobby", admin=False)
    assert answer.status == 200
    assert answer.json() == {"node": node.node_id, "subscribers": {TABLE: 1}, "guests": True}


async def test_lobby_says_when_guests_are_not_let_in(make_node: NodeFactory) -> None:
    """A --secret site without --allow-guests: the page must not offer a "new guest" tab."""
    node = await make_node(secret=SECRET)
    answer = await call(node, "GET", "/lobby", admin=False)
    assert answer.json() == {"node": node.node_id, "subscribers": {}, "guests": False}
