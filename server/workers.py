"""`baccarat serve --workers N`: N processes serving one port together, each a full node.

One Python process fans out on one core. With --workers N the command forks N worker
processes; each binds the same port with SO_REUSEPORT (the kernel spreads new connections
over them) and runs a complete Node: it follows every table's stream from Redis, serves its
own clients, and may own tables like any other node (each worker has its own node id). The
memory engine keeps its tables inside one process, so workers need the Redis engine.

The admin listener (/metrics, /status, /api/...) is shared the same way: each worker binds the
admin port too and answers for itself.

The parent only starts and watches its workers: SIGTERM or SIGINT is passed on to every
worker (which drain and stop as a single node does); when one worker exits the others are
stopped too, and the parent exits with the first failure's status (0 if none failed).
"""

from __future__ import annotations

import contextlib
import ctypes
import multiprocessing
import os
import secrets
import signal
import socket
import sys
from collections.abc import Callable
from dataclasses import replace
from multiprocessing.connection import wait
from multiprocessing.process import BaseProcess
from types import FrameType

from server.config import Settings
from server.runtime.collector import freeze_for_fork

__all__ = ["RunNode", "check_workers", "serve_workers"]

# server.app.run_node, passed in: app starts the workers, so workers does not import app.
RunNode = Callable[[Settings, str | None], int]

_PR_SET_PDEATHSIG = 1  # prctl option: the signal a child gets when its parent dies


def check_workers(settings: Settings) -> None:
    """Refuse, in one line, what several workers cannot do."""
    if settings.workers > 1 and not settings.redis:
        raise ValueError(
            f"--workers {settings.workers} needs --redis: "
            "the memory engine cannot share tables between processes"
        )


def _reserve_port(host: str) -> socket.socket:
    """A free port for --port 0, bound (not listening) with SO_REUSEPORT and held by the
    parent, so every worker binds the same one and nobody else can take it meanwhile."""
    family = socket.AF_INET6 if ":" in host else socket.AF_INET
    sock = socket.socket(family, socket.SOCK_STREAM)
    sock.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEPORT, 1)
    sock.bind((host, 0))
    return sock


def _die_with_parent() -> None:
    """Linux: a worker gets SIGTERM if the parent is killed outright (no orphaned workers)."""
    with contextlib.suppress(OSError, AttributeError):
        libc = ctypes.CDLL(None, use_errno=True)
        libc.prctl(_PR_SET_PDEATHSIG, signal.SIGTERM)


def _worker(run_node: RunNode, settings: Settings, demo_secret: str | None) -> None:
    for sig in (signal.SIGTERM, signal.SIGINT):
        signal.signal(sig, signal.SIG_DFL)  # the node installs its own once its loop runs
    _die_with_parent()
    sys.exit(run_node(settings, demo_secret))


def _worker_settings(settings: Settings, port: int, admin_port: int) -> list[Settings]:
    """Each worker's settings: the ports as reserved, and its own node id."""
    return [
        replace(
            settings,
            port=port,
            node_id=f"{settings.node_id}-{index}" if settings.node_id else "",
            admin=replace(settings.admin, port=admin_port),
        )
        for index in range(settings.workers)
    ]


def _wait_for(workers: list[BaseProcess], stop_all: Callable[[], None]) -> int:
    """Wait until every worker has ended; the first failure's status (a worker killed by a
    signal counts as 1). One that stops on its own (not asked to) stops the others."""
    status = 0
    running = list(workers)
    while running:
        for sentinel in wait([w.sentinel for w in running]):
            worker = next(w for w in running if w.sentinel == sentinel)
            worker.join()
            running.remove(worker)
            code = worker.exitcode or 0
            if code != 0 and status == 0:
                status = code if code > 0 else 1  # killed by a signal: a failure
            stop_all()
    return status


def _reserve_ports(settings: Settings) -> tuple[int, int, list[socket.socket]]:
    """The public and admin ports the workers bind; a port given as 0 is picked now and held
    (a socket bound to it, closed when the workers end) so that every worker gets the same."""
    held = []
    port = settings.port
    if port == 0:
        held.append(_reserve_port(settings.host))
        port = held[-1].getsockname()[1]
    admin_port = settings.resolved_admin_port()
    if settings.admin.enabled and admin_port == 0:
        held.append(_reserve_port(settings.admin.host))
        admin_port = held[-1].getsockname()[1]
    return port, admin_port, held


def serve_workers(settings: Settings, run_node: RunNode) -> int:
    """Run `settings.workers` worker processes on one port until they stop; their status."""
    check_workers(settings)
    port, admin_port, held = _reserve_ports(settings)
    admin = settings.admin
    context = multiprocessing.get_context("fork")  # nothing runs yet: no loop, no threads
    # Demo mode (no --secret): one random secret for every worker, so a guest's token (and so
    # its player and balance) is good on whichever worker the kernel hands its next connection.
    demo_secret = secrets.token_urlsafe(32) if settings.demo else None
    workers: list[BaseProcess] = [
        context.Process(
            target=_worker, args=(run_node, each, demo_secret), name=f"baccarat-worker-{index}"
        )
        for index, each in enumerate(_worker_settings(settings, port, admin_port))
    ]
    stopping = False

    def pass_on(signum: int, frame: FrameType | None) -> None:
        nonlocal stopping
        stopping = True
        for worker in workers:
            if worker.pid is not None and worker.exitcode is None:
                with contextlib.suppress(ProcessLookupError):
                    os.kill(worker.pid, signum)

    def stop_all() -> None:
        if not stopping:  # one worker stopped on its own: stop the node
            pass_on(signal.SIGTERM, None)

    previous = {sig: signal.signal(sig, pass_on) for sig in (signal.SIGTERM, signal.SIGINT)}
    freeze_for_fork()  # the workers' collections leave the parent's pages shared
    try:
        for worker in workers:
            worker.start()
        print(
            f"baccarat: {settings.workers} workers on ws://{settings.host}:{port}/ws"
            + (f", admin on http://{admin.host}:{admin_port}/" if admin.enabled else ""),
            file=sys.stderr,
            flush=True,
        )
        return _wait_for(workers, stop_all)
    finally:
        for worker in workers:
            if worker.exitcode is None and worker.pid is not None:
                worker.terminate()
                worker.join()
        for sig, handler in previous.items():
            signal.signal(sig, handler)
        for sock in held:
            sock.close()
