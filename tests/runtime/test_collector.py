"""The collector's hook and freezer (server/runtime/collector.py): behaviour, not speed.

Pause lengths are measured by bench/gc_pauses.py. Here: the hook times every collection and
tells its listeners; the freezer sets the thresholds, freezes at start and after each full
collection, gives the collector back at stop; and freezing does not leak: sessions that die
in a reference cycle after being frozen are freed once enough of them have closed.
"""

from __future__ import annotations

import gc
import weakref
from collections.abc import Iterator

import pytest

from server.runtime import collector
from server.runtime.collector import PAUSES, THRESHOLDS, Freezer


class Cyclic:
    """A session-like object that dies only by the collector: it refers to itself."""

    def __init__(self) -> None:
        self.me = self


@pytest.fixture
def clean_gc() -> Iterator[None]:
    """Each test starts and ends with nothing frozen and the process's thresholds."""
    before = gc.get_threshold()
    gc.unfreeze()
    yield
    PAUSES.freeze_after_full = False
    gc.unfreeze()
    gc.set_threshold(*before)


def test_the_hook_times_every_collection_by_generation(clean_gc: None) -> None:
    seen: list[tuple[int, float]] = []
    PAUSES.install()
    PAUSES.install()  # once only
    assert gc.callbacks.count(PAUSES) == 1
    PAUSES.listeners.append(lambda generation, seconds: seen.append((generation, seconds)))
    try:
        full = PAUSES.full_collections
        gc.collect()
        gc.collect(0)
    finally:
        PAUSES.listeners.pop()
    assert [g for g, _ in seen] == [2, 0]
    assert all(seconds >= 0 for _, seconds in seen)
    assert PAUSES.full_collections == full + 1


def test_the_freezer_sets_thresholds_freezes_and_gives_back(clean_gc: None) -> None:
    before = gc.get_threshold()
    freezer = Freezer(set())
    freezer.start()
    try:
        assert gc.get_threshold() == THRESHOLDS
        assert gc.get_freeze_count() > 0
        frozen = gc.get_freeze_count()
        made = [[i] for i in range(1_000)]  # noqa: F841 - kept alive across the collection
        gc.collect()  # a full collection: the hook freezes what it left
        assert gc.get_freeze_count() >= frozen + 1_000
        freezer.step()
        assert freezer.freezes == 2  # the step saw that freeze
    finally:
        freezer.stop()
    assert gc.get_freeze_count() == 0
    assert gc.get_threshold() == before


def test_freezing_does_not_leak_closed_sessions(
    clean_gc: None, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Sessions frozen while alive that then die in a cycle stay until the thaw, which comes
    once a quarter of the frozen sessions (and THAW_MIN_CLOSED) have closed; then they are
    freed and the survivors frozen again."""
    monkeypatch.setattr(collector, "THAW_MIN_CLOSED", 10)
    sessions = {Cyclic() for _ in range(40)}
    refs = [weakref.ref(s) for s in sessions]
    freezer = Freezer(sessions)
    freezer.start()
    try:
        for _ in range(9):  # 9 closed: below both 10 and a quarter of 40
            sessions.pop()
        freezer.step()
        gc.collect()
        assert freezer.thaws == 0
        assert sum(r() is None for r in refs) == 0  # frozen: not collected (yet)
        sessions.pop()  # the tenth
        freezer.step()
        assert freezer.thaws == 1
        assert sum(r() is None for r in refs) == 10  # freed by the thaw
        assert freezer.closed_frozen() == 0 and gc.get_freeze_count() > 0
    finally:
        freezer.stop()


def test_thresholds_can_be_given_for_measuring(monkeypatch: pytest.MonkeyPatch) -> None:
    assert collector.thresholds() == THRESHOLDS
    monkeypatch.setenv(collector.THRESHOLDS_ENV, "5000,10,3")
    assert collector.thresholds() == (5000, 10, 3)


def test_stats_are_written_per_process(
    tmp_path: pytest.TempPathFactory, monkeypatch: pytest.MonkeyPatch
) -> None:
    """BACCARAT_GC_STATS: every pause of the block, as JSON, `{pid}` replaced."""
    import json
    import os
    from pathlib import Path

    path = Path(str(tmp_path)) / "gc-{pid}.json"
    monkeypatch.setenv(collector.GC_STATS_ENV, str(path))
    monkeypatch.setattr(PAUSES, "kept", None)
    PAUSES.install()
    with collector.kept_for_stats():
        gc.collect()
    written = json.loads(Path(str(path).replace("{pid}", str(os.getpid()))).read_text())
    assert written["pid"] == os.getpid()
    assert any(pause[0] == 2 and len(pause) == 4 for pause in written["pauses"])
