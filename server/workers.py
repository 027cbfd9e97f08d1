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
from types import FrameType

from server.config import Settings

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


def serve_workers(settings: Settings, run_node: RunNode) -> int:
    """Run `settings.workers` worker processes on one port until they stop; their status."""
    check_workers(settings)
    reserved = _reserve_port(settings.host) if settings.port == 0 else None
    port = reserved.getsockname()[1] if reserved is not None else settings.port
    admin = settings.admin
    admin_port = settings.resolved_admin_port()
    reserved_admin = _reserve_port(admin.host) if admin.enabled and admin_port == 0 else None
    if reserved_admin is not None:
        admin_port = reserved_admin.getsockname()[1]
    context = multiprocessing.get_context("fork")  # nothing runs yet: no loop, no threads
    workers = []
    # Demo mode (no --secret): one random secret for every worker, so a guest's token (and so
    # its player and balance) is good on whichever worker the kernel hands its next connection.
    demo_secret = secrets.token_urlsafe(32) if settings.demo else None
    for index in range(settings.workers):
        node_id = f"{settings.node_id}-{index}" if settings.node_id else ""
        worker_settings = replace(
            settings, port=port, node_id=node_id, admin=replace(admin, port=admin_port)
        )
        workers.append(
            context.Process(
                target=_worker,
                args=(run_node, worker_settings, demo_secret),
                name=f"baccarat-worker-{index}",
            )
        )
    stopping = False

    def pass_on(signum: int, frame: FrameType | None) -> None:
        nonlocal stopping
        stopping = True
        for worker in workers:
            if worker.pid is not None and worker.exitcode is None:
                with contextlib.suppress(ProcessLookupError):
                    os.kill(worker.pid, signum)

    previous = {sig: signal.signal(sig, pass_on) for sig in (signal.SIGTERM, signal.SIGINT)}
    status = 0
    try:
        for worker in workers:
            worker.start()
        print(
            f"baccarat: {settings.workers} workers on ws://{settings.host}:{port}/ws"
            + (f", admin on http://{admin.host}:{admin_port}/" if admin.enabled else ""),
            file=sys.stderr,
            flush=True,
        )
        running = list(workers)
        while running:
            for sentinel in wait([w.sentinel for w in running]):
                worker = next(w for w in running if w.sentinel == sentinel)
                worker.join()
                running.remove(worker)
                code = worker.exitcode or 0
                if code != 0 and status == 0:
                    status = code if code > 0 else 1  # killed by a signal: a failure
                if not stopping:  # one worker stopped on its own: stop the node
                    pass_on(signal.SIGTERM, None)
    finally:
        for worker in workers:
            if worker.exitcode is None and worker.pid is not None:
                worker.terminate()
                worker.join()
        for sig, handler in previous.items():
            signal.signal(sig, handler)
        for held in (reserved, reserved_admin):
            if held is not None:
                held.close()
    return status
