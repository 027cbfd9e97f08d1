"""The state blob's codec: the shoe's cards are cached both ways, never shared mutable."""

from __future__ import annotations

import random

import pytest

from server.core.rules import PRESETS, TableRules, rules_preset
from server.core.table import TableState, close_betting, deal_next_card, open_round
from server.store.base import StateUnreadable
from server.store.codec import (
    STATE_FORMAT,
    packb,
    rules_from_dict,
    state_from_bytes,
    state_to_bytes,
)

RULES = rules_preset("classic8")


def _betting(seed: int) -> TableState:
    """Round 1 once its shoe is sealed (the shoe's order exists only from the seal)."""
    opened = open_round(TableState("t"), RULES, 0, 1000, random.Random(seed).randbytes(32))
    return close_betting(opened.state, None, ["x"]).state


def test_the_blob_is_the_plain_format_and_reads_back() -> None:
    """The cache changes no byte: older nodes read what this one writes, and back."""
    state = _betting(1)
    blob = state_to_bytes(state)
    assert blob == packb({"v": STATE_FORMAT, **state.to_dict()})
    assert state_to_bytes(state) == blob  # the cached encoding is the same
    read = state_from_bytes(blob)
    assert read.to_dict() == state.to_dict() and read == state
    assert read.shoe is not None and state.shoe is not None
    assert read.shoe.cards == state.shoe.cards and len(read.shoe.cards) == 416


def test_each_step_and_each_shoe_encode_as_without_the_cache() -> None:
    state = _betting(2)
    for _ in range(4):  # the same shoe, another position each step
        state = deal_next_card(state).state
        assert state_to_bytes(state) == packb({"v": STATE_FORMAT, **state.to_dict()})
    other = _betting(3)  # another shoe
    assert state_to_bytes(other) == packb({"v": STATE_FORMAT, **other.to_dict()})
    assert state_from_bytes(state_to_bytes(other)).to_dict() == other.to_dict()
    assert state_from_bytes(state_to_bytes(state)).to_dict() == state.to_dict()


def test_the_blob_keeps_the_committed_shoe_and_older_formats_have_none() -> None:
    """A new owner reads the seed, the client seed and the parameters back (so it proves and
    reveals the same shoe); a format-1 blob, from before shoes were committed, has none."""
    seed = random.Random(6).randbytes(32)
    opened = open_round(TableState("t"), RULES, 0, 1000, seed).state
    for state in (opened, close_betting(opened, None, ["a", "b"]).state):
        read = state_from_bytes(state_to_bytes(state))
        assert read.fair == state.fair and read.fair is not None and read.fair.seed == seed
        assert seed.hex() not in repr(read) and seed.hex() not in repr(read.fair)
    older = {**_betting(7).to_dict(), "v": 1}
    del older["fair"]
    assert STATE_FORMAT == 2 and state_from_bytes(packb(older)).fair is None


def test_states_read_from_one_blob_share_no_mutable_shoe() -> None:
    blob = state_to_bytes(_betting(4))
    first, second = state_from_bytes(blob), state_from_bytes(blob)
    assert first.shoe is not None and second.shoe is not None
    assert first.shoe is not second.shoe and first.shoe.cards is not second.shoe.cards
    first.shoe.draw()
    first.shoe.cards.reverse()
    third = state_from_bytes(blob)
    assert third.to_dict() == second.to_dict() != first.to_dict()


@pytest.mark.parametrize(
    "shoe",
    [
        {"cards": 5, "position": 0, "cut_index": 0},
        {"cards": "Zz", "position": 0, "cut_index": 0},
        {"cards": "Ah", "position": "0", "cut_index": 0},
        {"cards": "Ah", "position": 3, "cut_index": 0},
        {"cards": "Ah"},
    ],
    ids=["cards-not-text", "bad-card", "position-not-int", "position-outside", "missing"],
)
def test_a_malformed_shoe_is_unreadable(shoe: dict[str, object]) -> None:
    data = {"v": STATE_FORMAT, **_betting(5).to_dict(), "shoe": shoe}
    with pytest.raises(StateUnreadable):
        state_from_bytes(packb(data))


def test_rules_read_back_with_their_title_and_older_ones_get_their_presets() -> None:
    """Stored rules keep their title; rules stored before tables had one (a Redis table
    keeps the rules it was made with) get their preset's title, or none for other rules."""
    vip = TableRules("classic8", title="VIP room", description="High limits")
    assert rules_from_dict(vip.to_dict()) == vip
    for name, rules in PRESETS.items():
        older = {k: v for k, v in rules.to_dict().items() if k != "title"}
        assert rules_from_dict(older) == rules, name
    custom = {k: v for k, v in TableRules("house", decks=2).to_dict().items() if k != "title"}
    assert rules_from_dict(custom).title == ""
