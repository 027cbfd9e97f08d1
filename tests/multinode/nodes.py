"""Real `baccarat serve` processes on one Redis, and a JSON WebSocket client for them."""

from __future__ import annotations

import asyncio
import contextlib
import json
import os
import re
import signal
import sys
from collections.abc import AsyncIterator
from typing import Any

from websockets.asyncio.client import ClientConnection, connect

SCALE = float(os.environ.get("TEST_TIMEOUT_SCALE", "1"))
FAST = {
    "--betting-window": "0.6",
    "--deal-interval": "0.03",
    "--close-pause": "0.03",
    "--result-pause": "0.03",
    "--next-round-pause": "0.05",
    "--lease-ttl": "1.5",
    "--drain-seconds": "0",  # SIGTERM stops at once: no load balancer to drain for
    # A free admin port, read from the startup line: the default (--port + 1) may be a port
    # another process of the test holds.
    "--admin-port": "0",
}
_SERVING = re.compile(r"serving on ws://[\d.]+:(\d+)/ws")
_ADMIN = re.compile(r"admin on http://[\d.]+:(\d+)/")


class NodeProcess:
    """One `baccarat serve --redis` process; its stderr is kept for failure reports. Its
    tables are `tables` (`--tables`), or a tables file's when `extra` has `--tables-file`."""

    def __init__(self, redis_url: str, node_id: str, tables: str = "t1=classic8", **extra: str):
        self.node_id = node_id
        options = {**FAST, **extra}
        if "--tables-file" not in options:
            options["--tables"] = tables
        self.argv = [
            sys.executable,
            "-m",
            "server.cli",
            "serve",
            "--port",
            "0",
            "--redis",
            redis_url,
            "--node-id",
            node_id,
            "--log-format",
            "json",
            *[item for pair in options.items() for item in pair],
        ]
        self.proc: asyncio.subprocess.Process | None = None
        self.port = 0
        self.admin_port = 0  # /status, /metrics, /api/...: the admin listener
        self.log: list[str] = []
        self._drain: asyncio.Task[None] | None = None
        self._new_line = asyncio.Condition()

    async def start(self) -> NodeProcess:
        self.proc = await asyncio.create_subprocess_exec(
            *self.argv, stderr=asyncio.subprocess.PIPE, stdout=asyncio.subprocess.DEVNULL
        )
        assert self.proc.stderr is not None
        async with asyncio.timeout(15 * SCALE):
            while not (self.port and self.admin_port):
                line = (await self.proc.stderr.readline()).decode()
                if not line:
                    raise RuntimeError(f"{self.node_id} exited:\n" + "".join(self.log))
                self.log.append(line)
                if match := _SERVING.search(line):
                    self.port = int(match.group(1))
                if match := _ADMIN.search(line):
                    self.admin_port = int(match.group(1))
        self._drain = asyncio.create_task(self._keep_draining())
        return self

    async def _keep_draining(self) -> None:
        assert self.proc is not None and self.proc.stderr is not None
        while line := await self.proc.stderr.readline():
            async with self._new_line:
                self.log.append(line.decode())
                self._new_line.notify_all()

    async def wait_for_log(self, text: str, wait: float = 10, start: int = 0) -> str:
        """The first log line from index `start` on that contains `text`, waiting for it."""
        async with asyncio.timeout(wait * SCALE), self._new_line:
            await self._new_line.wait_for(lambda: any(text in s for s in self.log[start:]))
        return next(s for s in self.log[start:] if text in s)

    @property
    def url(self) -> str:
        return f"ws://127.0.0.1:{self.port}/ws"

    def signal(self, sig: int) -> None:
        assert self.proc is not None
        self.proc.send_signal(sig)

    async def stop(self) -> int | None:
        if self.proc is None or self.proc.returncode is not None:
            return self.proc.returncode if self.proc else None
        with contextlib.suppress(ProcessLookupError):
            self.proc.send_signal(signal.SIGCONT)
            self.proc.terminate()
        try:
            async with asyncio.timeout(10 * SCALE):
                code = await self.proc.wait()
        except TimeoutError:
            self.proc.kill()
            code = await self.proc.wait()
        if self._drain is not None:
            # The output ends when every holder of the pipe has exited: a child the process
            # left behind (a worker) would keep it open, so the wait is bounded.
            try:
                async with asyncio.timeout(5 * SCALE):
                    await self._drain
            except TimeoutError:
                self._drain.cancel()
        return code

    async def status(self) -> dict[str, Any]:
        reader, writer = await asyncio.open_connection("127.0.0.1", self.admin_port)
        writer.write(b"GET /status HTTP/1.1\r\nHost: localhost\r\n\r\n")
        await writer.drain()
        raw = await reader.read()
        writer.close()
        return dict(json.loads(raw.split(b"\r\n\r\n", 1)[1]))


class Client:
    """A JSON client that records every message and can wait for a matching one."""

    def __init__(self, ws: ClientConnection) -> None:
        self.ws = ws
        self.messages: list[dict[str, Any]] = []
        self.welcome: dict[str, Any] = {}

    @classmethod
    @contextlib.asynccontextmanager
    async def connect(cls, url: str) -> AsyncIterator[Client]:
        async with connect(url, subprotocols=["baccarat.v1.json"]) as ws:  # type: ignore[list-item]
            client = cls(ws)
            client.welcome = await client.next("welcome")
            yield client

    async def send(self, **message: Any) -> None:
        await self.ws.send(json.dumps(message))

    async def next(self, type_: str, wait: float = 10, **match: Any) -> dict[str, Any]:
        """The next message of this type (and fields) from now on; others are recorded."""
        async with asyncio.timeout(wait * SCALE):
            while True:
                message = json.loads(await self.ws.recv())
                self.messages.append(message)
                if message.get("type") == type_ and all(
                    message.get(k) == v for k, v in match.items()
                ):
                    return dict(message)

    def events(self) -> list[dict[str, Any]]:
        return [m for m in self.messages if m.get("type") == "event"]
