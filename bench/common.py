"""What every benchmark shares: pinning to cores, server processes, CPU and memory readings.

The machine has few cores and the measures compare servers, so each server process (and its
Redis) runs on one core (`taskset -c 0`) and the load generator, this process, on another
(core 1). Without taskset or with one core, nothing is pinned and the report says so.
"""

from __future__ import annotations

import asyncio
import contextlib
import gc
import json
import os
import platform
import re
import shutil
import subprocess
import sys
import tempfile
import time
from collections.abc import Iterator, Sequence
from dataclasses import dataclass, field
from importlib import metadata
from pathlib import Path
from typing import Any

__all__ = [
    "ROOT",
    "CpuMeter",
    "Pause",
    "ServerProcess",
    "machine_info",
    "pause_summary",
    "pin_generator",
    "pinned",
    "quantile",
    "redis_cpu_s",
    "redis_info",
]

ROOT = Path(__file__).resolve().parents[1]
SERVER_CORE = 0
GENERATOR_CORE = 1
_SERVING = re.compile(r"serving on ws://[\d.]+:(\d+)")
WORKERS_WAIT_S = 10.0  # after the first worker serves, how long the others may take
GC_STATS_ENV = "BACCARAT_GC_STATS"  # server/runtime/collector.py: every pause, at the stop
Pause = tuple[int, float, float, float]  # (generation, unix time, seconds, cpu seconds)


@contextlib.contextmanager
def generator_collector_held() -> Iterator[None]:
    """The generator's own cyclic collector kept out of a measurement: what earlier runs left
    is collected first, then no collection runs until the measurement ends.

    The generator is a Python process too. Its clients of one run die in reference cycles
    (a client and the callback that reads it), so only a full collection frees them, and it
    came inside the next run's window: 30-116 ms (200,000 objects) in a `make bench` of
    2026-12-01, each delaying every arrival it timed. The Redis run at 10,000 spectators,
    which follows the memory engine's, showed it as a first write of 30-79 ms."""
    gc.collect()
    enabled = gc.isenabled()
    gc.disable()
    try:
        yield
    finally:
        if enabled:
            gc.enable()


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


def pause_summary(pauses: Sequence[Pause]) -> dict[str, float]:
    """Count, max and p99 (ms) of the collector's pauses, wall and the thread's CPU time (on
    a busy machine a pause's wall time includes waiting for a core), and the full ones."""
    every = sorted(p[2] * 1000 for p in pauses)
    cpu = sorted(p[3] * 1000 for p in pauses)
    full = sorted(p[2] * 1000 for p in pauses if p[0] == 2)
    return {
        "count": len(every),
        "max_ms": round(every[-1], 2) if every else 0.0,
        "p99_ms": round(quantile(every, 0.99), 2),
        "cpu_max_ms": round(cpu[-1], 2) if cpu else 0.0,
        "cpu_p99_ms": round(quantile(cpu, 0.99), 2),
        "full": len(full),
        "full_max_ms": round(full[-1], 2) if full else 0.0,
    }


@dataclass
class CpuMeter:
    """CPU seconds (user + system) a set of processes used between start() and stop(): in
    all (`cpu`) and each (`cpus`, in the order of `pids`)."""

    pids: list[int]
    started: float = 0.0
    wall: float = 0.0
    cpu: float = 0.0
    cpus: list[float] = field(default_factory=list)
    _start: list[float] = field(default_factory=list)

    def _read(self) -> list[float]:
        import psutil  # the bench extra: bench.common imports without it (tests/bench)

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
        self.cpus = [b - a for a, b in zip(self._start, self._read(), strict=True)]
        self.cpu = sum(self.cpus)
        return self.cpu

    def shares(self) -> list[float]:
        """Each process's CPU seconds per wall second: the cores it used (rounded)."""
        return [round(cpu / max(self.wall, 1e-9), 3) for cpu in self.cpus]


def rss_bytes(pid: int) -> int:
    import psutil

    try:
        return int(psutil.Process(pid).memory_info().rss)
    except psutil.Error:
        return 0


