"""Work that grows with a round's bets, done in slices that give the event loop back.

One round may hold tens of thousands of bets (200 players betting at their rate put ~40,000 in
one). Settling them, crediting them and delivering the settlements in one go blocked the
node's event loop for ~480 ms: every ping, bet and event of every table on the node waited.
So each of those steps handles at most about SLICE bets (or payouts) and then yields, and no
turn of the loop does more than a few milliseconds of it, whatever the number of bets.
"""

from __future__ import annotations

import asyncio
from collections.abc import Callable, Sequence
from typing import TypeVar

from server.core.bets import Payout

__all__ = ["SLICE", "in_slices", "player_slices"]

SLICE = 500  # bets or payouts handled between two yields: ~1-2 ms of work on one core

T = TypeVar("T")
U = TypeVar("U")


async def in_slices(items: Sequence[T], work: Callable[[Sequence[T]], list[U]]) -> list[U]:
    """`work` applied to `items` SLICE at a time, yielding after each: the results in order."""
    done: list[U] = []
    for first in range(0, len(items), SLICE):
        done += work(items[first : first + SLICE])
        await asyncio.sleep(0)
    return done


async def player_slices(payouts: Sequence[Payout]) -> list[list[Payout]]:
    """The payouts cut into slices of whole players of about SLICE payouts each (one player
    with more bets than that is a slice of its own): the players in the order of their first
    payout, each one's in bet order. A player's payouts are never split, so a commit credits
    all of them or none (see Store.commit)."""
    by_player: dict[str, list[Payout]] = {}
    for first in range(0, len(payouts), SLICE):
        for payout in payouts[first : first + SLICE]:
            by_player.setdefault(payout.player, []).append(payout)
        await asyncio.sleep(0)
    slices: list[list[Payout]] = []
    current: list[Payout] = []
    for mine in by_player.values():  # one step per player, not per payout
        if current and len(current) + len(mine) > SLICE:
            slices.append(current)
            current = []
        current += mine
    if current:
        slices.append(current)
    return slices
