"""Python's cyclic garbage collector in a serving process: its pauses measured, its heap frozen.

A full (generation 2) collection walks every tracked container object in the process and
stops the event loop while it does: ~100 connection objects per spectator, so 10,000
spectators made pauses of 100-300 ms (docs/benchmarks.md, "Collector"). Three things here:

* `PAUSES`, a `gc.callbacks` hook timing every collection by generation (start to stop). A
  node observes them into `baccarat_gc_pause_seconds` (/metrics); `BACCARAT_GC_STATS=path`
  keeps them all and `write_stats` dumps them as JSON when the process stops (the benchmark
  reads the file).
* `Freezer`: after start-up, and again at the end of every full collection (in the hook: the
  survivors of a full collection are live by definition), `gc.freeze()` moves every tracked
  object to the permanent generation, which no collection walks. A later full collection
  walks only what was made since, so its pause follows what changed, not what the process
  holds.
* the thresholds (`THRESHOLDS`): fewer young collections, and a full one at most every
  t0 x t1 x t2 surviving allocations, so what a full collection walks stays bounded.

The price of freezing: an object frozen while alive that later dies *in a reference cycle*
(a closed connection: websockets' connection, its tasks and exceptions form cycles) is never
collected while it stays frozen; objects freed by reference counting (most of them, a
round's bets included) are freed as usual. So the freezer counts the frozen sessions that
have closed since, and when they reach a quarter of the frozen ones (and at least
`THAW_MIN_CLOSED`) it thaws: `gc.unfreeze()`, one full collection of the whole heap (one
long pause, as often as CPython would have made one anyway for that much garbage), then
freezes again. Memory held by dead connections stays bounded by that rule.
"""

from __future__ import annotations

import asyncio
import contextlib
import gc
import json
import os
import time
from collections import deque
from collections.abc import Awaitable, Callable, Collection, Iterator
from pathlib import Path
from typing import Any

__all__ = [
    "GC_FREEZE_ENV",
    "GC_STATS_ENV",
    "PAUSES",
    "THRESHOLDS",
    "Freezer",
    "NodeCollector",
    "PauseRecorder",
    "freeze_for_fork",
    "kept_for_stats",
    "thresholds",
    "tuning_wanted",
    "write_stats",
]

GC_STATS_ENV = "BACCARAT_GC_STATS"  # a path: every pause of the process, written at its stop
GC_FREEZE_ENV = "BACCARAT_GC_FREEZE"  # "0": `baccarat serve` leaves the collector as it is
# gen0: a young collection per 5,000 new objects (CPython: 700); a middle one per 4 of those;
# a full one per 2 middle ones (a threshold is passed when exceeded): a full collection walks
# the ~40,000 objects made since the last freeze, 5-17 ms with 10,000 spectators joining
# (bench/gc_pauses.py; (10000, 2, 1) gave 24-31 ms). BACCARAT_GC_THRESHOLDS=t0,t1,t2
# overrides them, for measuring.
THRESHOLDS = (5_000, 3, 1)
THRESHOLDS_ENV = "BACCARAT_GC_THRESHOLDS"
KEEP_INTERVAL_S = 0.25  # how often the freezer looks whether a full collection happened
THAW_MIN_CLOSED = 1_000  # closed frozen sessions below which no thaw is made
THAW_SHARE = 0.25  # ... or below this share of the frozen sessions
KEEP_PAUSES = 200_000  # with BACCARAT_GC_STATS: the most pauses kept (the latest)

PauseListener = Callable[[int, float], None]  # (generation, seconds)


class PauseRecorder:
    """The `gc.callbacks` hook: times every collection and tells the listeners."""

    def __init__(self) -> None:
        self.listeners: list[PauseListener] = []
        # (generation, unix time, seconds, cpu seconds of the thread): on a busy machine the
        # wall time of a pause includes waiting for a core, the cpu time does not
        self.kept: deque[tuple[int, float, float, float]] | None = None
        self.full_collections = 0
        self.freeze_after_full = False  # a Freezer is running
        self._started = 0.0
        self._started_cpu = 0.0

    def __call__(self, phase: str, info: dict[str, Any]) -> None:
        if phase == "start":
            self._started = time.perf_counter()
            self._started_cpu = time.thread_time()
            return
        seconds = time.perf_counter() - self._started
        generation: int = info["generation"]
        if generation == 2:
            self.full_collections += 1
            if self.freeze_after_full:
                # Everything tracked was just walked and what is left is alive: freeze it now,
                # before anything new dies in it (gc.freeze only moves lists; safe here).
                gc.freeze()
        if self.kept is not None:
            cpu = time.thread_time() - self._started_cpu
            self.kept.append((generation, time.time(), seconds, cpu))
        for listener in self.listeners:
            listener(generation, seconds)

    def install(self) -> None:
        """Hook into the collector (once per process)."""
        if self not in gc.callbacks:
            gc.callbacks.append(self)

    def keep(self) -> None:
        """Keep every pause (the latest KEEP_PAUSES) for `write_stats`."""
        if self.kept is None:
            self.kept = deque(maxlen=KEEP_PAUSES)


