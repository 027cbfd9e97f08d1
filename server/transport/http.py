"""Plain HTTP on the public port, answered before the WebSocket upgrade: health, the lobby, the
demo client's files. (/metrics, /status and /api/... are on the admin listener: admin.py.)

`/healthz` is liveness (the process answers); `/readyz` is readiness (the store answers and the
node is not draining), for a load balancer to stop sending clients here. A request path is
percent-decoded strictly: NUL or control characters, bad percent-encoding or bytes that are not
UTF-8 get 400; anything that names no file under the static folder, `..` included, gets 404.
These routes answer GET and HEAD (the head alone, Content-Length included); any other method
gets 405 with `Allow: GET, HEAD`.

Static files are never held whole per request: a file up to SMALL_FILE_BYTES is read once and
kept (checked against its size and mtime on each request, so an edited page is served fresh);
a bigger one is streamed from disk in CHUNK_BYTES pieces with the connection's flow control,
so a request holds one chunk and the transport's write buffer. websockets sends one Response
from process_request and then half-closes, so a streamed file writes its head and all but its
last chunk to the transport itself and hands websockets the last chunk to send (`_Rest`). The
whole answer must be read within the handshake timeout, as any plain HTTP answer here.
"""

from __future__ import annotations

import dataclasses
import json
import mimetypes
import os
import re
from collections.abc import Awaitable, Callable
from http import HTTPStatus
from pathlib import Path
from typing import Any, BinaryIO
from urllib.parse import unquote

from websockets.asyncio.server import ServerConnection
from websockets.datastructures import Headers
from websockets.http11 import Request, Response

__all__ = [
    "CHUNK_BYTES",
    "SERVER_HEADER",
    "SMALL_FILE_BYTES",
    "HttpRoutes",
    "Readiness",
    "decode_path",
    "json_response",
    "text_response",
]

WS_PATH = "/ws"
SERVER_HEADER = "baccarat-live"
SMALL_FILE_BYTES = 256 * 1024  # a static file up to this size is kept in memory once
CACHE_BUDGET_BYTES = 8 * 1024 * 1024  # all kept files together; past it, files are streamed
CHUNK_BYTES = 64 * 1024  # a streamed file is read and written in pieces of this size
PLAIN_METHODS = ("GET", "HEAD")
_BAD_PERCENT = re.compile("%(?![0-9A-Fa-f]{2})")
_CONTROL = re.compile(r"[\x00-\x1f\x7f\\]")  # and backslash: no file name of ours has one


def _headers(content_type: str, length: int) -> Headers:
    return Headers(
        [("Content-Type", content_type), ("Content-Length", str(length)), ("Connection", "close")]
    )


def _response(status: HTTPStatus, body: bytes, content_type: str) -> Response:
    return Response(status.value, status.phrase, _headers(content_type, len(body)), body)


class _Rest(Response):
    """The last piece of a streamed file: its head and the pieces before were written to the
    transport already, so websockets sends only this body (and then half-closes)."""

    def serialize(self) -> bytes:
        return bytes(self.body)


@dataclasses.dataclass(frozen=True, slots=True)
class _Kept:
    """A small static file kept in memory, valid while its size and mtime are these."""

    size: int
    mtime_ns: int
    body: bytes


