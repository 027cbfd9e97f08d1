"""Betting strategies: what a player bot stakes in a round, within the table limits and its
balance. Pure; randomness comes in as a `random.Random`.

* flat: the same stake (the spot's minimum times `unit`) on Banker or Player every round;
* martingale: Banker, doubling the stake after each loss and back to the base after a win or
  a push, capped by the spot's maximum and the balance;
* random: one to three spots at random, each with a random whole multiple of the minimum.
"""

from __future__ import annotations

import random
from collections.abc import Mapping
from dataclasses import dataclass
from enum import StrEnum
from typing import Any

from server.core.bets import Spot, SpotLimit

__all__ = ["Strategy", "StrategyName", "limits_from_rules"]


class StrategyName(StrEnum):
    FLAT = "flat"
    MARTINGALE = "martingale"
    RANDOM = "random"


def limits_from_rules(rules: Mapping[str, Any]) -> dict[Spot, SpotLimit]:
    """The `limits` map of a welcome table or a snapshot's rules, as core limits."""
    limits = {}
    for name, pair in (rules.get("limits") or {}).items():
        if name in Spot._value2member_map_ and isinstance(pair, list | tuple) and len(pair) == 2:
            limits[Spot(name)] = SpotLimit(int(pair[0]), int(pair[1]))
    return limits


@dataclass(slots=True)
class Strategy:
    name: StrategyName
    limits: dict[Spot, SpotLimit]
    rng: random.Random
    unit: int = 1  # flat/martingale base stake, in multiples of the spot's minimum
    bets_per_round: int = 1
    _stake: int = 0  # martingale's next stake

    def bets(self, balance: int) -> list[tuple[Spot, int]]:
        """This round's bets, each a (spot, amount) the limits and the balance allow."""
        chosen = self._choose()
        placed: list[tuple[Spot, int]] = []
        on_spot: dict[Spot, int] = {}
        for spot, amount in chosen:
            amount = self._fit(spot, amount, on_spot.get(spot, 0), balance)
            if amount:
                placed.append((spot, amount))
                on_spot[spot] = on_spot.get(spot, 0) + amount
                balance -= amount
        return placed

    def _choose(self) -> list[tuple[Spot, int]]:
        n = max(self.bets_per_round, 1)
        if self.name is StrategyName.RANDOM:
            spots = list(self.limits)
            picks = [self.rng.choice(spots) for _ in range(self.rng.randint(1, max(n, 3)))]
            return [(s, self.limits[s].minimum * self.rng.randint(1, 10)) for s in picks]
        if self.name is StrategyName.MARTINGALE:
            stake = self._stake or self._base(Spot.BANKER)
            return [(Spot.BANKER, stake)] * n
        spot = self.rng.choice((Spot.BANKER, Spot.PLAYER))
        return [(spot, self._base(spot))] * n

    def _base(self, spot: Spot) -> int:
        limit = self.limits.get(spot)
        return limit.minimum * self.unit if limit else 0

    def _fit(self, spot: Spot, amount: int, already: int, balance: int) -> int:
        """The amount cut to the spot's maximum and the balance; 0 if the minimum won't fit."""
        limit = self.limits.get(spot)
        if limit is None:
            return 0
        amount = min(amount, limit.maximum - already, balance)
        return amount if amount > 0 and already + amount >= limit.minimum else 0

    def settled(self, staked: int, returned: int) -> None:
        """Martingale: double after a losing round, back to the base otherwise."""
        if self.name is not StrategyName.MARTINGALE or not staked:
            return
        self._stake = staked // max(self.bets_per_round, 1) * 2 if returned < staked else 0
