"""What a round's `round_settled.paid` may be, from what the table published.

Individual bets are never public: a round shows its stakes per spot (the last `bet_totals`)
and how many bets there were. Player, Tie and pair wins are whole multiples of the stake, so
they add up exactly; a winning Banker bet is rounded down per bet (server/core/bets.py), so
the Banker spot's credit is known to within one minor unit per bet on it. `paid_range` gives
the lowest and highest total credit the rules allow for those stakes and that coup.
"""

from __future__ import annotations

from collections.abc import Mapping

from server.core.bets import Paytable, Spot
from server.core.coup import Coup
from server.core.rules import rules_preset

__all__ = ["paid_range", "paytable_of"]


def paid_range(paytable: Paytable, totals: Mapping[str, int], bets: int, coup: Coup) -> range:
    """Every total credit (stakes included) the paytable allows: a range, often of one value."""
    low = high = 0
    for name, stake in totals.items():
        spot = Spot(name)
        winnings = paytable.winnings(spot, stake, coup)
        if winnings is None:
            continue  # lost: nothing credited
        low, high = low + stake, high + stake
        exact = winnings == 0 or spot is not Spot.BANKER
        exact = exact or (paytable.no_commission and coup.banker_total != 6)
        high += winnings  # rounding the whole stake at once rounds down least
        # Each bet on the spot rounds down by less than one unit, and there are at most `bets`.
        low += winnings if exact else max(0, winnings - max(0, bets - 1))
    return range(low, high + 1)


def paytable_of(rules: object) -> Paytable | None:
    """The paytable of a rules map (`welcome.tables[]`, `snapshot.rules`), or of a preset
    named by a string (`round_opened.rules`); None when neither can be read."""
    if isinstance(rules, str):
        try:
            return rules_preset(rules).paytable
        except ValueError:
            return None
    if not isinstance(rules, Mapping):
        return None
    try:
        return Paytable(
            banker_commission_bp=int(rules["banker_commission_bp"]),
            no_commission=bool(rules["no_commission"]),
            tie_pays=int(rules["tie_pays"]),
            pair_pays=int(rules["pair_pays"]),
        )
    except (KeyError, TypeError, ValueError):
        return None