PAUSES = PauseRecorder()


def thresholds() -> tuple[int, int, int]:
    """THRESHOLDS, or BACCARAT_GC_THRESHOLDS's three numbers."""
    given = os.environ.get(THRESHOLDS_ENV, "")
    if not given:
        return THRESHOLDS
    t0, t1, t2 = (int(x) for x in given.split(","))
    return t0, t1, t2


def write_stats(path: str) -> None:
    """The kept pauses as JSON: {"pid", "pauses": [[generation, unix time, seconds, cpu
    seconds], ...]}.
    `{pid}` in the path is replaced by this process's id (one file per worker)."""
    pauses = list(PAUSES.kept or ())
    target = Path(path.replace("{pid}", str(os.getpid())))
    target.write_text(json.dumps({"pid": os.getpid(), "pauses": pauses}))


def freeze_for_fork() -> None:
    """Before forking workers (unless BACCARAT_GC_FREEZE=0): what the parent made (imports,
    settings) is frozen, so the workers' collections never write to those objects' headers
    and the parent's pages stay shared (no copy-on-write for the collector)."""
    if tuning_wanted():
        gc.collect()
        gc.freeze()


class Freezer:
    """Keeps the process's heap frozen: at start, after every full collection, and thawed
    when enough of the frozen sessions have closed. `sessions` is the node's live sessions."""

    def __init__(self, sessions: Collection[object]) -> None:
        self.sessions = sessions
        self.freezes = 0
        self.thaws = 0
        self._frozen: set[int] = set()  # ids of the sessions alive at the last freeze
        self._seen_full = 0
        self._thresholds = gc.get_threshold()

    def start(self) -> None:
        """Set the thresholds, collect what start-up left, freeze the rest."""
        self._thresholds = gc.get_threshold()
        gc.set_threshold(*thresholds())
        PAUSES.install()
        PAUSES.freeze_after_full = True
        gc.collect()
        self._freeze()

    def stop(self) -> None:
        """Give the collector back as it was found (a test process runs many nodes)."""
        PAUSES.freeze_after_full = False
        gc.unfreeze()
        gc.set_threshold(*self._thresholds)

    def _freeze(self) -> None:
        gc.freeze()
        self._frozen_seen()

    def _frozen_seen(self) -> None:
        self.freezes += 1
        self._seen_full = PAUSES.full_collections
        self._frozen |= {id(s) for s in self.sessions}

    def closed_frozen(self) -> int:
        """Frozen sessions that have closed since (a closed one that is still frozen cannot
        be freed, so its id cannot be reused by a new session meanwhile)."""
        return len(self._frozen - {id(s) for s in self.sessions})

    def thaw_due(self) -> bool:
        closed = self.closed_frozen()
        return closed >= max(THAW_MIN_CLOSED, THAW_SHARE * len(self._frozen))

    def step(self) -> None:
        """One look: thaw if due, else freeze if a full collection happened since."""
        if self.thaw_due():
            gc.unfreeze()
            self._frozen = set()
            self.thaws += 1
            gc.collect()
            self._freeze()
        elif PAUSES.full_collections != self._seen_full:
            self._frozen_seen()  # the hook froze what that collection left (all alive)

    async def keep(self, sleep: Callable[[float], Awaitable[None]]) -> None:
        """Look every KEEP_INTERVAL_S until cancelled."""
        while True:
            await sleep(KEEP_INTERVAL_S)
            self.step()


def tuning_wanted() -> bool:
    """Whether `baccarat serve` tunes the collector: yes unless BACCARAT_GC_FREEZE=0."""
    return os.environ.get(GC_FREEZE_ENV, "1") != "0"


@contextlib.contextmanager
def kept_for_stats() -> Iterator[None]:
    """With BACCARAT_GC_STATS=path, keep every pause while the block runs and write them to
    the path when it ends (a serving process: its whole life)."""
    path = os.environ.get(GC_STATS_ENV, "")
    if path:
        PAUSES.keep()
    try:
        yield
    finally:
        if path:
            write_stats(path)


class NodeCollector:
    """What one node does with the process's collector: tells `listener` of every pause (its
    /metrics), and with `tune` keeps the heap frozen (a Freezer) while the node runs."""

    def __init__(
        self, listener: PauseListener, sessions: Collection[object], tune: bool = False
    ) -> None:
        self.listener = listener
        self.freezer = Freezer(sessions) if tune else None
        self._keeper: asyncio.Task[None] | None = None

    def start(self, sleep: Callable[[float], Awaitable[None]]) -> None:
        PAUSES.install()
        PAUSES.listeners.append(self.listener)
        if self.freezer is not None:
            self.freezer.start()
            self._keeper = asyncio.create_task(self.freezer.keep(sleep))

    async def stop(self) -> None:
        if self._keeper is not None:
            self._keeper.cancel()
            await asyncio.gather(self._keeper, return_exceptions=True)
        with contextlib.suppress(ValueError):
            PAUSES.listeners.remove(self.listener)
        if self.freezer is not None:
            self.freezer.stop()
