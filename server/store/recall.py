"""Game-recall records, built the same way by both engines.

A record is written per bettor when a round is settled or voided, in the commit that credits
them. Everything but the time and the balance after is known before the commit; the engines
add those two inside their atomic step (the Redis engine in Lua, without decoding the rest).
"""

from __future__ import annotations

from typing import Any

from server.core.bets import Payout
from server.core.recall import RoundSummary

__all__ = ["history_record", "record_body"]


def record_body(
    table_id: str, round_no: int, payouts: list[Payout], summary: RoundSummary | None
) -> dict[str, Any]:
    """One player's record of one round, without time and balance_after. `payouts` are that
    player's, one per bet, in bet order; a missing summary records no cards and no result."""
    return {
        "table": table_id,
        "round": round_no,
        "bets": [{"bet_id": p.bet_id, "spot": p.spot.value, "amount": p.amount} for p in payouts],
        **(summary or RoundSummary()).to_dict(),
        "payouts": [p.to_dict() for p in payouts],
    }


def history_record(body: dict[str, Any], time_ms: int, balance_after: int) -> dict[str, Any]:
    """The record as history() returns it, its fields in the documented order."""
    return {
        "table": body["table"],
        "round": body["round"],
        "time": time_ms,
        "bets": body["bets"],
        "cards": body["cards"],
        "player_total": body["player_total"],
        "banker_total": body["banker_total"],
        "winner": body["winner"],
        "natural": body["natural"],
        "payouts": body["payouts"],
        "balance_after": balance_after,
    }
