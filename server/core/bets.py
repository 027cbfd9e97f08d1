"""Bet spots, the paytable, table limits, settlement, and verify / can / do for placing a bet.

Money is an int of minor units everywhere. Commission rounding rule: a winning Banker bet
pays stake * (10000 - commission_bp) // 10000, i.e. the winnings are rounded *down* to a whole
minor unit and the house keeps the fraction. The same floor applies to the no-commission
Banker-wins-on-6 half payout.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from dataclasses import dataclass, field
from enum import StrEnum

from server.core.coup import Coup, Winner
from server.core.errors import BetRejected, RejectCode

__all__ = [
    "Bet",
    "BetTotals",
    "Outcome",
    "Payout",
    "Paytable",
    "Spot",
    "SpotLimit",
    "TableLimits",
    "can_place_bet",
    "parse_spot",
    "payouts_by_player",
    "place_bet",
    "settle_bet",
    "settle_bets",
    "verify_bet",
]


class Spot(StrEnum):
    PLAYER = "player"
    BANKER = "banker"
    TIE = "tie"
    PLAYER_PAIR = "player_pair"
    BANKER_PAIR = "banker_pair"


def parse_spot(name: object) -> Spot:
    if isinstance(name, str) and name in Spot._value2member_map_:
        return Spot(name)
    spots = ", ".join(spot.value for spot in Spot)
    raise BetRejected(RejectCode.UNKNOWN_SPOT, f"unknown spot {name!r}; one of {spots}")


@dataclass(frozen=True, slots=True)
class Paytable:
    """What each spot pays, as "N to 1" winnings per unit staked."""

    banker_commission_bp: int = 500  # basis points taken from a Banker win (500 = 5%)
    no_commission: bool = False  # variant: Banker pays 1:1 but only 1:2 when it wins on 6
    tie_pays: int = 8
    pair_pays: int = 11

    def winnings(self, spot: Spot, stake: int, coup: Coup) -> int | None:
        """Winnings on top of the returned stake; 0 for a push; None for a loss."""
        if spot is Spot.PLAYER or spot is Spot.BANKER:
            if coup.winner is Winner.TIE:
                return 0  # Player and Banker bets push on a Tie
            if coup.winner.value != spot.value:
                return None
            if spot is Spot.PLAYER:
                return stake
            if self.no_commission:
                return stake // 2 if coup.banker_total == 6 else stake
            return stake * (10_000 - self.banker_commission_bp) // 10_000
        if spot is Spot.TIE:
            return stake * self.tie_pays if coup.winner is Winner.TIE else None
        won = coup.player_pair if spot is Spot.PLAYER_PAIR else coup.banker_pair
        return stake * self.pair_pays if won else None


@dataclass(frozen=True, slots=True)
class BetTotals:
    """What a table shows of a round's bets: the money on each spot and how many, never who."""

    totals: dict[str, int] = field(default_factory=dict)  # spot -> minor units, in Spot order
    bettors: int = 0  # distinct players
    bets: int = 0

    @classmethod
    def of(cls, totals: Mapping[str, int], bettors: int, bets: int) -> BetTotals:
        """Only the spots with money on them, in Spot order whatever order `totals` has."""
        ordered = {spot.value: totals[spot.value] for spot in Spot if totals.get(spot.value)}
        return cls(ordered, bettors, bets)


@dataclass(frozen=True, slots=True)
class SpotLimit:
    minimum: int
    maximum: int


def _default_limits() -> dict[Spot, SpotLimit]:
    return {
        Spot.PLAYER: SpotLimit(100, 500_000),
        Spot.BANKER: SpotLimit(100, 500_000),
        Spot.TIE: SpotLimit(100, 50_000),
        Spot.PLAYER_PAIR: SpotLimit(100, 25_000),
        Spot.BANKER_PAIR: SpotLimit(100, 25_000),
    }


@dataclass(frozen=True, slots=True)
class TableLimits:
    """Per-spot limits on one player's total stake on that spot in one round (minor units)."""

    spots: Mapping[Spot, SpotLimit] = field(default_factory=_default_limits)

    def for_spot(self, spot: Spot) -> SpotLimit:
        return self.spots[spot]


