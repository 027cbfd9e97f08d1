"""The msgpack forms the Redis engine stores: table state, rules, bets and event payloads.

Events are stored as the exact bytes broadcast to clients. The Lua scripts build each one as
a msgpack map whose first five entries (type, table, seq, round, ts) they write themselves,
followed by the payload's key/value pairs encoded here: that keeps the key order of the
memory engine's events and lets a script stamp the seq without decoding the payload.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

import msgpack

from server.core.bets import Bet, Paytable, Spot, SpotLimit, TableLimits
from server.core.events import Payload
from server.core.rules import TableRules
from server.core.table import TableState

__all__ = [
    "bet_from_bytes",
    "packb",
    "payload_pairs",
    "rules_from_dict",
    "state_from_bytes",
    "state_to_bytes",
    "unpackb",
]


def packb(value: object) -> bytes:
    data = msgpack.packb(value, use_bin_type=True)
    assert isinstance(data, bytes)
    return data


def unpackb(data: bytes) -> Any:
    return msgpack.unpackb(data, raw=False)


def payload_pairs(payload: Payload) -> tuple[int, bytes]:
    """The payload's entries as concatenated msgpack key/value pairs, and how many."""
    return len(payload), b"".join(packb(key) + packb(value) for key, value in payload.items())


def state_to_bytes(state: TableState) -> bytes:
    return packb(state.to_dict())


def state_from_bytes(data: bytes) -> TableState:
    return TableState.from_dict(unpackb(data))


def rules_from_dict(data: Mapping[str, Any]) -> TableRules:
    """The inverse of TableRules.to_dict."""
    paytable = Paytable(
        banker_commission_bp=int(data["banker_commission_bp"]),
        no_commission=bool(data["no_commission"]),
        tie_pays=int(data["tie_pays"]),
        pair_pays=int(data["pair_pays"]),
    )
    limits = TableLimits(
        {Spot(spot): SpotLimit(int(low), int(high)) for spot, (low, high) in data["limits"].items()}
    )
    return TableRules(
        name=str(data["name"]),
        decks=int(data["decks"]),
        cut_card_from_end=int(data["cut_card_from_end"]),
        reshuffle_every_round=bool(data["reshuffle_every_round"]),
        paytable=paytable,
        limits=limits,
        description=str(data["description"]),
    )


def bet_from_bytes(data: bytes) -> Bet:
    """A bet as the place_bet script records it: [bet_id, player, spot, amount]."""
    bet_id, player, spot, amount = unpackb(data)
    return Bet(bet_id, player, Spot(spot), amount)
