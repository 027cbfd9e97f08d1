"""Plain HTTP beside the WebSocket: health, status, static files; and subprotocol choice."""

from __future__ import annotations

import asyncio
import hashlib
import json
import os
import socket
import tracemalloc
from pathlib import Path

import msgpack
import pytest
from websockets.asyncio.client import connect
from websockets.exceptions import ConnectionClosed, InvalidStatus

from server.app import Node
from server.config import Settings
from server.wire.codec import Encoding
from tests.redis_server import start_redis
from tests.transport.conftest import (
    FAST,
    TABLE,
    ClientFactory,
    NodeFactory,
    ServerLog,
    within,
)
from tests.transport.http_client import parse_answer, port_of, request_bytes, send_raw


async def _get(node: Node, path: str, admin: bool = False) -> tuple[int, dict[str, str], bytes]:
    """One GET over a raw TCP connection (to the admin listener if told); the server answers
    and closes."""
    reader, writer = await asyncio.open_connection("127.0.0.1", port_of(node, admin))
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


async def test_readyz_is_ok_while_the_store_answers(node: Node) -> None:
    """GET /readyz answers 200 ready when the store answers and the node is not draining."""
    assert (await _get(node, "/readyz"))[::2] == (200, b"ready\n")


async def test_a_draining_node_is_alive_but_not_ready(
    node: Node, open_client: ClientFactory
) -> None:
    """While draining, /readyz is 503 and /healthz stays 200; clients are still served, and a
    new WebSocket handshake gets 503 (a proxy retries it on another node)."""
    client = await open_client(node)
    node.begin_drain()
    assert (await _get(node, "/readyz"))[::2] == (503, b"draining\n")
    assert (await _get(node, "/healthz"))[0] == 200
    assert (await client.ping("draining"))["ref"] == "draining"
    with pytest.raises(InvalidStatus) as refused:
        await connect(f"ws://127.0.0.1:{node.port}/ws", open_timeout=within())
    assert refused.value.response.status_code == 503
    assert refused.value.response.body == b"draining\n"


async def test_drain_then_stop_closes_clients_with_1001_and_releases_leases(
    open_client: ClientFactory,
) -> None:
    """drain_and_stop: /readyz 503 at once, clients served through the drain, then closed
    with 1001 and the table's lease released."""
    node = Node(Settings.from_options(port=0, **{**FAST, "drain_seconds": 0.3 * within(1)}))
    await node.start()
    try:
        client = await open_client(node)
        await client.join()
        stopping = asyncio.create_task(node.drain_and_stop())
        await asyncio.sleep(0)  # let it begin
        assert (await _get(node, "/readyz"))[0] == 503
        assert (await client.ping("in-drain"))["ref"] == "in-drain"
        assert not stopping.done()
        with pytest.raises(ConnectionClosed) as closed:
            await client.expect(lambda m: False, seconds=5)
        assert closed.value.rcvd is not None and closed.value.rcvd.code == 1001
        await asyncio.wait_for(stopping, within())
    finally:
        await node.stop()
    assert node.stopped


@pytest.mark.redis
async def test_readyz_is_503_while_redis_is_down() -> None:
    """On the Redis engine /readyz follows the store: 503 while Redis is down, 200 again once
    it answers; /healthz stays 200 throughout."""
    with start_redis() as redis:
        from server.store.redis import RedisStore

        store = RedisStore.from_url(redis.url, key_prefix="readyz")
        async with Node(Settings.from_options(port=0, **FAST), store=store) as node:
            assert (await _get(node, "/readyz"))[0] == 200
            redis.stop()
            status, _, body = await _get(node, "/readyz")
            assert (status, body) == (503, b"store unreachable\n")
            assert (await _get(node, "/healthz"))[0] == 200
            redis.start()
            assert (await _get(node, "/readyz"))[0] == 200


@pytest.mark.redis
async def test_status_is_503_with_what_is_known_while_redis_is_down(
    server_log: ServerLog,
) -> None:
    """GET /status while Redis is down was a 500 and a traceback per call: it is 503 with
    what the node knows without its store (its id, the tables it holds, its connections) and
    an `error`; 200 again once Redis answers."""
    with start_redis() as redis:
        from server.store.redis import RedisStore

        store = RedisStore.from_url(redis.url, key_prefix="status-down")
        async with Node(Settings.from_options(port=0, **FAST), store=store) as node:
            status, _, body = await _get(node, "/status", admin=True)
            assert status == 200 and "error" not in json.loads(body)
            redis.stop()
            for _ in range(2):
                status, headers, body = await _get(node, "/status", admin=True)
                assert status == 503 and headers["content-type"] == "application/json"
                report = json.loads(body)
                assert report["error"] == "storage is unavailable"
                assert report["node"] == "test-node" and isinstance(report["owned"], list)
                assert report["connections"] == 0 and report["draining"] is False
            assert server_log.failures() == []
            redis.start()
            assert (await _get(node, "/status", admin=True))[0] == 200


@pytest.mark.parametrize(
    "path",
    ["/a%00b", "/a\x00b", "/%zz", "/a%2", "/%ff", "/%c3%28", "/a%0Ab", "/a\\b", "/a\x7fb"],
    ids=repr,
)
async def test_malformed_paths_are_400_without_a_traceback(
    server_log: ServerLog, make_node: NodeFactory, static_dir: Path, path: str
) -> None:
    """NUL or control characters (raw or percent-encoded), bad percent-encoding, bytes that are
    not UTF-8 and backslashes: 400, and nothing in the log (GET /a%00b was a 500)."""
    node = await make_node(static_dir=str(static_dir))
    status, _, body = await _get(node, path)
    assert (status, body) == (400, b"bad request path\n")
    assert server_log.failures() == []