# Not frozen, by measure: one is made per bet, and a frozen dataclass's __init__ costs
# ~0.5 us more (docs/benchmarks.md, the bet path). Nothing assigns its fields after.
@dataclass(slots=True, unsafe_hash=True)
class Bet:
    bet_id: str
    player: str
    spot: Spot
    amount: int


def verify_bet(
    limits: TableLimits, spot: Spot, amount: object, already_on_spot: int, balance: int
) -> None:
    """Raise BetRejected with the reason if this bet may not be placed; return if it may.

    Phase and round checks belong to the table state; this checks the money.
    """
    if type(amount) is not int or amount <= 0:
        raise BetRejected(RejectCode.BAD_AMOUNT, "amount must be a positive integer of minor units")
    if spot not in limits.spots:
        raise BetRejected(RejectCode.UNKNOWN_SPOT, f"spot {spot.value} is not offered here")
    limit = limits.for_spot(spot)
    if already_on_spot + amount < limit.minimum:
        raise BetRejected(RejectCode.LIMIT, f"{spot.value} minimum is {limit.minimum}")
    if already_on_spot + amount > limit.maximum:
        raise BetRejected(
            RejectCode.LIMIT,
            f"{spot.value} maximum is {limit.maximum}; you have {already_on_spot} on it",
        )
    if amount > balance:
        raise BetRejected(RejectCode.INSUFFICIENT_FUNDS, f"balance {balance} is below {amount}")


def can_place_bet(
    limits: TableLimits, spot: Spot, amount: object, already_on_spot: int, balance: int
) -> bool:
    try:
        verify_bet(limits, spot, amount, already_on_spot, balance)
    except BetRejected:
        return False
    return True


def place_bet(
    limits: TableLimits,
    bet_id: str,
    player: str,
    spot: Spot,
    amount: int,
    already_on_spot: int,
    balance: int,
) -> Bet:
    verify_bet(limits, spot, amount, already_on_spot, balance)
    return Bet(bet_id, player, spot, amount)


class Outcome(StrEnum):
    WIN = "win"
    LOSE = "lose"
    PUSH = "push"


@dataclass(frozen=True, slots=True)
class Payout:
    """One settled bet: `credit` is what goes back to the balance (stake + winnings, or 0)."""

    bet_id: str
    player: str
    spot: Spot
    amount: int
    outcome: Outcome
    credit: int

    def to_dict(self) -> dict[str, object]:
        return {
            "bet_id": self.bet_id,
            "spot": self.spot.value,
            "amount": self.amount,
            "outcome": self.outcome.value,
            "credit": self.credit,
        }


def settle_bet(paytable: Paytable, bet: Bet, coup: Coup) -> Payout:
    winnings = paytable.winnings(bet.spot, bet.amount, coup)
    if winnings is None:
        return Payout(bet.bet_id, bet.player, bet.spot, bet.amount, Outcome.LOSE, 0)
    # A push is decided by the rule (Player/Banker on a Tie), not by the amount: a tiny
    # winning Banker stake whose commission-reduced winnings round down to 0 still won.
    push = bet.spot in (Spot.PLAYER, Spot.BANKER) and coup.winner is Winner.TIE
    outcome = Outcome.PUSH if push else Outcome.WIN
    return Payout(bet.bet_id, bet.player, bet.spot, bet.amount, outcome, bet.amount + winnings)


def settle_bets(paytable: Paytable, bets: Iterable[Bet], coup: Coup) -> list[Payout]:
    return [settle_bet(paytable, bet, coup) for bet in bets]


def payouts_by_player(payouts: Iterable[Payout]) -> dict[str, list[Payout]]:
    """Each player's payouts, players in the order of their first payout, each in bet order."""
    grouped: dict[str, list[Payout]] = {}
    for payout in payouts:
        grouped.setdefault(payout.player, []).append(payout)
    return grouped
