"""Plain HTTP answered before the WebSocket upgrade: health, status, the demo client's files.

`/healthz` is liveness (the process answers); `/readyz` is readiness (the store answers and the
node is not draining), for a load balancer to stop sending clients here. A request path is
percent-decoded strictly: NUL or control characters, bad percent-encoding or bytes that are not
UTF-8 get 400; anything that names no file under the static folder, `..` included, gets 404.
"""

from __future__ import annotations

import json
import mimetypes
import re
from collections.abc import Awaitable, Callable
from http import HTTPStatus
from pathlib import Path
from typing import TYPE_CHECKING, Any
from urllib.parse import unquote

from websockets.asyncio.server import ServerConnection
from websockets.datastructures import Headers
from websockets.http11 import Request, Response

from server.metrics import CONTENT_TYPE as METRICS_CONTENT_TYPE
from server.transport.http_body import API_PREFIX, posted_body, request_method

if TYPE_CHECKING:  # operator_api builds its answers with this module's json_response
    from server.transport.operator_api import OperatorApi

__all__ = ["HttpRoutes", "Readiness", "decode_path", "json_response", "text_response"]

WS_PATH = "/ws"
_BAD_PERCENT = re.compile("%(?![0-9A-Fa-f]{2})")
_CONTROL = re.compile(r"[\x00-\x1f\x7f\\]")  # and backslash: no file name of ours has one


def _response(status: HTTPStatus, body: bytes, content_type: str) -> Response:
    headers = Headers(
        [
            ("Content-Type", content_type),
            ("Content-Length", str(len(body))),
            ("Connection", "close"),
        ]
    )
    return Response(status.value, status.phrase, headers, body)


def json_response(data: Any, status: HTTPStatus = HTTPStatus.OK) -> Response:
    return _response(status, json.dumps(data).encode(), "application/json")


def text_response(status: HTTPStatus, text: str) -> Response:
    return _response(status, text.encode(), "text/plain")


def decode_path(target: str) -> str | None:
    """The request path, percent-decoded; None if it is malformed (answered 400)."""
    path = target.split("?", 1)[0]
    if _BAD_PERCENT.search(path):
        return None
    try:
        decoded = unquote(path, errors="strict")
    except UnicodeDecodeError:
        return None
    if not decoded.startswith("/") or _CONTROL.search(decoded):
        return None
    return decoded


Readiness = Callable[[], Awaitable[str | None]]  # None when ready, else why not


class HttpRoutes:
    """`process_request` for websockets.serve: everything but /ws is plain HTTP."""

    def __init__(
        self,
        status: Callable[[], Awaitable[dict[str, Any]]],
        static_dir: Path | None,
        readiness: Readiness | None = None,
        metrics: Callable[[], bytes] | None = None,
        api: OperatorApi | None = None,
        status_needs_operator: bool = False,
        lobby: Callable[[], dict[str, Any]] | None = None,
        draining: Callable[[], bool] | None = None,
    ) -> None:
        self.status = status
        self.static_dir = static_dir.resolve() if static_dir else None
        self.readiness = readiness
        self.metrics = metrics  # the Prometheus text of GET /metrics
        self.api = api  # /api/...: the operator API
        # With a secret configured /status says who owns what only to operators.
        self.status_needs_operator = status_needs_operator and api is not None
        self.lobby = lobby  # GET /lobby: what any page may know (this node's watchers)
        # A draining node refuses new WebSockets with 503: a proxy that cannot poll /readyz
        # (open-source nginx) retries the handshake on another node (proxy_next_upstream).
        self.draining = draining

    async def __call__(self, connection: ServerConnection, request: Request) -> Response | None:
        path = decode_path(request.path)
        if path is None:
            return text_response(HTTPStatus.BAD_REQUEST, "bad request path\n")
        if path == WS_PATH:
            if self.draining is not None and self.draining():
                return text_response(HTTPStatus.SERVICE_UNAVAILABLE, "draining\n")
            return None  # go on with the WebSocket handshake
        if path == "/healthz":
            return text_response(HTTPStatus.OK, "ok\n")
        if path == "/readyz":
            return await self._ready()
        if path.startswith(API_PREFIX) and self.api is not None:
            method = request_method(connection, request)
            return await self.api(request, method, path, posted_body(connection))
        if path == "/status":
            return await self._status(request)
        if path == "/lobby" and self.lobby is not None:
            return json_response(self.lobby())
        if path == "/metrics" and self.metrics is not None:
            return _response(HTTPStatus.OK, self.metrics(), METRICS_CONTENT_TYPE)
        return self._static(path)

    async def _status(self, request: Request) -> Response:
        if self.status_needs_operator:
            assert self.api is not None
            refused = self.api.refusal(request.headers)
            if refused is not None:
                return refused
        report = await self.status()
        # A report with an `error` is what the node knows without its store: 503.
        failed = "error" in report
        return json_response(report, HTTPStatus.SERVICE_UNAVAILABLE if failed else HTTPStatus.OK)

    async def _ready(self) -> Response:
        problem = await self.readiness() if self.readiness else None
        if problem is None:
            return text_response(HTTPStatus.OK, "ready\n")
        return text_response(HTTPStatus.SERVICE_UNAVAILABLE, problem + "\n")

    def _static(self, path: str) -> Response:
        not_found = text_response(HTTPStatus.NOT_FOUND, "not found\n")
        if self.static_dir is None:
            return not_found
        relative = "index.html" if path == "/" else path.lstrip("/")
        try:
            target = (self.static_dir / relative).resolve()
            if not target.is_relative_to(self.static_dir) or not target.is_file():
                return not_found
            body = target.read_bytes()
        except OSError:  # a name too long, a file we may not read, ...: nothing to serve
            return not_found
        content_type = mimetypes.guess_type(target.name)[0] or "application/octet-stream"
        return _response(HTTPStatus.OK, body, content_type)
