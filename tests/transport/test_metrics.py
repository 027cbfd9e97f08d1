"""GET /metrics: every family of server/metrics.py, counted from real traffic on a live node."""

from __future__ import annotations

import asyncio
import contextlib
from collections.abc import Iterator

import pytest
from prometheus_client.parser import text_string_to_metric_families
from websockets.exceptions import ConnectionClosed

from server.app import Node
from server.metrics import CONTENT_TYPE, Metrics
from server.wire.codec import Encoding
from tests.redis_server import RedisProcess, start_redis
from tests.transport.conftest import TABLE, ClientFactory, NodeFactory, bet_message, within
from tests.transport.test_http import _get
from tests.transport.test_slow_client import BUFFER_LIMIT, _stalled_client

FAMILIES = {
    "baccarat_connections": "gauge",
    "baccarat_messages_in": "counter",
    "baccarat_messages_out": "counter",
    "baccarat_fanout_latency_seconds": "histogram",
    "baccarat_bet_latency_seconds": "histogram",
    "baccarat_bets": "counter",
    "baccarat_rounds": "counter",
    "baccarat_rounds_voided": "counter",
    "baccarat_lease_acquisitions": "counter",
    "baccarat_lease_losses": "counter",
    "baccarat_store_errors": "counter",
    "baccarat_slow_clients_dropped": "counter",
    "baccarat_rate_limited": "counter",
    "baccarat_gc_pause_seconds": "histogram",
}

Samples = dict[tuple[str, frozenset[tuple[str, str]]], float]


async def _scrape(node: Node) -> tuple[dict[str, str], Samples]:
    """GET /metrics over HTTP: family name -> type, and every sample's value."""
    status, headers, body = await _get(node, "/metrics", admin=True)
    assert status == 200 and headers["content-type"] == CONTENT_TYPE
    families = list(text_string_to_metric_families(body.decode()))
    samples = {(s.name, frozenset(s.labels.items())): s.value for f in families for s in f.samples}
    return {f.name: f.type for f in families}, samples


def _value(samples: Samples, name: str, **labels: str) -> float:
    return samples.get((name, frozenset(labels.items())), 0.0)


_bet = bet_message


async def test_metrics_show_every_family_from_live_traffic(
    make_node: NodeFactory, open_client: ClientFactory
) -> None:
    """Two clients join, bet (one accepted, one rejected), ping and see a round settle; a
    stalled client is cut: /metrics has every family, with these counts in it."""
    node = await make_node(max_buffer_bytes=BUFFER_LIMIT)
    # Unbounded client queues: events pile up unread here, and a paused reader would make
    # the closing handshake at teardown wait out its timeout.
    player = await open_client(node, Encoding.JSON, max_queue=None)
    watcher = await open_client(node, Encoding.MSGPACK, max_queue=None)
    snap = await player.join()
    await watcher.join()
    opened = await player.event("round_opened", snap["round"] - 1)
    await player.send(_bet(opened["round"], "ok"))
    await player.reply("bet_accepted")
    await player.send(_bet(opened["round"], "too-small", amount=1, spot="tie"))
    assert (await player.reply("bet_rejected"))["code"] == "LIMIT"
    await player.ping()
    await player.event("round_settled", opened["round"] - 1)
    await player.reply("settlement")
    await _drop_a_stalled_client(node, snap["round"])

    types, samples = await _scrape(node)
    assert {name: types.get(name) for name in FAMILIES} == FAMILIES
    assert _value(samples, "baccarat_connections", role="player", encoding="json") == 1
    assert _value(samples, "baccarat_connections", role="player", encoding="msgpack") == 1
    assert _value(samples, "baccarat_messages_in_total", type="bet") == 2
    assert _value(samples, "baccarat_messages_in_total", type="join") >= 2
    assert _value(samples, "baccarat_messages_in_total", type="ping") == 1
    for kind in ("welcome", "snapshot", "joined", "bet_accepted", "bet_rejected", "settlement"):
        assert _value(samples, "baccarat_messages_out_total", type=kind) >= 1, kind
    assert _value(samples, "baccarat_messages_out_total", type="event") >= 2 * len(player.events)
    assert _value(samples, "baccarat_bets_total", result="ACCEPTED") == 1
    assert _value(samples, "baccarat_bets_total", result="LIMIT") == 1
    assert _value(samples, "baccarat_bet_latency_seconds_count") == 2
    assert _value(samples, "baccarat_fanout_latency_seconds_count") >= len(player.events)
    settled = sum(1 for e in player.events if e["kind"] == "round_settled")
    outcomes = ("banker", "player", "tie")
    assert sum(_value(samples, "baccarat_rounds_total", outcome=o) for o in outcomes) >= settled
    assert _value(samples, "baccarat_lease_acquisitions_total", table=TABLE) == 1
    assert _value(samples, "baccarat_slow_clients_dropped_total") == 1
    assert "process_resident_memory_bytes" in types