class ServerProcess:
    """A server under test, started pinned; it prints `serving on ws://HOST:PORT` on stderr
    (each of its `serving` processes: the workers of --workers). With `gc_stats` (a folder),
    each of our node's processes writes every collector pause there at its stop."""

    def __init__(
        self,
        name: str,
        argv: Sequence[str],
        cores: str = str(SERVER_CORE),
        serving: int = 1,
        gc_stats: Path | None = None,
        env: dict[str, str] | None = None,
    ) -> None:
        self.name = name
        self.env = env or {}
        self.argv = pinned(argv, cores)
        self.serving = serving
        self.gc_stats = gc_stats
        self.proc: asyncio.subprocess.Process | None = None
        self.port = 0
        self.log: list[str] = []
        self._drain: asyncio.Task[None] | None = None
        self.pauses: dict[int, list[Pause]] = {}  # by pid, read at stop() from gc_stats

    @property
    def pid(self) -> int:
        assert self.proc is not None
        return self.proc.pid

    @property
    def url(self) -> str:
        return f"ws://127.0.0.1:{self.port}/ws"

    async def start(self, wait_s: float = 20.0) -> ServerProcess:
        env = {**os.environ, **self.env}
        if self.gc_stats is not None:  # `{pid}`: one file per process (per worker)
            env[GC_STATS_ENV] = str(self.gc_stats / "{pid}.json")
        self.proc = await asyncio.create_subprocess_exec(
            *self.argv,
            cwd=ROOT,
            env=env,
            stderr=asyncio.subprocess.PIPE,
            stdout=asyncio.subprocess.DEVNULL,
        )
        try:
            await self._wait_serving(wait_s)
        except BaseException:
            await self.stop()  # no server left behind by a start that failed
            raise
        self._drain = asyncio.create_task(self._keep_draining())
        return self

    async def _wait_serving(self, wait_s: float) -> None:
        """Until the first process serves (else an error), then the other workers for at most
        WORKERS_WAIT_S more (so that none misses the first connections): one missing is
        said on stderr, and seen in the run's worker_cores."""
        assert self.proc is not None and self.proc.stderr is not None
        seen = 0
        try:
            async with asyncio.timeout(wait_s) as deadline:
                while seen < self.serving:
                    line = (await self.proc.stderr.readline()).decode()
                    if not line:
                        raise RuntimeError(f"{self.name} exited:\n" + "".join(self.log[-20:]))
                    self.log.append(line)
                    if match := _SERVING.search(line):
                        self.port = int(match.group(1))
                        seen += 1
                        deadline.reschedule(asyncio.get_running_loop().time() + WORKERS_WAIT_S)
        except TimeoutError:
            if not seen:
                raise
            print(
                f"bench: {self.name}: {seen} of {self.serving} workers serving after "
                f"{WORKERS_WAIT_S} s; going on. Its log:\n" + "".join(self.log[-10:]),
                file=sys.stderr,
                flush=True,
            )

    async def _keep_draining(self) -> None:
        assert self.proc is not None and self.proc.stderr is not None
        while line := await self.proc.stderr.readline():
            self.log.append(line.decode())
            del self.log[:-200]

    async def stop(self) -> None:
        if self.proc is None:
            return
        if self.proc.returncode is None:
            self.proc.terminate()
            try:
                async with asyncio.timeout(10):
                    await self.proc.wait()
            except TimeoutError:
                self.proc.kill()
                await self.proc.wait()
        if self._drain is not None:
            self._drain.cancel()
        self._read_pauses()

    def _read_pauses(self) -> None:
        """Each process's pauses from its file (then removed); none from a killed one."""
        if self.gc_stats is None:
            return
        for path in sorted(self.gc_stats.glob("*.json")):
            stats = json.loads(path.read_text())
            self.pauses[int(stats["pid"])] = [(g, at, s, c) for g, at, s, c in stats["pauses"]]
        shutil.rmtree(self.gc_stats, ignore_errors=True)

    def collector_pauses(self, since: float, until: float) -> dict[int, list[Pause]]:
        """After stop(): each process's collector pauses (by pid) that began between the two
        unix times; {} without gc_stats."""
        return {
            pid: [p for p in pauses if since <= p[1] - p[2] <= until]
            for pid, pauses in self.pauses.items()
        }


async def redis_info(url: str, section: str) -> dict[str, Any]:
    """One `INFO` section of the Redis at `url`."""
    from redis.asyncio import Redis

    client = Redis.from_url(url)
    try:
        return dict(await client.info(section))
    finally:
        await client.aclose()


async def redis_cpu_s(url: str) -> float:
    """Redis's own CPU seconds so far (INFO cpu: used_cpu_sys + used_cpu_user)."""
    info = await redis_info(url, "cpu")
    return float(info["used_cpu_sys"]) + float(info["used_cpu_user"])


def baccarat_serve(
    name: str,
    options: dict[str, object],
    redis: str = "",
    cores: str = str(SERVER_CORE),
    env: dict[str, str] | None = None,
    program: Sequence[str] = ("-m", "server.cli"),
) -> ServerProcess:
    """`baccarat serve` on a free port with these options (names as Settings fields), and
    these environment variables; its processes write their collector pauses (gc_stats).
    `program`: what Python runs (bench/floor_node.py for the bets' `floor` site)."""
    argv = [sys.executable, *program, "serve", "--port", "0", "--log-level", "warning"]
    if redis:
        argv += ["--redis", redis]
    # No drain at the stop (3 s by default, even with no client left): it is not measured.
    for key, value in {"drain_seconds": 0, **options}.items():
        argv += ["--" + key.replace("_", "-"), str(value)]
    workers = int(str(options.get("workers", 1)))
    gc_stats = Path(tempfile.mkdtemp(prefix=f"bench-gc-{name}-"))
    return ServerProcess(name, argv, cores, max(1, workers), gc_stats, env)


def _version(package: str) -> str:
    try:
        return metadata.version(package)
    except metadata.PackageNotFoundError:
        return "-"


def machine_info() -> dict[str, object]:
    import psutil

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
