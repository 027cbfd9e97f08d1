"""Redis comes back with older data: every joined client is told at once, and no client is
ever sent events of a history other than the one its snapshot belongs to.

On a real redis-server of the test's own: restarted from an older dump (as after a crash
without fsync), rolled back in place (as a failover to a lagging replica looks to a node
whose connection did not break), and restarted empty (the tables are made anew).
"""

from __future__ import annotations

import asyncio
from collections.abc import AsyncIterator, Iterator
from typing import Any

import pytest
from redis.asyncio import Redis

from server.app import Node
from server.store.base import Event
from tests.redis_server import RedisProcess, start_redis
from tests.transport.conftest import TABLE, Client, ClientFactory, Message, NodeFactory, within

pytestmark = [pytest.mark.redis, pytest.mark.timeout(60)]

STATE = f"bac:{{t:{TABLE}}}:state"
PROMPT_S = 3.0  # the most a client may wait to be told: detection takes about a second
# Clients here stop reading before the test ends; an unbounded queue lets them still read
# the close frame at teardown instead of waiting out the close timeout.
UNREAD: dict[str, Any] = {"max_queue": None}
# Every key with its TTL and DUMP, and the table's seq, at one point in time.
DUMP_ALL = """
local out = {redis.call('HGET', KEYS[1], 'seq')}
for _, key in ipairs(redis.call('KEYS', '*')) do
  out[#out + 1] = {key, redis.call('PTTL', key), redis.call('DUMP', key)}
end
return out
"""


@pytest.fixture
def redis_server() -> Iterator[RedisProcess]:
    with start_redis() as server:
        yield server


@pytest.fixture
async def raw(redis_server: RedisProcess) -> AsyncIterator[Redis]:
    client = Redis.from_url(redis_server.url)
    yield client
    await client.aclose()


Dump = tuple[int, list[Any]]


async def dump_all(raw: Redis) -> Dump:
    seq, *entries = await raw.eval(DUMP_ALL, 1, STATE)  # type: ignore[misc]
    return int(seq), entries


async def restore_all(raw: Redis, dump: Dump) -> None:
    """Put the database back as it was at the dump, in one transaction."""
    async with raw.pipeline(transaction=True) as pipe:
        pipe.flushdb()
        for key, ttl, value in dump[1]:
            if ttl != -2:
                pipe.restore(key, max(ttl, 0), value, replace=True)
        await pipe.execute()


async def _join(client: Client) -> tuple[Message, Message]:
    await client.send({"type": "join", "table": TABLE})
    snap = await client.reply("snapshot")
    return snap, await client.reply("joined")


async def _stored(node: Node, after: int) -> dict[int, Event]:
    return {e["seq"]: e for e in await node.store.events_after(TABLE, after, 10_000) or []}


async def _told(client: Client, old_epoch: str, since: float) -> tuple[Message, Message]:
    """The recovered-false snapshot and its joined; checks they came promptly."""
    fresh = await client.expect(lambda m: m["type"] == "snapshot", within(PROMPT_S + 5))
    waited = asyncio.get_running_loop().time() - since
    assert waited < within(PROMPT_S), f"told after {waited:.1f} s"
    assert fresh["recovered"] is False and fresh["epoch"] != old_epoch
    rejoined = await client.reply("joined")
    assert rejoined["epoch"] == fresh["epoch"]
    return fresh, rejoined


async def _live_and_consistent(node: Node, client: Client, after: int) -> None:
    """From `after` on, the client gets the stored events, in order, through a new round."""
    client.events.clear()
    await client.event("round_opened", seconds=within(5))
    stored = await _stored(node, after)
    seqs = [e["seq"] for e in client.events]
    assert seqs == list(range(after + 1, after + 1 + len(seqs)))
    assert all(e == stored[e["seq"]] for e in client.events)


def _all_after_snapshots_stored(messages: list[Message], stored: dict[int, Event]) -> None:
    """After each snapshot, the events up to the next one continue it, and every one is an
    event the store holds now: none of a history that was lost."""
    after = None
    for message in messages:
        if message["type"] == "snapshot":
            after = message["seq"]
        elif message["type"] == "event" and after is not None:
            assert message["seq"] == after + 1, (message["seq"], after)
            assert message == stored[message["seq"]], "an event of a lost history"
            after = message["seq"]


