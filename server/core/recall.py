"""Game recall: what a player's history record says about the round itself.

The table's owner computes a round's summary from the state it commits when it settles or voids
the round, and hands it to the store with the payouts, so the store writes each bettor's
history record in the same atomic step as the credit, without reading the shoe itself.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from server.core.table import Phase, TableState, coup_of

__all__ = ["RoundSummary", "round_summary"]


@dataclass(frozen=True, slots=True)
class RoundSummary:
    """The cards in deal order and the result; a voided round has no result (all None)."""

    cards: tuple[tuple[str, str, str | None], ...] = ()  # (hand, rank, suit)
    player_total: int | None = None
    banker_total: int | None = None
    winner: str | None = None  # "player" | "banker" | "tie"; None when voided
    natural: bool | None = None

    def to_dict(self) -> dict[str, Any]:
        return {
            "cards": [{"hand": h, "rank": rank, "suit": suit} for h, rank, suit in self.cards],
            "player_total": self.player_total,
            "banker_total": self.banker_total,
            "winner": self.winner,
            "natural": self.natural,
        }


def round_summary(state: TableState) -> RoundSummary:
    """The summary of the round `state` ends: a settled round's whole coup, or the cards a
    voided round had dealt (none if the state has no shoe, as a table restarted from its bare
    state, or if not a card was dealt, as when the shoe could not finish the coup)."""
    assert state.phase in (Phase.SETTLED, Phase.VOIDED), state.phase
    if state.shoe is None or state.dealt == 0:
        return RoundSummary()
    coup = coup_of(state)  # the same cards it was dealt from, so it resolves again
    cards = tuple(
        (hand.value, card.rank, card.suit.value if card.suit else None)
        for hand, card in coup.deal_order[: state.dealt]
    )
    if state.phase is Phase.VOIDED:
        return RoundSummary(cards)
    return RoundSummary(
        cards, coup.player_total, coup.banker_total, coup.winner.value, coup.natural
    )
