"""What an idle spectator's connection keeps on the server: thousands of them share a node,
so each holds only what it needs (docs/benchmarks.md: RSS per idle spectator)."""

from __future__ import annotations

import contextlib

from websockets.asyncio.client import connect
from websockets.typing import Subprotocol

from server.transport.session import Session, _frames_queued
from tests.transport.conftest import Client, ClientFactory, NodeFactory, within


async def test_an_idle_joined_spectator_holds_no_buckets_lock_logger_or_response(
    make_node: NodeFactory,
) -> None:
    node = await make_node()
    url = f"ws://127.0.0.1:{node.port}/ws?role=spectator"
    async with contextlib.AsyncExitStack() as stack:
        ws = await stack.enter_async_context(
            connect(url, subprotocols=[Subprotocol("baccarat.v1.json")], open_timeout=within())
        )
        client = Client(ws)
        assert (await client.reply("welcome"))["role"] == "spectator"
        await client.join()
        await client.ping()  # every request before it was handled
        _check_idle(node.ctx.sessions)


def _check_idle(sessions: set[object]) -> None:
    (session,) = sessions
    assert isinstance(session, Session)
    handler = session.handler
    # Slots: no instance dict on the handler, none in use on the port.
    assert not hasattr(handler, "__dict__")
    assert not session.__dict__
    # The connection's own attributes are slots: websockets' instance dict keeps the shape
    # CPython shares between instances.
    assert not {"peer_ip", "admission", "posted", "_held"} & set(vars(session.ws))
    # Made on first use and dropped after: the join lock; never used: a logger, settlements.
    assert handler.join_lock is None
    assert handler._log is None
    assert handler.settled is None
    # Only the kinds asked for have a bucket (a join and a ping here); no refusal yet.
    assert handler.limits.buckets is not None
    assert set(handler.limits.buckets) == {"joins", "pings"}
    assert handler.limits.refusals is None
    # The handshake's response is not kept once the connection is open.
    assert session.ws.response is None


async def test_an_idle_connection_has_no_frame_queued(
    make_node: NodeFactory, open_client: ClientFactory
) -> None:
    """The session yields after a frame only when another one is queued: an idle connection
    must read as having none (if websockets' queue moved, this says so instead of every
    frame silently paying a turn of the loop)."""
    node = await make_node()
    client = await open_client(node)
    await client.ping()
    (session,) = node.ctx.sessions
    assert _frames_queued(session.ws) is False