async def test_redis_back_from_an_older_dump(
    redis_server: RedisProcess, raw: Redis, make_node: NodeFactory, open_client: ClientFactory
) -> None:
    """Redis restarts from a dump older than what clients were sent (a crash without fsync):
    joined clients get a recovered-false snapshot with a new epoch within a few seconds,
    then the new history; a new joiner gets a snapshot and events of that history only."""
    node = await make_node(redis=redis_server.url)
    client = await open_client(node, **UNREAD)
    _, joined = await _join(client)
    await raw.save()  # dump.rdb, loaded by the restart below
    saved = int(await raw.hget(STATE, "seq") or 0)  # at least what the dump holds
    await client.until_seq(max(saved, joined["seq"]) + 15)
    await asyncio.to_thread(redis_server.restart)
    since = asyncio.get_running_loop().time()
    fresh, rejoined = await _told(client, joined["epoch"], since)
    assert fresh["epoch"] == await node.store.epoch(TABLE)
    await _live_and_consistent(node, client, rejoined["seq"])
    newcomer = await open_client(node, **UNREAD)
    snap, _ = await _join(newcomer)
    assert snap["epoch"] == fresh["epoch"]
    await newcomer.event("round_opened", snap["round"])
    _all_after_snapshots_stored([snap, *newcomer.events], await _stored(node, snap["seq"]))


def _live_after(messages: list[Message], seq: int) -> bool:
    return bool(messages) and messages[-1]["type"] == "event" and messages[-1]["seq"] > seq


async def test_redis_rolled_back_in_place_under_a_node_that_does_not_own_the_table(
    raw: Redis, redis_server: RedisProcess, make_node: NodeFactory, open_client: ClientFactory
) -> None:
    """The data goes back without any connection breaking (a lagging replica promoted
    behind the same address): the owner notices when it writes a seq again, the other node
    within its check interval. A client that joins the other node right then never gets the
    old events it still caches after its snapshot of the new history."""
    owner = await make_node(redis=redis_server.url, node_id="owner")
    watcher = await open_client(owner, **UNREAD)
    await _join(watcher)
    await watcher.event("round_opened")  # the first node owns the table
    other = await make_node(redis=redis_server.url, node_id="other")
    assert not other.loops[0].owning
    client = await open_client(other, **UNREAD)
    _, joined = await _join(client)
    dump = await dump_all(raw)
    await client.until_seq(max(dump[0], joined["seq"]) + 20)
    await restore_all(raw, dump)
    since = asyncio.get_running_loop().time()
    newcomer = await open_client(other, **UNREAD)
    await newcomer.send({"type": "join", "table": TABLE})
    fresh, rejoined = await _told(client, joined["epoch"], since)
    await _live_and_consistent(other, client, rejoined["seq"])
    messages: list[Message] = []
    async with asyncio.timeout(within(5)):
        while not _live_after(messages, rejoined["seq"]):
            messages.append(await newcomer.recv())
    snapshots = [m for m in messages if m["type"] == "snapshot"]
    assert snapshots[-1]["epoch"] == fresh["epoch"] == await other.store.epoch(TABLE)
    assert await owner.store.epoch(TABLE) == fresh["epoch"]  # both nodes agree on one
    _all_after_snapshots_stored(messages, await _stored(other, 0))


async def test_redis_restarted_empty_gives_the_new_table_a_new_epoch(
    redis_server: RedisProcess, make_node: NodeFactory, open_client: ClientFactory
) -> None:
    """Redis lost everything; the table loop makes the table again: a new epoch, and every
    joined client is resynced to the new table."""
    node = await make_node(redis=redis_server.url)
    client = await open_client(node, **UNREAD)
    _, joined = await _join(client)
    await client.until_seq(joined["seq"] + 5)
    await asyncio.to_thread(redis_server.restart)  # no dump: it comes back empty
    since = asyncio.get_running_loop().time()
    _, rejoined = await _told(client, joined["epoch"], since)
    await _live_and_consistent(node, client, rejoined["seq"])
