"""Plain HTTP answered before the WebSocket upgrade: health, status, the demo client's files."""

from __future__ import annotations

import json
import mimetypes
from collections.abc import Awaitable, Callable
from http import HTTPStatus
from pathlib import Path
from typing import Any

from websockets.asyncio.server import ServerConnection
from websockets.datastructures import Headers
from websockets.http11 import Request, Response

from server.metrics import CONTENT_TYPE as METRICS_CONTENT_TYPE

__all__ = ["HttpRoutes"]

WS_PATH = "/ws"


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


class HttpRoutes:
    """`process_request` for websockets.serve: everything but /ws is plain HTTP."""

    def __init__(
        self,
        status: Callable[[], Awaitable[dict[str, Any]]],
        static_dir: Path | None,
        healthy: Callable[[], bool] = lambda: True,
        metrics: Callable[[], bytes] | None = None,
    ) -> None:
        self.status = status
        self.static_dir = static_dir.resolve() if static_dir else None
        self.healthy = healthy
        self.metrics = metrics  # the Prometheus text of GET /metrics

    async def __call__(self, connection: ServerConnection, request: Request) -> Response | None:
        path = request.path.split("?", 1)[0]
        if path == WS_PATH:
            return None  # go on with the WebSocket handshake
        if path == "/healthz":
            ok = self.healthy()
            status = HTTPStatus.OK if ok else HTTPStatus.SERVICE_UNAVAILABLE
            return _response(status, b"ok\n" if ok else b"draining\n", "text/plain")
        if path == "/status":
            return json_response(await self.status())
        if path == "/metrics" and self.metrics is not None:
            return _response(HTTPStatus.OK, self.metrics(), METRICS_CONTENT_TYPE)
        return self._static(path)

    def _static(self, path: str) -> Response:
        if self.static_dir is None:
            return _response(HTTPStatus.NOT_FOUND, b"not found\n", "text/plain")
        relative = "index.html" if path in ("", "/") else path.lstrip("/")
        target = (self.static_dir / relative).resolve()
        if not target.is_relative_to(self.static_dir) or not target.is_file():
            return _response(HTTPStatus.NOT_FOUND, b"not found\n", "text/plain")
        content_type = mimetypes.guess_type(target.name)[0] or "application/octet-stream"
        return _response(HTTPStatus.OK, target.read_bytes(), content_type)
