"""Direct answers are framed at once and written to the socket at the end of the loop's turn
(server/transport/turn_writes.py): in order with the table's events, every connection of a
turn in one flush, and a connection gone before its flush costs nothing."""

from __future__ import annotations

import asyncio

from websockets.asyncio.server import broadcast

from server.app import Node
from server.transport.session import Session
from server.wire import shapes
from server.wire.codec import Encoding, encode
from tests.transport.conftest import Client, ClientFactory, NodeFactory, assert_table_deals


def _session_of(node: Node, client: Client) -> Session:
    return next(s for s in node.ctx.sessions if s.player == client.welcome["player"])


async def _next_turn() -> None:
    """Return once the callbacks scheduled before this call have run (the flush among them)."""
    done = asyncio.get_running_loop().create_future()
    asyncio.get_running_loop().call_soon(done.set_result, None)
    await done


async def test_answers_of_one_turn_wait_for_its_end_and_are_written_in_one_flush(
    make_node: NodeFactory, open_client: ClientFactory
) -> None:
    node = await make_node()
    first, second = await open_client(node), await open_client(node)
    writes = node.ctx.turn_writes
    for i, client in enumerate((first, second, first)):
        _session_of(node, client).send(shapes.pong(f"r{i}", i))
    assert writes.waiting == 2  # framed; the two connections wait for the turn's end
    await _next_turn()
    assert writes.waiting == 0
    assert [(await c.reply("pong"))["ref"] for c in (first, first, second)] == ["r0", "r2", "r1"]


async def test_an_answer_keeps_its_place_before_an_event_broadcast_in_the_same_turn(
    make_node: NodeFactory, open_client: ClientFactory
) -> None:
    """The feed writes events with `broadcast`, at once: an answer framed before it must
    still reach the client first (it is in the connection's buffer, not held aside)."""
    node = await make_node()
    client = await open_client(node, Encoding.JSON)
    session = _session_of(node, client)
    session.send(shapes.pong("before", 1))
    broadcast([session.ws], encode(shapes.pong("event", 2), Encoding.JSON))
    assert (await client.reply("pong"))["ref"] == "before"
    assert (await client.reply("pong"))["ref"] == "event"


async def test_a_connection_gone_before_its_flush_is_skipped(
    make_node: NodeFactory, open_client: ClientFactory
) -> None:
    node = await make_node()
    gone, other = await open_client(node), await open_client(node)
    _session_of(node, gone).send(shapes.pong("lost", 1))
    _session_of(node, other).send(shapes.pong("kept", 2))
    _session_of(node, gone).ws.transport.abort()  # cut before the turn ends
    await _next_turn()
    assert node.ctx.turn_writes.waiting == 0
    assert (await other.reply("pong"))["ref"] == "kept"
    await assert_table_deals(node, open_client)
