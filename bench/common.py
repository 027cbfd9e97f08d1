"""What every benchmark shares: pinning to cores, server processes, CPU and memory readings.

The machine has few cores and the measures compare servers, so each server process (and its
Redis) runs on one core (`taskset -c 0`) and the load generator, this process, on another
(core 1). Without taskset or with one core, nothing is pinned and the report says so.
"""

from __future__ import annotations

import asyncio
import os
import platform
import re
import shutil
import subprocess
import sys
import time
from collections.abc import Sequence
from dataclasses import dataclass, field
from importlib import metadata
from pathlib import Path

import psutil

__all__ = [
    "ROOT",
    "CpuMeter",
    "ServerProcess",
    "machine_info",
    "pin_generator",
    "pinned",
    "quantile",
]

ROOT = Path(__file__).resolve().parents[1]
SERVER_CORE = 0
GENERATOR_CORE = 1
_SERVING = re.compile(r"serving on ws://[\d.]+:(\d+)")


def can_pin() -> bool:
    return shutil.which("taskset") is not None and (os.cpu_count() or 1) >= 2


def pinned(argv: Sequence[str], cores: str = str(SERVER_CORE)) -> list[str]:
    """The command run on the server core (or `cores`), if pinning is possible."""
    if can_pin():
        return ["taskset", "-c", cores, *argv]
    return list(argv)


def pin_generator() -> bool:
    """Move this process (the load generator) to its own core; False if it cannot."""
    if not can_pin():
        return False
    os.sched_setaffinity(0, {GENERATOR_CORE})
    return True


def quantile(values: Sequence[float], q: float) -> float:
    """The q-quantile of sorted values (nearest rank); 0 when empty."""
    if not values:
        return 0.0
    index = min(len(values) - 1, max(0, int(q * len(values) + 0.5) - 1))
    return values[index]


@dataclass
class CpuMeter:
    """CPU seconds (user + system) a set of processes used between start() and stop()."""

    pids: list[int]
    started: float = 0.0
    wall: float = 0.0
    cpu: float = 0.0
    _start: list[float] = field(default_factory=list)

    def _read(self) -> list[float]:
        readings = []
        for pid in self.pids:
            try:
                times = psutil.Process(pid).cpu_times()
                readings.append(times.user + times.system)
            except psutil.Error:
                readings.append(0.0)
        return readings

    def start(self) -> None:
        self.started = time.perf_counter()
        self._start = self._read()

    def stop(self) -> float:
        self.wall = time.perf_counter() - self.started
        self.cpu = sum(b - a for a, b in zip(self._start, self._read(), strict=True))
        return self.cpu


def rss_bytes(pid: int) -> int:
    try:
        return int(psutil.Process(pid).memory_info().rss)
    except psutil.Error:
        return 0


class ServerProcess:
    """A server under test, started pinned; it prints `serving on ws://HOST:PORT` on stderr."""

    def __init__(self, name: str, argv: Sequence[str], cores: str = str(SERVER_CORE)) -> None:
        self.name = name
        self.argv = pinned(argv, cores)
        self.proc: asyncio.subprocess.Process | None = None
        self.port = 0
        self.log: list[str] = []
        self._drain: asyncio.Task[None] | None = None

    @property
    def pid(self) -> int:
        assert self.proc is not None
        return self.proc.pid

    @property
    def url(self) -> str:
        return f"ws://127.0.0.1:{self.port}/ws"

    async def start(self, wait_s: float = 20.0) -> ServerProcess:
        self.proc = await asyncio.create_subprocess_exec(
            *self.argv, cwd=ROOT, stderr=asyncio.subprocess.PIPE, stdout=asyncio.subprocess.DEVNULL
        )
        assert self.proc.stderr is not None
        async with asyncio.timeout(wait_s):
            while not self.port:
                line = (await self.proc.stderr.readline()).decode()
                if not line:
                    raise RuntimeError(f"{self.name} exited:\n" + "".join(self.log[-20:]))
                self.log.append(line)
                if match := _SERVING.search(line):
                    self.port = int(match.group(1))
        self._drain = asyncio.create_task(self._keep_draining())
        return self

    async def _keep_draining(self) -> None:
        assert self.proc is not None and self.proc.stderr is not None
        while line := await self.proc.stderr.readline():
            self.log.append(line.decode())
            del self.log[:-200]

    async def stop(self) -> None:
        if self.proc is None or self.proc.returncode is not None:
            return
        self.proc.terminate()
        try:
            async with asyncio.timeout(10):
                await self.proc.wait()
        except TimeoutError:
            self.proc.kill()
            await self.proc.wait()
        if self._drain is not None:
            self._drain.cancel()


def baccarat_serve(
    name: str, options: dict[str, object], redis: str = "", cores: str = str(SERVER_CORE)
) -> ServerProcess:
    """`baccarat serve` on a free port with these options (names as Settings fields)."""
    argv = [sys.executable, "-m", "server.cli", "serve", "--port", "0", "--log-level", "warning"]
    if redis:
        argv += ["--redis", redis]
    for key, value in options.items():
        argv += ["--" + key.replace("_", "-"), str(value)]
    return ServerProcess(name, argv, cores)


def _version(package: str) -> str:
    try:
        return metadata.version(package)
    except metadata.PackageNotFoundError:
        return "-"


def machine_info() -> dict[str, object]:
    model = ""
    with open("/proc/cpuinfo") as cpuinfo:
        for line in cpuinfo:
            if line.startswith("model name"):
                model = line.split(":", 1)[1].strip()
                break
    redis_version = ""
    try:
        sys.path.insert(0, str(ROOT))
        from tests.redis_server import find_redis_server

        out = subprocess.run(
            [find_redis_server(), "--version"], capture_output=True, text=True, check=False
        )
        redis_version = out.stdout.split()[2] if out.stdout else ""
    except (RuntimeError, OSError, IndexError):
        pass
    return {
        "cpu": model,
        "cores": os.cpu_count(),
        "memory_gib": round(psutil.virtual_memory().total / 2**30, 1),
        "kernel": platform.release(),
        "python": platform.python_version(),
        "websockets": _version("websockets"),
        "python-socketio": _version("python-socketio"),
        "aiohttp": _version("aiohttp"),
        "redis-server": redis_version,
        "pinned": can_pin(),
        "load_average": [round(x, 2) for x in os.getloadavg()],
    }
