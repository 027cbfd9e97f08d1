"""The msgpack forms the stores keep: table state, rules, bets and event payloads.

The table state is a versioned blob: a map with `v`, the format it was written in. A node
reads every older format (migrating it on the way in), so a rolling upgrade never stops a
table; a blob it cannot read raises StateUnreadable, which the table loop's failure policy
handles (docs/redis.md, "The state blob").

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
from server.store.base import StateUnreadable

__all__ = [
    "STATE_FORMAT",
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


STATE_FORMAT = 1  # the `v` this node writes; bump it, and add a migration, on any change


def state_to_bytes(state: TableState) -> bytes:
    return packb({"v": STATE_FORMAT, **state.to_dict()})


def state_from_bytes(data: bytes) -> TableState:
    """The state in any format up to STATE_FORMAT; StateUnreadable for anything else."""
    try:
        raw = unpackb(data)
        if not isinstance(raw, dict):
            raise TypeError(f"a {type(raw).__name__}, not a map")
        return TableState.from_dict(_migrate(raw))
    except StateUnreadable:
        raise
    except Exception as error:  # any decoding or shape error: the blob is not a state
        raise StateUnreadable(f"the stored table state cannot be read: {error!r}") from error


def _migrate(data: dict[str, Any]) -> dict[str, Any]:
    version = data.get("v", 0)  # blobs from before formats were numbered are format 0
    if type(version) is not int or not 0 <= version <= STATE_FORMAT:
        raise StateUnreadable(
            f"the stored table state has format {version!r}; this node reads up to {STATE_FORMAT}"
        )
    while version < STATE_FORMAT:
        data = _MIGRATIONS[version](data)
        version = data["v"]
    return data


def _from_v0(data: dict[str, Any]) -> dict[str, Any]:
    """Format 0 had the fields of format 1 and no `v`."""
    return {**data, "v": 1}


_MIGRATIONS = {0: _from_v0}  # format -> the step to the next one


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
