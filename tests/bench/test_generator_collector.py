"""The load generator's own collector is kept out of a measurement (bench/common.py): what
earlier runs left is collected before it starts, and nothing is collected inside it."""

from __future__ import annotations

import gc
import weakref

import pytest

from bench.common import generator_collector_held


class _Client:
    """Stands for a finished run's client: it and its reader form a reference cycle."""

    def __init__(self) -> None:
        self.reader = lambda: self


def _a_dead_cycle() -> weakref.ref[_Client]:
    return weakref.ref(_Client())


def _allocate_past_every_threshold() -> None:
    """Enough new container objects to pass the young generation's threshold many times."""
    kept = [[] for _ in range(20 * gc.get_threshold()[0])]
    del kept


def test_an_earlier_runs_garbage_is_collected_before_and_nothing_during() -> None:
    assert gc.isenabled()
    earlier = _a_dead_cycle()
    with generator_collector_held():
        assert earlier() is None  # collected before the measurement began
        during = _a_dead_cycle()
        _allocate_past_every_threshold()
        assert during() is not None  # no collection ran inside the measurement
    assert gc.isenabled()
    _allocate_past_every_threshold()
    assert during() is None  # once it ends, the collector runs as usual


def test_the_collector_is_given_back_when_the_measurement_fails() -> None:
    with pytest.raises(RuntimeError), generator_collector_held():
        raise RuntimeError("a run that could not connect")
    assert gc.isenabled()


def test_a_collector_already_off_stays_off() -> None:
    gc.disable()
    try:
        with generator_collector_held():
            pass
        assert not gc.isenabled()
    finally:
        gc.enable()
