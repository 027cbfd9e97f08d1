"""Coup resolution: naturals and the full third-card tableau, as a frozen record.

Deal order is P1 B1 P2 B2, then the Player's third, then the Banker's third.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from enum import StrEnum

from server.core.cards import Card
from server.core.errors import NotEnoughCards

__all__ = ["Coup", "Hand", "Winner", "banker_draws", "player_draws", "resolve_coup"]


class Winner(StrEnum):
    PLAYER = "player"
    BANKER = "banker"
    TIE = "tie"


class Hand(StrEnum):
    PLAYER = "player"
    BANKER = "banker"


def total(cards: Sequence[Card]) -> int:
    return sum(card.value for card in cards) % 10


def player_draws(player_total: int) -> bool:
    """Player draws on 0-5, stands on 6-7 (naturals are handled before)."""
    return player_total <= 5


def banker_draws(banker_total: int, player_third: int | None) -> bool:
    """The Banker's tableau; player_third is the value of the Player's third card, if any."""
    if player_third is None:
        return banker_total <= 5  # Player stood: Banker draws on 0-5
    if banker_total <= 2:
        return True
    if banker_total == 3:
        return player_third != 8  # Banker on 3 draws unless the Player's third is 8
    if banker_total == 4:
        return 2 <= player_third <= 7
    if banker_total == 5:
        return 4 <= player_third <= 7
    if banker_total == 6:
        return player_third in (6, 7)
    return False  # 7 stands


@dataclass(frozen=True, slots=True)
class Coup:
    """Everything about one dealt coup, derived from the cards alone."""

    player: tuple[Card, ...]
    banker: tuple[Card, ...]
    player_total: int
    banker_total: int
    winner: Winner
    natural: bool
    player_pair: bool
    banker_pair: bool
    deal_order: tuple[tuple[Hand, Card], ...]

    @property
    def cards_used(self) -> int:
        return len(self.deal_order)

    def to_dict(self) -> dict[str, object]:
        """The JSON form the CLI and the wire use (ranks without suits in player/banker)."""
        return {
            "player": [card.rank for card in self.player],
            "banker": [card.rank for card in self.banker],
            "player_cards": [str(card) for card in self.player],
            "banker_cards": [str(card) for card in self.banker],
            "player_total": self.player_total,
            "banker_total": self.banker_total,
            "winner": self.winner.value,
            "natural": self.natural,
            "player_pair": self.player_pair,
            "banker_pair": self.banker_pair,
            "cards_used": self.cards_used,
        }


def resolve_coup(cards: Sequence[Card]) -> Coup:
    """Resolve a coup from cards in shoe order; extra cards are left unused.

    Raises NotEnoughCards if the rules call for a card that is not there.
    """

    def take(index: int) -> Card:
        if index >= len(cards):
            raise NotEnoughCards(f"coup needs card {index + 1}, only {len(cards)} given")
        return cards[index]

    p1, b1, p2, b2 = (take(i) for i in range(4))  # in deal order, so errors name the first gap
    player = [p1, p2]
    banker = [b1, b2]
    order: list[tuple[Hand, Card]] = [
        (Hand.PLAYER, player[0]),
        (Hand.BANKER, banker[0]),
        (Hand.PLAYER, player[1]),
        (Hand.BANKER, banker[1]),
    ]
    natural = total(player) >= 8 or total(banker) >= 8
    if not natural:
        player_third: int | None = None
        if player_draws(total(player)):
            card = take(len(order))
            player.append(card)
            order.append((Hand.PLAYER, card))
            player_third = card.value
        if banker_draws(total(banker), player_third):
            card = take(len(order))
            banker.append(card)
            order.append((Hand.BANKER, card))
    p_total, b_total = total(player), total(banker)
    if p_total > b_total:
        winner = Winner.PLAYER
    elif b_total > p_total:
        winner = Winner.BANKER
    else:
        winner = Winner.TIE
    return Coup(
        player=tuple(player),
        banker=tuple(banker),
        player_total=p_total,
        banker_total=b_total,
        winner=winner,
        natural=natural,
        player_pair=player[0].rank == player[1].rank,
        banker_pair=banker[0].rank == banker[1].rank,
        deal_order=tuple(order),
    )