def _open_file(target: Path) -> BinaryIO:
    # Blocking, like the stat and resolve before it: on the page's few files this is a
    # page-cache hit of microseconds, cheaper than a thread hop per chunk.
    return target.open("rb")


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
        static_dir: Path | None,
        readiness: Readiness | None = None,
        lobby: Callable[[], dict[str, Any]] | None = None,
        draining: Callable[[], bool] | None = None,
    ) -> None:
        self.static_dir = static_dir.resolve() if static_dir else None
        self.readiness = readiness
        self.lobby = lobby  # GET /lobby: what any page may know (this node's watchers)
        # A draining node refuses new WebSockets with 503: a proxy that cannot poll /readyz
        # (open-source nginx) retries the handshake on another node (proxy_next_upstream).
        self.draining = draining
        self._kept: dict[Path, _Kept] = {}  # small static files, read once
        self._kept_bytes = 0

    async def __call__(self, connection: ServerConnection, request: Request) -> Response | None:
        path = decode_path(request.path)
        if path is None:
            return text_response(HTTPStatus.BAD_REQUEST, "bad request path\n")
        if path == WS_PATH:
            if self.draining is not None and self.draining():
                return text_response(HTTPStatus.SERVICE_UNAVAILABLE, "draining\n")
            return None  # go on with the WebSocket handshake (websockets takes only GET)
        method = str(getattr(request, "method", "GET"))  # websockets < 16 parses GETs only
        if method not in PLAIN_METHODS:
            response = text_response(
                HTTPStatus.METHOD_NOT_ALLOWED, f"use {' or '.join(PLAIN_METHODS)}\n"
            )
            response.headers["Allow"] = ", ".join(PLAIN_METHODS)
            return response
        response = await self._plain(connection, path, head_only=method == "HEAD")
        if method == "HEAD" and response.body:  # the head alone, Content-Length as for GET
            response = dataclasses.replace(response, body=b"")
        return response

    async def _plain(self, connection: ServerConnection, path: str, head_only: bool) -> Response:
        if path == "/healthz":
            return text_response(HTTPStatus.OK, "ok\n")
        if path == "/readyz":
            return await self._ready()
        if path == "/lobby" and self.lobby is not None:
            return json_response(self.lobby())
        return await self._static(connection, path, head_only)

    async def _ready(self) -> Response:
        problem = await self.readiness() if self.readiness else None
        if problem is None:
            return text_response(HTTPStatus.OK, "ready\n")
        return text_response(HTTPStatus.SERVICE_UNAVAILABLE, problem + "\n")

    async def _static(self, connection: ServerConnection, path: str, head_only: bool) -> Response:
        not_found = text_response(HTTPStatus.NOT_FOUND, "not found\n")
        if self.static_dir is None:
            return not_found
        relative = "index.html" if path == "/" else path.lstrip("/")
        try:
            target = (self.static_dir / relative).resolve()
            if not target.is_relative_to(self.static_dir) or not target.is_file():
                return not_found
            content_type = mimetypes.guess_type(target.name)[0] or "application/octet-stream"
            kept = self._kept_file(target)
            if kept is not None:
                return _response(HTTPStatus.OK, kept.body, content_type)
            with _open_file(target) as file:
                size = os.fstat(file.fileno()).st_size
                if head_only:
                    return Response(200, "OK", _headers(content_type, size), b"")
                return await self._stream(connection, file, size, content_type)
        except OSError:  # a name too long, a file we may not read, ...: nothing to serve
            return not_found

    def _kept_file(self, target: Path) -> _Kept | None:
        """The file from memory if it is small (read now if it is new or changed); None for a
        file to stream."""
        info = target.stat()
        kept = self._kept.get(target)
        if kept is not None and (kept.size, kept.mtime_ns) == (info.st_size, info.st_mtime_ns):
            return kept
        if kept is not None:  # changed on disk: forget the old copy
            del self._kept[target]
            self._kept_bytes -= kept.size
        if info.st_size > SMALL_FILE_BYTES or self._kept_bytes + info.st_size > CACHE_BUDGET_BYTES:
            return None
        body = target.read_bytes()
        if len(body) != info.st_size:
            return None  # changed while read: stream it this time
        kept = self._kept[target] = _Kept(info.st_size, info.st_mtime_ns, body)
        self._kept_bytes += kept.size
        return kept

    async def _stream(
        self, connection: ServerConnection, file: BinaryIO, size: int, content_type: str
    ) -> Response:
        """Write the head and all but the last chunk to the transport, waiting for the client
        to take each; the last chunk is the Response that websockets sends."""
        headers = _headers(content_type, size)
        headers["Server"] = SERVER_HEADER  # websockets adds it to the Responses it writes
        transport = connection.transport
        transport.write(b"HTTP/1.1 200 OK\r\n" + headers.serialize())
        left = size
        try:
            while left > CHUNK_BYTES:
                chunk = file.read(CHUNK_BYTES)
                if len(chunk) < CHUNK_BYTES:
                    raise OSError("the file shrank while it was sent")
                if transport.is_closing():  # the client went away
                    return _Rest(200, "OK", headers, b"")
                transport.write(chunk)
                left -= len(chunk)
                await connection.drain()  # flow control: the transport holds at most its limit
            last = file.read(left)
            if len(last) < left:
                raise OSError("the file shrank while it was sent")
        except OSError:
            # The head promised `size` bytes: a short answer must look cut off, not complete.
            transport.abort()
            return _Rest(200, "OK", headers, b"")
        return _Rest(200, "OK", headers, last)
