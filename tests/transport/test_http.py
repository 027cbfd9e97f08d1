"""Plain HTTP beside the WebSocket: health, status, static files; and subprotocol choice."""

from __future__ import annotations

import asyncio
import json
from pathlib import Path

import msgpack
from websockets.asyncio.client import connect

from server.app import Node
from server.wire.codec import Encoding
from tests.transport.conftest import TABLE, ClientFactory, NodeFactory, within


async def _get(node: Node, path: str) -> tuple[int, dict[str, str], bytes]:
    """One GET over a raw TCP connection; the server answers and closes."""
    reader, writer = await asyncio.open_connection("127.0.0.1", node.port)
    try:
        writer.write(f"GET {path} HTTP/1.1\r\nHost: localhost\r\n\r\n".encode())
        await writer.drain()
        raw = await asyncio.wait_for(reader.read(), within())
    finally:
        writer.close()
        await writer.wait_closed()
    head, _, body = raw.partition(b"\r\n\r\n")
    status_line, *header_lines = head.decode().split("\r\n")
    headers = {}
    for line in header_lines:
        name, _, value = line.partition(":")
        headers[name.strip().lower()] = value.strip()
    return int(status_line.split()[1]), headers, body


async def test_healthz_is_ok(node: Node) -> None:
    """GET /healthz answers 200 ok while the node serves."""
    status, headers, body = await _get(node, "/healthz")
    assert (status, body) == (200, b"ok\n")
    assert headers["content-type"] == "text/plain"


async def test_status_reports_the_node(node: Node, open_client: ClientFactory) -> None:
    """GET /status is JSON naming the node, the table it owns and its connections."""
    client = await open_client(node)
    await client.join()
    status, headers, body = await _get(node, "/status")
    assert status == 200 and headers["content-type"] == "application/json"
    report = json.loads(body)
    assert report["node"] == "test-node" and report["engine"] == "memory"
    assert [owned["table"] for owned in report["owned"]] == [TABLE]
    assert report["owned"][0]["token"] >= 1
    assert report["following"] == [TABLE]
    assert report["connections"] == 1
    assert report["subscribers"] == {TABLE: 1}
    assert report["draining"] is False


async def test_unknown_paths_are_404(node: Node) -> None:
    """Any other path is 404 when there is no static folder."""
    for path in ("/", "/nope", "/ws/extra", "/index.html"):
        status, _, _ = await _get(node, path)
        assert status == 404, path


async def test_static_files_are_served_from_their_folder(
    make_node: NodeFactory, static_dir: Path
) -> None:
    """With a static folder, / is its index.html, files are typed, nothing outside is served."""
    node = await make_node(static_dir=str(static_dir))
    status, headers, body = await _get(node, "/")
    assert (status, body) == (200, b"<h1>baccarat</h1>")
    assert headers["content-type"] == "text/html"
    status, headers, _ = await _get(node, "/app.js")
    assert status == 200 and "javascript" in headers["content-type"]
    for path in ("/missing.html", "/../secret.txt", "/%2e%2e/secret.txt"):
        status, _, body = await _get(node, path)
        assert status == 404 and b"outside" not in body, path


async def test_no_subprotocol_gets_msgpack(node: Node) -> None:
    """A client that offers no subprotocol is answered in msgpack binary frames."""
    async with connect(f"ws://127.0.0.1:{node.port}/ws", open_timeout=within()) as ws:
        assert ws.subprotocol is None
        frame = await asyncio.wait_for(ws.recv(), within())
        assert isinstance(frame, bytes)
        welcome = msgpack.unpackb(frame)
        assert welcome["type"] == "welcome" and welcome["encoding"] == Encoding.MSGPACK.value


async def test_the_first_known_subprotocol_is_chosen(
    node: Node, open_client: ClientFactory
) -> None:
    """Unknown subprotocols are skipped; only unknown ones means msgpack."""
    json_client = await open_client(node, subprotocols=["chat.v9", "baccarat.v1.json"])
    assert json_client.ws.subprotocol == "baccarat.v1.json"
    assert json_client.welcome["encoding"] == "baccarat.v1.json"
    msgpack_client = await open_client(node, subprotocols=["baccarat.v1.msgpack", "x"])
    assert msgpack_client.welcome["encoding"] == "baccarat.v1.msgpack"


async def test_welcome_lists_the_tables(node: Node, open_client: ClientFactory) -> None:
    """The welcome names the guest player, its balance, the node and each table's rules."""
    client = await open_client(node)
    welcome = client.welcome
    assert welcome["player"].startswith("guest-")
    assert welcome["balance"] == node.settings.demo_balance
    assert welcome["node"] == "test-node"
    assert [(t["id"], t["name"]) for t in welcome["tables"]] == [(TABLE, "classic8")]