async def test_paths_naming_nothing_we_serve_are_404(
    server_log: ServerLog, make_node: NodeFactory, static_dir: Path
) -> None:
    """A name too long for the file system, a folder, `..` in any spelling: 404, no log."""
    node = await make_node(static_dir=str(static_dir))
    (static_dir / "sub").mkdir()
    for path in ("/" + "a" * 5000, "/sub", "/sub/", "/sub/../../secret.txt", "/.%2e/secret.txt"):
        status, _, body = await _get(node, path)
        assert status == 404 and b"outside" not in body, path
    assert (await _get(node, "/app%2Ejs"))[0] == 200  # percent-decoded before lookup
    assert server_log.failures() == []


async def test_status_reports_the_node(node: Node, open_client: ClientFactory) -> None:
    """GET /status is JSON naming the node, the table it owns and its connections."""
    client = await open_client(node)
    await client.join()
    status, headers, body = await _get(node, "/status", admin=True)
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


async def test_head_is_the_head_alone_and_other_methods_are_405(
    make_node: NodeFactory, static_dir: Path, server_log: ServerLog
) -> None:
    """HEAD / answers GET's head (Content-Length included) without a body; DELETE, PUT or a
    bodiless POST on a static path is 405 with `Allow: GET, HEAD` (they were all served the
    page). The node's own plain routes follow the same rule."""
    node = await make_node(static_dir=str(static_dir))
    head = parse_answer(await send_raw(node, request_bytes("HEAD", "/")))
    got = parse_answer(await send_raw(node, request_bytes("GET", "/")))
    assert (head.status, head.body) == (200, b"")
    assert head.headers == got.headers and head.headers["content-length"] == str(len(got.body))
    for method, path in (
        ("DELETE", "/"),
        ("PUT", "/app.js"),
        ("POST", "/"),
        ("DELETE", "/healthz"),
    ):
        refused = parse_answer(await send_raw(node, request_bytes(method, path)))
        assert (refused.status, refused.headers["allow"]) == (405, "GET, HEAD"), (method, path)
        assert refused.body == b"use GET or HEAD\n"
    healthz = parse_answer(await send_raw(node, request_bytes("HEAD", "/healthz")))
    assert (healthz.status, healthz.headers["content-length"], healthz.body) == (200, "3", b"")
    assert server_log.failures() == []


async def test_a_small_file_changed_on_disk_is_served_as_it_is_now(
    make_node: NodeFactory, static_dir: Path
) -> None:
    """Small files are kept in memory once, but an edited page is not served stale."""
    node = await make_node(static_dir=str(static_dir))
    assert (await _get(node, "/"))[2] == b"<h1>baccarat</h1>"
    (static_dir / "index.html").write_text("<h1>baccarat, edited</h1>")
    assert (await _get(node, "/"))[2] == b"<h1>baccarat, edited</h1>"


async def _fetch_counting(port: int, path: str) -> tuple[dict[str, str], int, str]:
    """GET over a raw socket read into fixed buffers (a small one until the head is in): the
    headers, the body's length and its sha256, with no allocation growing with the body, so
    tracemalloc sees the server's memory."""
    loop = asyncio.get_running_loop()
    small, buffer = memoryview(bytearray(1024)), memoryview(bytearray(64 * 1024))
    digest, size, pending = hashlib.sha256(), 0, b""
    with socket.socket() as sock:
        sock.setblocking(False)
        await loop.sock_connect(sock, ("127.0.0.1", port))
        await loop.sock_sendall(sock, request_bytes("GET", path))
        while b"\r\n\r\n" not in pending:
            received = await loop.sock_recv_into(sock, small)
            assert received, pending
            pending += small[:received]
        head, _, rest = pending.partition(b"\r\n\r\n")
        digest.update(rest)
        size += len(rest)
        while received := await loop.sock_recv_into(sock, buffer):
            digest.update(buffer[:received])
            size += received
    return parse_answer(head + b"\r\n\r\n").headers, size, digest.hexdigest()


async def test_a_big_file_is_streamed_to_many_clients_in_bounded_memory(
    make_node: NodeFactory, static_dir: Path
) -> None:
    """A 4 MB file to 8 clients at once: each gets it whole, and the server never holds a
    copy of it per request (it read the whole file per request and serialized it again:
    8 clients took the RSS from 43 MB to 649 MB). Counted with tracemalloc while the clients
    read into fixed buffers: the peak stays below one copy of the file, where reading it whole
    takes two per request. HEAD gives its length without it."""
    data = os.urandom(4 * 1024 * 1024)
    (static_dir / "big.bin").write_bytes(data)
    node = await make_node(static_dir=str(static_dir))
    tracemalloc.start()
    try:
        async with asyncio.timeout(within(60)):
            fetched = await asyncio.gather(
                *(_fetch_counting(node.port, "/big.bin") for _ in range(8))
            )
        peak = tracemalloc.get_traced_memory()[1]
    finally:
        tracemalloc.stop()
    expected = hashlib.sha256(data).hexdigest()
    for headers, size, digest in fetched:
        assert headers["content-length"] == str(len(data))
        assert (size, digest) == (len(data), expected)
    assert peak < len(data), f"peak {peak} bytes while serving a {len(data)}-byte file 8 times"
    head = parse_answer(await send_raw(node, request_bytes("HEAD", "/big.bin")))
    assert (head.status, head.headers["content-length"], head.body) == (200, str(len(data)), b"")


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
    assert welcome["balance"] == node.settings.resolved_initial_balance()
    assert welcome["node"] == "test-node"
    assert [(t["id"], t["name"]) for t in welcome["tables"]] == [(TABLE, "classic8")]
