"""A node on a Redis that wants a password (the shipped deployments give it one, issue 16
item 20): `baccarat serve --redis redis://:PASSWORD@host:port/0` connects with it, and the
password shows up in no line the node writes, whether Redis answers, refuses it or is gone."""

from __future__ import annotations

import asyncio
import os
import signal
import sys
from pathlib import Path

import pytest

from tests.redis_server import start_redis

pytestmark = [pytest.mark.redis, pytest.mark.timeout(120)]

BACCARAT = Path(sys.executable).parent / "baccarat"
PASSWORD = "5f3a9c0e" * 8  # hex, as `openssl rand -hex 32` makes one (URL-safe)
SCALE = float(os.environ.get("TEST_TIMEOUT_SCALE", "1"))


async def _serve(url: str) -> asyncio.subprocess.Process:
    env = {k: v for k, v in os.environ.items() if not k.startswith("BACCARAT_")}
    return await asyncio.create_subprocess_exec(
        str(BACCARAT),
        "serve",
        "--port",
        "0",
        "--redis",
        url,
        "--tables",
        "t1=classic8",
        "--log-format",
        "json",
        "--drain-seconds",
        "0",
        stdout=asyncio.subprocess.PIPE,
        stderr=asyncio.subprocess.STDOUT,
        env=env,
    )


async def _until(node: asyncio.subprocess.Process, lines: list[str], word: str) -> None:
    """Read the node's output into `lines` until a line has `word`."""
    assert node.stdout is not None
    async with asyncio.timeout(30 * SCALE):
        while not lines or word not in lines[-1]:
            line = (await node.stdout.readline()).decode()
            assert line, f"the node exited before {word!r}: {lines}"
            lines.append(line)


async def test_a_node_uses_the_password_in_its_redis_url_and_never_writes_it() -> None:
    """The right password: the node takes its table, and when Redis goes away it says so;
    a wrong one: it stops at start-up with one line. Neither password appears in
    anything it wrote."""
    wrong = "0" * 64
    with start_redis(None, "--requirepass", PASSWORD) as redis:
        port = redis.port
        refused = await _serve(f"redis://:{wrong}@127.0.0.1:{port}/0")
        out, _ = await asyncio.wait_for(refused.communicate(), 30 * SCALE)
        refusal = out.decode()
        assert refused.returncode != 0 and "username-password" in refusal, refusal
        assert len(refusal.strip().splitlines()) == 1, refusal
        assert wrong not in refusal and PASSWORD not in refusal

        node = await _serve(f"redis://:{PASSWORD}@127.0.0.1:{port}/0")
        lines: list[str] = []
        try:
            await _until(node, lines, "table_owned")
            redis.stop()
            await _until(node, lines, "store_unavailable")
            node.send_signal(signal.SIGTERM)
            rest, _ = await asyncio.wait_for(node.communicate(), 30 * SCALE)
            lines.append(rest.decode())
        finally:
            if node.returncode is None:
                node.kill()
                await node.wait()
    written = "".join(lines)
    assert f"127.0.0.1:{port}" in written  # the store's errors name the address...
    assert PASSWORD not in written  # ...and never the password
