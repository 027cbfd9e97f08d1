"""Per-connection limits over the wire: rates per kind, flood close, connections per address,
handshake timeout, allowed origins, and replay answers of bounded size."""

from __future__ import annotations

import asyncio
from typing import Any

import pytest
from websockets.exceptions import ConnectionClosed, InvalidStatus
from websockets.typing import Origin

from server.app import Node
from tests.transport.conftest import (
    TABLE,
    Client,
    ClientFactory,
    NodeFactory,
    ServerLog,
    within,
)

# A bucket of 3 requests refilling at 1 a second: a test's few milliseconds add nothing.
TIGHT: dict[str, Any] = {"rate_burst": 3.0}


def _bet(round_no: int, bet_id: str) -> dict[str, Any]:
    return {
        "type": "bet",
        "table": TABLE,
        "round": round_no,
        "bet_id": bet_id,
        "spot": "banker",
        "amount": 100,
    }


async def _closed_code(client: Client) -> int:
    with pytest.raises(ConnectionClosed) as closed:
        await client.expect(lambda m: False)
    assert closed.value.rcvd is not None
    return closed.value.rcvd.code


async def test_pings_over_the_rate_get_rate_limited_with_their_ref(
    make_node: NodeFactory, open_client: ClientFactory
) -> None:
    """Past its burst a ping is answered `error` RATE_LIMITED (with its ref); others pass."""
    node = await make_node(rate_pings=1, **TIGHT)
    client = await open_client(node)
    for n in range(3):
        await client.send({"type": "ping", "ref": n})
        assert (await client.reply("pong"))["ref"] == n
    await client.send({"type": "ping", "ref": "over"})
    error = await client.reply("error")
    assert (error["code"], error["ref"]) == ("RATE_LIMITED", "over")
    await client.join()  # joins have their own bucket


async def test_bets_over_the_rate_are_rejected_and_debit_nothing(
    make_node: NodeFactory, open_client: ClientFactory, engine: str
) -> None:
    """Past its burst a bet is `bet_rejected` RATE_LIMITED naming its bet_id; no money moves."""
    node = await make_node(engine=engine, rate_bets=1, **TIGHT)
    client = await open_client(node)
    start = client.welcome["balance"]
    snap = await client.join()
    round_no = (await client.event("round_opened", snap["round"]))["round"]
    for n in range(3):
        await client.send(_bet(round_no, f"ok-{n}"))
        assert (await client.reply("bet_accepted"))["bet_id"] == f"ok-{n}"
    await client.send(_bet(round_no, "over"))
    rejected = await client.reply("bet_rejected")
    assert (rejected["code"], rejected["bet_id"]) == ("RATE_LIMITED", "over")
    assert await node.store.balance(client.welcome["player"]) == start - 300
    assert (await node.store.ledger()).balanced


async def test_joins_leaves_and_replays_are_limited(
    make_node: NodeFactory, open_client: ClientFactory
) -> None:
    """join and leave share one bucket; replay has its own."""
    node = await make_node(rate_joins=1, rate_replays=1, **TIGHT)
    client = await open_client(node)
    await client.join()
    await client.send({"type": "leave", "table": TABLE})
    await client.reply("left")
    await client.join()
    await client.send({"type": "leave", "table": TABLE, "ref": "j"})
    error = await client.reply("error")
    assert (error["code"], error["ref"]) == ("RATE_LIMITED", "j")
    for _ in range(3):
        await client.send({"type": "replay", "table": TABLE, "round": 10**6})
        assert (await client.reply("error"))["code"] == "NOT_HELD"
    await client.send({"type": "replay", "table": TABLE, "round": 10**6})
    assert (await client.reply("error"))["code"] == "RATE_LIMITED"


async def test_a_client_that_keeps_flooding_is_closed_with_1008(
    server_log: ServerLog, make_node: NodeFactory, open_client: ClientFactory
) -> None:
    """More refusals than max_refusals within the window closes the connection with 1008;
    the node and its other clients go on."""
    node = await make_node(rate_pings=1, max_refusals=5, **TIGHT)
    flooder = await open_client(node)
    other = await open_client(node)
    for n in range(3 + 5):
        await flooder.send({"type": "ping", "ref": n})
    for _ in range(10):  # the 6th refusal closes it
        await flooder.send({"type": "ping"})
    assert await _closed_code(flooder) == 1008
    assert (await other.ping("fine"))["ref"] == "fine"
    assert "flooding_client_closed" in server_log.names()
    assert server_log.failures() == []


