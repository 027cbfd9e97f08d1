"""The WebSocket server: subprotocol choice, frame limits, one Session per connection."""

from __future__ import annotations

from collections.abc import Sequence

from websockets.asyncio.server import Server, ServerConnection, serve
from websockets.typing import Subprotocol

from server.transport.http import HttpRoutes
from server.transport.session import Session, SessionContext
from server.wire.codec import SUBPROTOCOLS, Encoding

__all__ = ["start_server"]


def _select_subprotocol(
    connection: ServerConnection, offered: Sequence[Subprotocol]
) -> Subprotocol | None:
    """The first of ours the client offers; none offered (or none of ours) means msgpack."""
    for name in offered:
        if name in {e.value for e in SUBPROTOCOLS}:
            return Subprotocol(name)
    return None


async def start_server(
    ctx: SessionContext, host: str, port: int, routes: HttpRoutes, max_frame_bytes: int
) -> Server:
    async def handler(ws: ServerConnection) -> None:
        await Session(ws, ctx).serve()

    return await serve(
        handler,
        host,
        port,
        process_request=routes,
        select_subprotocol=_select_subprotocol,
        subprotocols=[Subprotocol(e.value) for e in Encoding],
        compression=None,  # saves ~50 KiB per connection; events are small
        max_size=max_frame_bytes,
        max_queue=64,
        close_timeout=2,
        ping_interval=20,
        ping_timeout=20,
        server_header="baccarat-live",
    )
