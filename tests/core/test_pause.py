"""Pausing a table in the core: only between rounds, each way once, kept in the state."""

from __future__ import annotations

import dataclasses
import random

import pytest

from server.core.rules import rules_preset
from server.core.table import Phase, TableState, open_round, pause_table, resume_table


def test_pause_and_resume_are_versioned_transitions_with_an_event() -> None:
    """Each bumps the version (a commit) and emits its event; the state says paused."""
    state = TableState("t1", phase=Phase.SETTLED, round=3, version=9)
    paused = pause_table(state)
    assert paused.state.paused and paused.state.version == 10
    assert paused.events == [{"kind": "table_paused"}]
    resumed = resume_table(paused.state)
    assert not resumed.state.paused and resumed.state.version == 11
    assert resumed.events == [{"kind": "table_resumed"}]


def test_a_round_in_play_is_never_paused() -> None:
    """The pause takes effect between rounds only; a paused table opens no round."""
    with pytest.raises(AssertionError):
        pause_table(TableState("t1", phase=Phase.BETTING, round=1))
    with pytest.raises(AssertionError):
        resume_table(TableState("t1"))  # not paused
    paused = TableState("t1", paused=True)
    with pytest.raises(AssertionError):
        open_round(paused, rules_preset("classic8"), 0, 1000, random.Random(1).randbytes(32))


def test_paused_survives_the_state_dict_and_old_states_read_as_playing() -> None:
    """to_dict/from_dict keep it; a state stored before pausing existed reads unpaused."""
    state = TableState("t1", phase=Phase.SETTLED, paused=True)
    assert TableState.from_dict(state.to_dict()) == state
    old = state.to_dict()
    del old["paused"]
    assert TableState.from_dict(old) == dataclasses.replace(state, paused=False)