async def test_malformed_messages_count_as_refusals(
    make_node: NodeFactory, open_client: ClientFactory
) -> None:
    """Each message refused at parsing is a refusal too: a stream of them is a flood."""
    node = await make_node(max_refusals=5)
    client = await open_client(node)
    for _ in range(5):
        await client.send({"type": "dance"})
        assert (await client.reply("error"))["code"] == "UNKNOWN_TYPE"
    await client.send({"type": "join"})
    assert await _closed_code(client) == 1008


async def test_connections_per_address_are_capped_at_the_handshake(
    make_node: NodeFactory, open_client: ClientFactory
) -> None:
    """Past max_connections_per_ip a handshake gets HTTP 429; a closed connection frees its
    place; plain HTTP (health checks) is not refused."""
    node = await make_node(max_connections_per_ip=2)
    first = await open_client(node)
    await open_client(node)
    with pytest.raises(InvalidStatus) as refused:
        await open_client(node)
    assert refused.value.response.status_code == 429
    reader, writer = await asyncio.open_connection("127.0.0.1", node.port)
    writer.write(b"GET /healthz HTTP/1.1\r\nHost: x\r\n\r\n")
    assert (await asyncio.wait_for(reader.read(), within())).startswith(b"HTTP/1.1 200")
    writer.close()
    session = next(s for s in node.ctx.sessions if s.player == first.welcome["player"])
    await first.ws.close()
    await asyncio.wait_for(session.ws.wait_closed(), within())  # the server saw it go
    await open_client(node)


async def test_a_silent_connection_is_closed_after_the_handshake_timeout(
    make_node: NodeFactory,
) -> None:
    """A TCP connection that never completes its handshake is closed by the server."""
    node = await make_node(handshake_timeout=0.2)
    reader, writer = await asyncio.open_connection("127.0.0.1", node.port)
    try:
        writer.write(b"GET /ws HTTP/1.1\r\n")  # and nothing more
        assert await asyncio.wait_for(reader.read(), within()) == b""
    finally:
        writer.close()


async def test_only_allowed_origins_may_connect(
    make_node: NodeFactory, open_client: ClientFactory
) -> None:
    """With --allowed-origins, a browser Origin not listed gets 403; a listed one and no
    Origin at all (a bot) connect."""
    node = await make_node(allowed_origins="https://play.example, http://localhost:8080")
    with pytest.raises(InvalidStatus) as refused:
        await open_client(node, origin=Origin("https://evil.example"))
    assert refused.value.response.status_code == 403
    with pytest.raises(InvalidStatus):
        await open_client(node, origin=Origin("https://play.example:443"))  # exact match only
    assert (await open_client(node, origin=Origin("https://play.example"))).welcome
    assert (await open_client(node, origin=Origin("http://localhost:8080"))).welcome
    assert (await open_client(node)).welcome


async def test_any_origin_connects_by_default(node: Node, open_client: ClientFactory) -> None:
    """Without --allowed-origins every Origin is accepted."""
    assert (await open_client(node, origin=Origin("https://anywhere.example"))).welcome


async def test_a_replay_answer_is_bounded_and_pages_on(
    make_node: NodeFactory, open_client: ClientFactory
) -> None:
    """A replay lists at most max_replay_events events with `more`; asking again with
    `after` (the last seq received) gives the rest, which together equal the broadcast."""
    node = await make_node(max_replay_events=3)
    client = await open_client(node)
    snap = await client.join()
    settled = await client.event("round_settled", snap["round"])
    round_no = settled["round"]
    pages: list[list[dict[str, Any]]] = []
    after = None
    while True:
        request: dict[str, Any] = {"type": "replay", "table": TABLE, "round": round_no}
        if after is not None:
            request["after"] = after
        await client.send(request)
        answer = await client.reply("replay")
        pages.append(answer["events"])
        if not answer["more"]:
            break
        after = answer["events"][-1]["seq"]
    assert all(len(page) == 3 for page in pages[:-1]) and 0 < len(pages[-1]) <= 3
    assert [e for page in pages for e in page] == client.round_events(round_no)
    await client.send({"type": "replay", "table": TABLE, "round": round_no, "after": 10**9})
    assert (await client.reply("replay")) | {"events": None} == {
        "type": "replay",
        "table": TABLE,
        "round": round_no,
        "events": None,
        "more": False,
    }


async def test_rate_limited_messages_are_counted_by_kind(
    make_node: NodeFactory, open_client: ClientFactory
) -> None:
    """Each message refused RATE_LIMITED counts in baccarat_rate_limited{kind}."""
    node = await make_node(rate_pings=1, **TIGHT)
    client = await open_client(node)
    for n in range(5):  # a burst of 3, then 2 refused
        await client.send({"type": "ping", "ref": n})
    for _ in range(2):
        assert (await client.reply("error"))["code"] == "RATE_LIMITED"
    text = node.metrics.render().decode()
    assert 'baccarat_rate_limited_total{kind="pings"} 2.0' in text
