"""The WebSocket server: subprotocol choice, frame and handshake limits, one Session per
connection, a cap on connections per client address and an Origin allow-list. Who a
connection is gets decided before the upgrade (server/auth.py): a refusal is an HTTP answer
with a one-line reason and no WebSocket, and so is one connection too many of one player."""

from __future__ import annotations

import asyncio
from collections import Counter
from collections.abc import Awaitable, Sequence
from dataclasses import dataclass
from http import HTTPStatus
from typing import Any

from websockets.asyncio.server import Server, ServerConnection, serve
from websockets.http11 import Request, Response
from websockets.typing import Origin, Subprotocol

from server.auth import Admission, AuthError, parse_query
from server.transport.http import (
    SERVER_HEADER,
    WS_PATH,
    HttpRoutes,
    decode_path,
    text_response,
)
from server.transport.session import Session, SessionContext
from server.wire.codec import SUBPROTOCOLS, Encoding

__all__ = ["LISTEN_BACKLOG", "Listen", "start_server"]

MAX_QUEUED_FRAMES = 16  # frames read ahead of the handler; then the socket stops being read
# Connections the kernel completes ahead of accept(). websockets' default (100) drops the SYNs
# of a burst of clients (a site restarting, a load test), which then retry after 1-7 s; the
# kernel caps this at net.core.somaxconn.
LISTEN_BACKLOG = 4096


@dataclass(frozen=True, slots=True)
class Listen:
    """Where and how the server accepts connections."""

    host: str
    port: int
    max_frame_bytes: int = 16 * 1024
    handshake_timeout: float = 10.0
    max_connections_per_ip: int = 0  # 0: no cap
    origins: tuple[str, ...] = ()  # browsers' Origin values allowed; empty: any
    backlog: int = LISTEN_BACKLOG
    reuse_port: bool = False  # several worker processes share the port (SO_REUSEPORT)


_OURS = frozenset(e.value for e in SUBPROTOCOLS)


def _select_subprotocol(
    connection: ServerConnection, offered: Sequence[Subprotocol]
) -> Subprotocol | None:
    """The first of ours the client offers; none offered (or none of ours) means msgpack."""
    for name in offered:
        if name in _OURS:
            return Subprotocol(name)
    return None


def _peer_ip(transport: asyncio.BaseTransport) -> str:
    peer = transport.get_extra_info("peername")
    return str(peer[0]) if isinstance(peer, tuple) and peer else "?"


def _admit(
    connection: ServerConnection, request: Request, ctx: SessionContext, per_player: Counter[str]
) -> Response | None:
    """Who the handshake is, before the upgrade: kept on the connection for its session, or
    refused with the policy's status (401; 400 for a malformed query) and a one-line reason.
    One connection more than --max-connections-per-player of one player gets 429."""
    try:
        admission = ctx.auth.authenticate(parse_query(request.path), request.headers)
    except AuthError as error:
        return text_response(HTTPStatus(error.status), error.reason + "\n")
    player = admission.identity.player
    cap = ctx.max_connections_per_player
    if player is not None and cap and per_player[player] >= cap:
        return text_response(
            HTTPStatus.TOO_MANY_REQUESTS, f"too many connections for player {player}\n"
        )
    if player is not None:
        per_player[player] += 1
    connection.admission = admission  # type: ignore[attr-defined]
    return None


def _forget_player(per_player: Counter[str], admission: Admission | None) -> None:
    player = admission.identity.player if admission is not None else None
    if player is not None:
        per_player[player] -= 1
        if per_player[player] <= 0:
            del per_player[player]


def _connection_class(per_ip: Counter[str], per_player: Counter[str]) -> type[ServerConnection]:
    """A connection that counts itself per client address from accept to close, and per
    player from admission to close."""

    class Connection(ServerConnection):
        # Slots, not instance attributes: websockets' connection already holds 28 attributes
        # and CPython shares an instance dict's keys only up to 30, so a few more would give
        # every connection a dict of its own (~1.3 KiB more per connection).
        __slots__ = ("admission", "peer_ip")

        def __init__(self, *args: Any, **kwargs: Any) -> None:
            super().__init__(*args, **kwargs)
            self.peer_ip = "?"
            self.admission: Admission | None = None  # who the handshake admitted (/ws only)

        def connection_made(self, transport: asyncio.BaseTransport) -> None:
            self.peer_ip = _peer_ip(transport)
            per_ip[self.peer_ip] += 1
            super().connection_made(transport)

        def connection_lost(self, exc: Exception | None) -> None:
            per_ip[self.peer_ip] -= 1
            if per_ip[self.peer_ip] <= 0:
                del per_ip[self.peer_ip]
            _forget_player(per_player, self.admission)
            super().connection_lost(exc)

    return Connection


def _listen_options(listen: Listen) -> dict[str, Any]:
    """websockets' serve() options for this listener, but the handler and the hooks."""
    # No Origin header (a non-browser client) is always allowed; browsers must match exactly.
    origins: list[Origin | None] | None = None
    if listen.origins:
        origins = [None, *(Origin(o) for o in listen.origins)]
    return {
        "select_subprotocol": _select_subprotocol,
        "subprotocols": [Subprotocol(e.value) for e in Encoding],
        "origins": origins,
        "compression": None,  # saves ~50 KiB per connection; events are small
        "max_size": listen.max_frame_bytes,
        "max_queue": MAX_QUEUED_FRAMES,
        "open_timeout": listen.handshake_timeout,
        "close_timeout": 2,
        "ping_interval": 20,
        "ping_timeout": 20,
        "server_header": SERVER_HEADER,
        "backlog": listen.backlog,  # passed on to loop.create_server
        "reuse_port": listen.reuse_port or None,
    }


async def start_server(ctx: SessionContext, listen: Listen, routes: HttpRoutes) -> Server:
    # Every open TCP connection per client address, counted from accept to close, so
    # handshakes in flight count too and a burst of them cannot pass the cap together.
    per_ip: Counter[str] = Counter()
    # Open connections per player on this node, counted from admission to close.
    per_player: Counter[str] = Counter()
    connection_class = _connection_class(per_ip, per_player)

    async def process_request(connection: ServerConnection, request: Request) -> Response | None:
        if decode_path(request.path) == WS_PATH:
            cap = listen.max_connections_per_ip
            peer_ip: str = getattr(connection, "peer_ip", "?")
            if cap and per_ip[peer_ip] > cap:  # this connection is counted already
                return text_response(HTTPStatus.TOO_MANY_REQUESTS, "too many connections\n")
            refused = _admit(connection, request, ctx, per_player)
            if refused is not None:
                return refused
        return await routes(connection, request)

    def handler(ws: ServerConnection) -> Awaitable[None]:
        # The handshake is done and its response (~1 KiB of headers) is never read again;
        # websockets would keep it for the connection's life.
        ws.response = None
        # The session's own coroutine, not one awaiting it: a frame less per connection.
        return Session(ws, ctx, getattr(ws, "admission", None)).serve()

    return await serve(
        handler,
        listen.host,
        listen.port,
        process_request=process_request,
        create_connection=connection_class,
        **_listen_options(listen),
    )
