"""Table event kinds and their payloads (past tense: what happened).

An event payload is a plain dict of wire-safe values. The store adds `type`, `table`,
`seq` and `round` when it appends the event, so the same bytes can be broadcast and replayed.
"""

from __future__ import annotations

from enum import StrEnum
from typing import Any

__all__ = ["EventKind", "Payload", "event"]

Payload = dict[str, Any]


class EventKind(StrEnum):
    SHOE_SHUFFLED = "shoe_shuffled"
    BURN = "burn"
    CUT_CARD = "cut_card"
    ROUND_OPENED = "round_opened"
    BET_TOTALS = "bet_totals"  # the round's stakes per spot, never who placed them
    BETTING_CLOSED = "betting_closed"
    CARD = "card"
    ROUND_RESULT = "round_result"
    ROUND_SETTLED = "round_settled"
    ROUND_VOIDED = "round_voided"
    TABLE_PAUSED = "table_paused"  # an operator paused the table: no round opens until resumed
    TABLE_RESUMED = "table_resumed"


def event(kind: EventKind, **fields: Any) -> Payload:
    return {"kind": kind.value, **fields}