async def _drop_a_stalled_client(node: Node, round_no: int) -> None:
    """A client that floods replays without reading is cut (tests/transport/test_slow_client)."""
    stalled, session = await _stalled_client(node, join=False)
    dropped = asyncio.ensure_future(session.ws.wait_closed())
    with contextlib.suppress(ConnectionClosed, ConnectionError):
        async with asyncio.timeout(within(10)):
            while not dropped.done():
                await stalled.send({"type": "replay", "table": TABLE, "round": round_no})
                await asyncio.sleep(0)  # a fair share of the loop for the node under test
    await dropped
    await stalled.ws.close()


def test_each_verb_counts_in_its_family() -> None:
    """The calls other code makes (rate limits, voids, lease losses, store errors) land in
    their families, with their labels."""
    metrics = Metrics()
    metrics.rate_limit_hit("bet")
    metrics.rate_limit_hit("bet")
    metrics.round_voided()
    metrics.lease_lost("t9")
    metrics.store_error("hub")
    metrics.event_written(0, subscribers=0)  # nobody to write to: nothing is timed
    sample = metrics.registry.get_sample_value
    assert sample("baccarat_rate_limited_total", {"kind": "bet"}) == 2
    assert sample("baccarat_rounds_voided_total") == 1
    assert sample("baccarat_lease_losses_total", {"table": "t9"}) == 1
    assert sample("baccarat_store_errors_total", {"component": "hub"}) == 1
    assert sample("baccarat_fanout_latency_seconds_count") == 0


def test_two_nodes_in_one_process_count_apart() -> None:
    """Each Metrics has its own registry: one node's counts never show on another's."""
    first, second = Metrics(), Metrics()
    first.bet_answered("ACCEPTED")
    assert first.registry.get_sample_value("baccarat_bets_total", {"result": "ACCEPTED"}) == 1
    assert second.registry.get_sample_value("baccarat_bets_total", {"result": "ACCEPTED"}) is None


@pytest.fixture
def own_redis() -> Iterator[RedisProcess]:
    """A Redis of this test's own, keeping its data across a stop (fsync on every write)."""
    with start_redis(None, "--appendonly", "yes", "--appendfsync", "always") as server:
        yield server


@pytest.mark.redis
async def test_a_store_error_in_a_session_is_counted(
    own_redis: RedisProcess, make_node: NodeFactory, open_client: ClientFactory
) -> None:
    """With Redis gone, a bet answered UNAVAILABLE counts one session store error."""
    node = await make_node(redis=own_redis.url)
    client = await open_client(node)
    snap = await client.join()
    own_redis.stop()
    try:
        await client.send(_bet(snap["round"] + 1, "b1"))
        assert (await client.reply("bet_rejected"))["code"] == "UNAVAILABLE"
        errors = node.metrics.registry.get_sample_value
        assert errors("baccarat_store_errors_total", {"component": "session"}) == 1
        assert errors("baccarat_bets_total", {"result": "UNAVAILABLE"}) == 1
    finally:
        own_redis.start()  # back (empty) so the node can stop and release its lease
