"""The round summary a table's owner hands the store for game recall."""

from __future__ import annotations

import random

import pytest

from server.core.recall import RoundSummary, round_summary
from server.core.rules import rules_preset
from server.core.table import (
    Phase,
    TableState,
    bare_state,
    close_betting,
    coup_of,
    deal_next_card,
    open_round,
    settle_round,
    void_round,
)

RULES = rules_preset("classic8")


def dealing(seed: int = 3) -> TableState:
    opened = open_round(TableState("t"), RULES, 0, 1_000, random.Random(seed).randbytes(32)).state
    return close_betting(opened).state


def test_a_settled_round_has_its_whole_coup() -> None:
    """Every card in deal order (hand, rank, suit) and the coup's result."""
    state = dealing()
    coup = coup_of(state)
    while state.dealt < coup.cards_used:
        state = deal_next_card(state).state
    settled = settle_round(state, RULES, [])[0].state
    summary = round_summary(settled)
    assert summary.cards == tuple(
        (hand.value, card.rank, card.suit.value if card.suit else None)
        for hand, card in coup.deal_order
    )
    assert (summary.player_total, summary.banker_total) == (coup.player_total, coup.banker_total)
    assert (summary.winner, summary.natural) == (coup.winner.value, coup.natural)
    assert summary.to_dict()["cards"][0] == {
        "hand": "player",
        "rank": coup.deal_order[0][1].rank,
        "suit": summary.cards[0][2],
    }


def test_a_voided_round_has_the_cards_dealt_and_no_result() -> None:
    state = dealing()
    for _ in range(3):
        state = deal_next_card(state).state
    summary = round_summary(void_round(state, [], "test")[0].state)
    assert summary.cards == round_summary_cards(state, 3)
    assert summary.to_dict() == {
        "cards": [{"hand": h, "rank": r, "suit": s} for h, r, s in summary.cards],
        "player_total": None,
        "banker_total": None,
        "winner": None,
        "natural": None,
    }


def round_summary_cards(state: TableState, dealt: int) -> tuple[tuple[str, str, str | None], ...]:
    return tuple(
        (hand.value, card.rank, card.suit.value if card.suit else None)
        for hand, card in coup_of(state).deal_order[:dealt]
    )


def test_a_round_voided_before_a_card_or_without_a_shoe_has_no_cards() -> None:
    assert round_summary(void_round(dealing(), [], "test")[0].state) == RoundSummary()
    bare = bare_state(deal_next_card(dealing()).state)
    assert round_summary(void_round(bare, [], "restarted")[0].state) == RoundSummary()


def test_only_a_finished_round_has_a_summary() -> None:
    with pytest.raises(AssertionError):
        round_summary(dealing())
    assert dealing().phase is Phase.DEALING
