"""Small request bodies for the operator API, read before websockets parses the request.

websockets' HTTP/1.1 parser is made for handshakes and refuses any request with a body. The
server's connection class reads the body of a `POST /api/...` itself: it holds the bytes back
until the head and `Content-Length` bytes of body are in, keeps the body on the connection
(`posted_body`) and hands websockets the head without its body headers and with GET for POST
(websockets before 16 passes only GETs to process_request), so process_request sees an
ordinary request; `request_method` tells the real method. Only what starts with `POST ` is
held back; a WebSocket handshake passes straight through. A body that never completes is cut
off by the handshake timeout (websockets' open_timeout), as a slow handshake is.

A body we will not read is not read at all: the request still reaches process_request, with
the refusal instead of a body (413 too large, 411 chunked, 400 a malformed length), and the
connection closes after the answer. A POST with neither Content-Length nor Transfer-Encoding has
no body (RFC 9112, section 6.3), as `curl -X POST` sends a bodiless pause or resume.
"""

from __future__ import annotations

import asyncio
from dataclasses import dataclass
from http import HTTPStatus
from typing import Any

from websockets.asyncio.server import ServerConnection
from websockets.http11 import Request

__all__ = [
    "API_PREFIX",
    "MAX_BODY_BYTES",
    "BodyReading",
    "Posted",
    "posted_body",
    "request_method",
]

API_PREFIX = "/api/"
MAX_BODY_BYTES = 16 * 1024
# A head longer than this is left to websockets, whose own limits refuse it (8 KiB a line).
MAX_HEAD_BYTES = 64 * 1024
_POST = b"POST "
_END_OF_HEAD = b"\r\n\r\n"
_BODY_HEADERS = (b"content-length", b"transfer-encoding")


@dataclass(frozen=True, slots=True)
class Posted:
    """The body of a POST, or why it was not read (`refused`: the status and a reason)."""

    body: bytes = b""
    refused: tuple[HTTPStatus, str] | None = None


def _refuse(status: HTTPStatus, reason: str) -> Posted:
    return Posted(refused=(status, reason))


def _length(head_lines: list[bytes]) -> int | Posted:
    """The body's length from the head's headers, or the refusal."""
    lengths: set[bytes] = set()
    for line in head_lines:
        name, colon, value = line.partition(b":")
        if not colon:
            continue
        name = name.strip().lower()
        if name == b"transfer-encoding":
            return _refuse(HTTPStatus.LENGTH_REQUIRED, "send the body with a Content-Length")
        if name == b"content-length":
            lengths.add(value.strip())
    if not lengths:
        return 0  # no framing headers: a request without a body (RFC 9112, section 6.3)
    if len(lengths) > 1 or not next(iter(lengths)).isdigit():
        return _refuse(HTTPStatus.BAD_REQUEST, "bad Content-Length")
    length = int(next(iter(lengths)))
    if length > MAX_BODY_BYTES:
        return _refuse(
            HTTPStatus.REQUEST_ENTITY_TOO_LARGE, f"the body may have {MAX_BODY_BYTES} bytes"
        )
    return length


class BodyReading(ServerConnection):
    """A server connection that reads a small POST body for the operator API itself.

    Its state is in slots, not in the instance dict: websockets' connection already holds
    28 attributes and CPython shares an instance dict's keys only up to 30, so a few more
    would give every connection a dict of its own (~1.3 KiB more per connection)."""

    __slots__ = ("_dropping", "_held", "_passing", "posted")

    posted: Posted | None  # the body of this connection's POST, once read
    _held: bytearray | None  # bytes held back from websockets; None: not holding
    _passing: bool  # feed websockets as usual (False until the first bytes are judged)
    _dropping: bool  # the request was handed over: whatever follows it is not for us

    def __init__(self, *args: Any, **kwargs: Any) -> None:
        super().__init__(*args, **kwargs)
        self.posted, self._held, self._passing, self._dropping = None, None, True, False

    def connection_made(self, transport: asyncio.BaseTransport) -> None:
        self._held, self._passing = bytearray(), False
        super().connection_made(transport)

    def data_received(self, data: bytes) -> None:
        if self._passing:
            super().data_received(data)
            return
        if self._dropping or self._held is None:
            return
        held = self._held
        held += data
        if len(held) < len(_POST):
            if _POST.startswith(held):
                return  # "POS" so far: wait for the rest of the method
            self._pass_on(bytes(held))
            return
        if not held.startswith(_POST):
            self._pass_on(bytes(held))
            return
        end = held.find(_END_OF_HEAD)
        if end < 0:
            if len(held) > MAX_HEAD_BYTES:
                self._pass_on(bytes(held))  # websockets refuses the overlong head
            return
        lines = bytes(held[:end]).split(b"\r\n")
        target = lines[0].split(b" ")[1:2]
        if not target or not target[0].startswith(API_PREFIX.encode()):
            self._pass_on(bytes(held))  # not ours: websockets answers as it always did
            return
        length = _length(lines[1:])
        if isinstance(length, Posted):
            self._hand_over(lines, length)
            return
        start = end + len(_END_OF_HEAD)
        if len(held) - start < length:
            return  # wait for the rest of the body (bounded by the handshake timeout)
        self._hand_over(lines, Posted(bytes(held[start : start + length])))

    def _pass_on(self, data: bytes) -> None:
        self._held, self._passing = None, True
        super().data_received(data)

    def _hand_over(self, lines: list[bytes], posted: Posted) -> None:
        """Keep the body (or its refusal) and give websockets the head without body headers.
        Anything after the request (pipelined bytes, an unread body) is dropped: the
        connection closes once the request is answered."""
        self.posted = posted
        self._held, self._dropping = None, True
        kept = [b"GET " + lines[0].removeprefix(_POST)] + [
            line
            for line in lines[1:]
            if line.partition(b":")[0].strip().lower() not in _BODY_HEADERS
        ]
        super().data_received(b"\r\n".join(kept) + _END_OF_HEAD)


def posted_body(connection: ServerConnection) -> Posted | None:
    """The POST body read for this connection's request; None for a request without one."""
    return connection.posted if isinstance(connection, BodyReading) else None


def request_method(connection: ServerConnection, request: Request) -> str:
    """The request's real method: POST when its body was read here (websockets saw a GET)."""
    if posted_body(connection) is not None:
        return "POST"
    return str(getattr(request, "method", "GET"))  # websockets < 16: only GETs get here
