"""A client that stops reading is dropped once its send buffer is full; others never wait."""

from __future__ import annotations

import asyncio
import contextlib
import socket

import pytest
import structlog.testing
from websockets.asyncio.client import connect
from websockets.exceptions import ConnectionClosed
from websockets.typing import Subprotocol

from server.app import Node
from server.transport.session import Session
from server.wire.codec import Encoding, Frame
from tests.transport.conftest import (
    TABLE,
    Client,
    ClientFactory,
    NodeFactory,
    ServerLog,
    within,
)

BUFFER_LIMIT = 16 * 1024
KERNEL_BUFFER = 4096  # the kernel's share of the backlog is kept small (Linux doubles it)
# These clients flood on purpose to fill buffers; the rate limits would stop them first.
NO_RATE_LIMITS = {"rate_bets": 0, "rate_replays": 0}


def _shrink_kernel_buffers(node: Node) -> None:
    """Connections accepted from now on get a small kernel send buffer (accepted sockets
    inherit SO_SNDBUF from the listening socket), so the node's own buffer fills fast."""
    assert node.server is not None
    for listener in node.server.sockets:
        listener.setsockopt(socket.SOL_SOCKET, socket.SO_SNDBUF, KERNEL_BUFFER)


async def _stalled_client(node: Node, join: bool) -> tuple[Client, Session]:
    """A JSON client with tiny kernel buffers that (maybe joins, then) stops reading."""
    _shrink_kernel_buffers(node)
    sock = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
    sock.setsockopt(socket.SOL_SOCKET, socket.SO_RCVBUF, KERNEL_BUFFER)
    sock.setblocking(False)
    await asyncio.get_running_loop().sock_connect(sock, ("127.0.0.1", node.port))
    ws = await connect(
        f"ws://127.0.0.1:{node.port}/ws",
        sock=sock,
        subprotocols=[Subprotocol(Encoding.JSON.value)],
        open_timeout=within(),
        ping_interval=None,
        close_timeout=0.1,
    )
    client = Client(ws)
    client.welcome = await client.reply("welcome")
    if join:
        await client.join()
    session = next(s for s in node.ctx.sessions if s.player == client.welcome["player"])
    ws.transport.pause_reading()
    return client, session


async def _keep_betting(bettor: Client, snap_round: int) -> None:
    """Each round, as soon as it opens, place many small bets: totals change all window long."""
    round_no = snap_round
    number = 0
    while True:
        round_no = (await bettor.event("round_opened", round_no))["round"]
        for _ in range(250):
            number += 1
            await bettor.send(
                {
                    "type": "bet",
                    "table": TABLE,
                    "round": round_no,
                    "bet_id": f"burst-{number}",
                    "spot": "player",
                    "amount": 100,
                }
            )


async def test_a_stalled_subscriber_is_dropped_and_others_stay_on_time(
    make_node: NodeFactory, open_client: ClientFactory
) -> None:
    """A subscriber that stopped reading is cut; the others get every event on time."""
    # Table events show bet totals a few times a round, not every bet: short rounds make the
    # stalled client's backlog grow fast enough.
    node = await make_node(
        max_buffer_bytes=BUFFER_LIMIT, betting_window=0.05, totals_interval=0.01, **NO_RATE_LIMITS
    )
    with structlog.testing.capture_logs() as logs:
        spectator = await open_client(node, Encoding.MSGPACK)
        bettor = await open_client(node, Encoding.JSON)
        snap = await spectator.join()
        bettor_snap = await bettor.join()
        stalled, session = await _stalled_client(node, join=True)
        dropped = asyncio.ensure_future(session.ws.wait_closed())
        betting = asyncio.create_task(_keep_betting(bettor, bettor_snap["round"]))
        try:
            # Keep reading the spectator while the stalled client's backlog grows.
            await spectator.expect(lambda m: dropped.done() and m["type"] == "event", 10)
            assert node.hub.feeds[TABLE].subscriber_count == 2  # the stalled one is gone
            before_drop = len(spectator.events)
            # The others go on: the round plays to its end, on time, without a gap.
            last = await spectator.event("round_settled", spectator.events[-1]["round"] - 1)
        finally:
            for task in (dropped, betting):
                task.cancel()
            await asyncio.gather(dropped, betting, return_exceptions=True)
            await stalled.ws.close()
    assert [entry["event"] for entry in logs].count("slow_client_dropped") == 1
    assert len(spectator.events) > before_drop
    assert [e["seq"] for e in spectator.events] == list(range(snap["seq"] + 1, last["seq"] + 1))
    assert max(spectator.lags_ms) < within(0.5) * 1000, max(spectator.lags_ms)
    assert max(bettor.lags_ms) < within(0.5) * 1000, max(bettor.lags_ms)


def _record_buffer(session: Session) -> tuple[list[int], list[int]]:
    """Record, after each frame the server writes to this session, the frame's size and the
    bytes it then holds queued for the client: the memory this client costs the server."""
    sizes: list[int] = []
    queued: list[int] = []
    write = session.push_frame

    def recording(frame: Frame) -> None:
        write(frame)
        sizes.append(len(frame))
        queued.append(session.ws.transport.get_write_buffer_size())

    session.push_frame = recording  # type: ignore[method-assign]
    return sizes, queued


@pytest.mark.parametrize(
    ("limits", "cut_by"),
    [(NO_RATE_LIMITS, "slow_client_dropped"), ({}, "flooding_client_closed")],
    ids=["rate-limits-off", "default-limits"],
)
async def test_a_client_that_asks_but_never_reads_is_dropped(
    server_log: ServerLog,
    make_node: NodeFactory,
    open_client: ClientFactory,
    limits: dict[str, int],
    cut_by: str,
) -> None:
    """Direct answers count too: a client asking for replays without reading them is cut,
    by the buffer limit or, sooner, as a flood; what the server holds for it stays bounded
    (the limit plus one answer, and an answer is bounded too)."""
    node = await make_node(max_buffer_bytes=BUFFER_LIMIT, **limits)
    spectator = await open_client(node)
    snap = await spectator.join()
    stalled, session = await _stalled_client(node, join=False)
    sizes, queued = _record_buffer(session)
    dropped = asyncio.ensure_future(session.ws.wait_closed())

    async def flood() -> None:
        with contextlib.suppress(ConnectionClosed, ConnectionError):
            while not dropped.done():
                await stalled.send({"type": "replay", "table": TABLE, "round": snap["round"]})
                await asyncio.sleep(0)  # a fair share of the loop for the node under test

    flooding = asyncio.create_task(flood())
    try:
        await spectator.expect(lambda m: dropped.done() and m["type"] == "event", 10)
    finally:
        for task in (dropped, flooding):
            task.cancel()
        await asyncio.gather(dropped, flooding, return_exceptions=True)
        await stalled.ws.close()
    assert cut_by in server_log.names()
    assert max(sizes) < 64 * 1024  # a replay answer is capped (max_replay_events)
    assert max(queued) <= BUFFER_LIMIT + max(sizes)
    assert [e["seq"] for e in spectator.events] == list(
        range(snap["seq"] + 1, spectator.events[-1]["seq"] + 1)
    )
    assert max(spectator.lags_ms) < within(0.5) * 1000, max(spectator.lags_ms)
