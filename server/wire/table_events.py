"""Every table event as the wire carries it: the envelope (type, table, seq, round, ts)
followed by one payload, which starts with `kind`.

Each payload is defined and built in the core (server/core/events.py); server/wire/envelope.py
puts the envelope in front of it when a store appends it. EVENTS and EVENT_PAYLOADS map each
kind to its shape for the run-time checker (server/wire/shape_check.py).
"""

from __future__ import annotations

from typing import Literal, TypedDict

from server.core.events import (
    BettingClosedPayload,
    BetTotalsPayload,
    BurnPayload,
    CardPayload,
    CutCardPayload,
    EntropyAcceptedPayload,
    RoundOpenedPayload,
    RoundResultPayload,
    RoundSettledPayload,
    RoundVoidedPayload,
    ShoeCommittedPayload,
    ShoeRevealedPayload,
    ShoeSealedPayload,
    ShoeShuffledPayload,
    TablePausedPayload,
    TableResumedPayload,
)

__all__ = [
    "EVENTS",
    "EVENT_PAYLOADS",
    "BetTotalsEvent",
    "BettingClosedEvent",
    "BurnEvent",
    "CardEvent",
    "CutCardEvent",
    "EntropyAcceptedEvent",
    "RoundOpenedEvent",
    "RoundResultEvent",
    "RoundSettledEvent",
    "RoundVoidedEvent",
    "ShoeCommittedEvent",
    "ShoeRevealedEvent",
    "ShoeSealedEvent",
    "ShoeShuffledEvent",
    "TableEvent",
    "TablePausedEvent",
    "TableResumedEvent",
]


class _Envelope(TypedDict):
    type: Literal["event"]
    table: str
    seq: int  # 1, 2, 3, ... per table, no gaps
    round: int
    ts: int  # ms, the store's clock


class ShoeCommittedEvent(_Envelope, ShoeCommittedPayload): ...


class EntropyAcceptedEvent(_Envelope, EntropyAcceptedPayload): ...


class ShoeSealedEvent(_Envelope, ShoeSealedPayload): ...


class ShoeRevealedEvent(_Envelope, ShoeRevealedPayload): ...


class ShoeShuffledEvent(_Envelope, ShoeShuffledPayload): ...


class BurnEvent(_Envelope, BurnPayload): ...


class CutCardEvent(_Envelope, CutCardPayload): ...


class RoundOpenedEvent(_Envelope, RoundOpenedPayload): ...


class BetTotalsEvent(_Envelope, BetTotalsPayload): ...


class BettingClosedEvent(_Envelope, BettingClosedPayload): ...


class CardEvent(_Envelope, CardPayload): ...


class RoundResultEvent(_Envelope, RoundResultPayload): ...


class RoundSettledEvent(_Envelope, RoundSettledPayload): ...


class RoundVoidedEvent(_Envelope, RoundVoidedPayload): ...


class TablePausedEvent(_Envelope, TablePausedPayload): ...


class TableResumedEvent(_Envelope, TableResumedPayload): ...


TableEvent = (
    ShoeCommittedEvent
    | EntropyAcceptedEvent
    | ShoeSealedEvent
    | ShoeRevealedEvent
    | ShoeShuffledEvent
    | BurnEvent
    | CutCardEvent
    | RoundOpenedEvent
    | BetTotalsEvent
    | BettingClosedEvent
    | CardEvent
    | RoundResultEvent
    | RoundSettledEvent
    | RoundVoidedEvent
    | TablePausedEvent
    | TableResumedEvent
)

# The shape of each event by its `kind`, and of its payload.
EVENTS: dict[str, type] = {
    "shoe_committed": ShoeCommittedEvent,
    "entropy_accepted": EntropyAcceptedEvent,
    "shoe_sealed": ShoeSealedEvent,
    "shoe_revealed": ShoeRevealedEvent,
    "shoe_shuffled": ShoeShuffledEvent,
    "burn": BurnEvent,
    "cut_card": CutCardEvent,
    "round_opened": RoundOpenedEvent,
    "bet_totals": BetTotalsEvent,
    "betting_closed": BettingClosedEvent,
    "card": CardEvent,
    "round_result": RoundResultEvent,
    "round_settled": RoundSettledEvent,
    "round_voided": RoundVoidedEvent,
    "table_paused": TablePausedEvent,
    "table_resumed": TableResumedEvent,
}
EVENT_PAYLOADS: dict[str, type] = {
    "shoe_committed": ShoeCommittedPayload,
    "entropy_accepted": EntropyAcceptedPayload,
    "shoe_sealed": ShoeSealedPayload,
    "shoe_revealed": ShoeRevealedPayload,
    "shoe_shuffled": ShoeShuffledPayload,
    "burn": BurnPayload,
    "cut_card": CutCardPayload,
    "round_opened": RoundOpenedPayload,
    "bet_totals": BetTotalsPayload,
    "betting_closed": BettingClosedPayload,
    "card": CardPayload,
    "round_result": RoundResultPayload,
    "round_settled": RoundSettledPayload,
    "round_voided": RoundVoidedPayload,
    "table_paused": TablePausedPayload,
    "table_resumed": TableResumedPayload,
}
