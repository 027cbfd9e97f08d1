"""The listening socket: a burst of connections is queued by the kernel, not dropped."""

from __future__ import annotations

import socket

from server.app import Node
from server.transport.server import LISTEN_BACKLOG
from tests.transport.conftest import ClientFactory

BURST = 300  # well past websockets' default backlog of 100


def _somaxconn() -> int:
    try:
        with open("/proc/sys/net/core/somaxconn") as f:
            return int(f.read())
    except OSError:
        return LISTEN_BACKLOG


async def test_a_burst_of_connects_is_queued_while_the_server_is_busy(
    node: Node, open_client: ClientFactory
) -> None:
    # The node runs on this loop, which the connects below never yield to: nothing is
    # accepted meanwhile, so every connect must fit in the kernel's accept queue. With a
    # backlog of 100 the 102nd SYN is dropped and its connect waits for a retry (1 s+).
    limit = min(LISTEN_BACKLOG, _somaxconn())
    burst = min(BURST, limit - 1)
    sockets: list[socket.socket] = []
    try:
        for _ in range(burst):
            sockets.append(socket.create_connection(("127.0.0.1", node.port), timeout=0.5))
    finally:
        for sock in sockets:
            sock.close()
    assert len(sockets) == burst
    # And the server is still fine afterwards: the queued connections are simply accepted.
    client = await open_client(node)
    await client.ping()
