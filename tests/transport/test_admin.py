"""The admin listener (issue 17): /metrics, /status and /api/... answer there and only there;
the public port keeps /ws, the page, /lobby, /healthz and /readyz; --no-admin opens no port."""

from __future__ import annotations

import contextlib
import os
import re
import socket
import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path

import pytest

from tests.transport.conftest import ClientFactory, NodeFactory, within
from tests.transport.http_client import call, token_for

SECRET = "admin-listener-test-secret-0123456789abcdef"
ADMIN_PATHS = ("/metrics", "/status", "/api/tables")
PUBLIC_PATHS = ("/healthz", "/readyz", "/lobby", "/")


async def test_admin_routes_answer_only_on_the_admin_port(
    make_node: NodeFactory, open_client: ClientFactory, static_dir: Path
) -> None:
    """/metrics, /status and /api/... are 404 on the public port (a page is served there, so
    the 404 is not just a missing folder) and 200 on the admin one; the public routes are
    404 on the admin port. A POST to the API on the public port moves nothing."""
    node = await make_node(secret=SECRET, allow_guests=True, static_dir=str(static_dir))
    assert node.admin_port is not None and node.admin_port != node.port
    token = token_for(node)
    for path in ADMIN_PATHS:
        assert (await call(node, "GET", path, token=token, admin=False)).status == 404, path
        assert (await call(node, "GET", path, token=token)).status == 200, path
    for path in PUBLIC_PATHS:
        assert (await call(node, "GET", path, admin=False)).status == 200, path
        assert (await call(node, "GET", path)).status == 404, path
    public_pause = await call(node, "POST", "/api/tables/t1/pause", b"", token, admin=False)
    assert public_pause.status == 405
    assert await node.store.paused("t1") is False
    client = await open_client(node)  # and /ws is the public port's
    await client.ping()


async def test_no_admin_serves_the_public_port_alone(make_node: NodeFactory) -> None:
    """--no-admin: no admin listener, the public port as ever (admin routes 404 there too)."""
    node = await make_node(admin=False)
    assert node.admin is None and node.admin_port is None
    assert (await call(node, "GET", "/healthz", admin=False)).status == 200
    assert (await call(node, "GET", "/metrics", admin=False)).status == 404


def _free_pair() -> int:
    """A port P with P + 1 free as well (checked, not held: a race with other tests is
    unlikely on loopback and would fail loudly)."""
    for _ in range(50):
        with socket.socket() as probe:
            probe.bind(("127.0.0.1", 0))
            port: int = probe.getsockname()[1]
        if port < 65535 and _free(port) and _free(port + 1):
            return port
    raise RuntimeError("no two free ports in a row")


def _free(port: int) -> bool:
    with socket.socket() as probe:
        try:
            probe.bind(("127.0.0.1", port))
        except OSError:
            return False
    return True


@contextlib.contextmanager
def _serve(*args: str) -> Iterator[tuple[subprocess.Popen[str], list[str]]]:
    """`baccarat serve` in a process, until its startup lines are out; stopped after."""
    clean = {k: v for k, v in os.environ.items() if not k.startswith("BACCARAT_")}
    argv = [sys.executable, "-m", "server.cli", "serve", "--tables", "t1=classic8", *args]
    with subprocess.Popen(argv, stderr=subprocess.PIPE, text=True, env=clean) as proc:
        lines: list[str] = []
        try:
            assert proc.stderr is not None
            while not any("serving on" in line for line in lines):
                line = proc.stderr.readline()
                assert line, "".join(lines)
                lines.append(line)
            lines.append(proc.stderr.readline())  # the next line: the admin address, if any
            yield proc, lines
        finally:
            proc.terminate()
            proc.wait(within(10))


def _answers(port: int) -> bool:
    try:
        socket.create_connection(("127.0.0.1", port), timeout=within(1)).close()
    except OSError:
        return False
    return True


@pytest.mark.slow
def test_the_admin_port_is_the_public_one_plus_one_and_no_admin_opens_none() -> None:
    """By default the admin listener is on --port + 1 and the startup says so; --no-admin
    leaves that port closed and prints no admin line."""
    port = _free_pair()
    with _serve("--port", str(port), "--static-dir", "/nonexistent") as (_, lines):
        assert f"admin on http://127.0.0.1:{port + 1}/" in "".join(lines)
        assert _answers(port + 1)
    port = _free_pair()
    with _serve("--port", str(port), "--no-admin", "--static-dir", "/nonexistent") as (_, lines):
        assert not re.search("admin on", "".join(lines))
        assert _answers(port) and not _answers(port + 1)


def test_an_admin_port_that_cannot_be_is_one_line(capsys: pytest.CaptureFixture[str]) -> None:
    """--port 65535 leaves no room for the default admin port; the same port twice is refused."""
    from server.cli import main

    assert main(["serve", "--port", "65535"]) == 2
    assert "--admin-port" in capsys.readouterr().err
    assert main(["serve", "--port", "9000", "--admin-port", "9000"]) == 2
    assert "--admin-port must differ from --port" in capsys.readouterr().err
