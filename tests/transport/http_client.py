"""A raw HTTP/1.1 client over loopback TCP for the operator API tests: one request per
connection (the server answers and closes), bytes written exactly as given, to the node's
admin listener or (admin=False) its public port."""

from __future__ import annotations

import asyncio
import json
from dataclasses import dataclass
from typing import Any

from server.app import Node
from server.auth import mint_token
from tests.transport.conftest import within


@dataclass(frozen=True, slots=True)
class Answer:
    status: int
    headers: dict[str, str]
    body: bytes

    def json(self) -> Any:
        assert self.headers.get("content-type") == "application/json", self.headers
        return json.loads(self.body)


def parse_answer(raw: bytes) -> Answer:
    head, _, body = raw.partition(b"\r\n\r\n")
    status_line, *header_lines = head.decode().split("\r\n")
    headers = {}
    for line in header_lines:
        name, _, value = line.partition(":")
        headers[name.strip().lower()] = value.strip()
    return Answer(int(status_line.split()[1]), headers, body)


def port_of(node: Node, admin: bool) -> int:
    if not admin:
        return node.port
    assert node.admin_port is not None, "the node runs without its admin listener"
    return node.admin_port


async def send_raw(node: Node, *chunks: bytes, admin: bool = False) -> bytes:
    """Write each chunk (draining between them) and read until the server closes."""
    reader, writer = await asyncio.open_connection("127.0.0.1", port_of(node, admin))
    try:
        for chunk in chunks:
            writer.write(chunk)
            await writer.drain()
        return await asyncio.wait_for(reader.read(), within())
    finally:
        writer.close()
        await writer.wait_closed()


def request_bytes(
    method: str,
    path: str,
    body: bytes | None = None,
    token: str | None = None,
    headers: dict[str, str] | list[tuple[str, str]] | None = None,
) -> bytes:
    """The request's bytes; `headers` as pairs may name a header more than once."""
    lines = [f"{method} {path} HTTP/1.1", "Host: localhost"]
    if token is not None:
        lines.append(f"Authorization: Bearer {token}")
    if body is not None:
        lines.append(f"Content-Length: {len(body)}")
    pairs = headers.items() if isinstance(headers, dict) else headers or []
    lines += [f"{name}: {value}" for name, value in pairs]
    return ("\r\n".join(lines) + "\r\n\r\n").encode() + (body or b"")


async def call(
    node: Node,
    method: str,
    path: str,
    body: Any = None,
    token: str | None = None,
    admin: bool = True,
) -> Answer:
    """One request, to the admin listener unless told; `body` (not bytes) is sent as JSON."""
    raw = body if isinstance(body, bytes) or body is None else json.dumps(body).encode()
    return parse_answer(await send_raw(node, request_bytes(method, path, raw, token), admin=admin))


def token_for(node: Node, player: str = "ops", role: str = "operator") -> str:
    """A token the node accepts (its secret: shared, or its own in demo mode)."""
    return mint_token(node.auth.secret, player, role=role)
