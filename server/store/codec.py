"""The msgpack forms the stores keep: table state, rules, bets and event payloads.

The table state is a versioned blob: a map with `v`, the format it was written in. A node
reads every older format (migrating it on the way in), so a rolling upgrade never stops a
table; a blob it cannot read raises StateUnreadable, which the table loop's failure policy
handles (docs/redis.md, "The state blob").

Events are stored as the exact bytes broadcast to clients: the wire encodes each one
(server/wire/envelope.py `template`) but its seq and ts, which the commit script fills in.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import replace
from typing import Any

import msgpack

from server.core.bets import Bet, Paytable, Spot, SpotLimit, TableLimits
from server.core.cards import Card, decode_cards, encode_cards
from server.core.rules import PRESETS, TableRules
from server.core.shoe import Shoe
from server.core.table import TableState
from server.store.base import StateUnreadable

__all__ = [
    "STATE_FORMAT",
    "bet_from_bytes",
    "packb",
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


# The `v` this node writes; bump it, and add a migration, on any change an older node would
# misread. A field an older node may drop does not change the format: TableState.from_dict
# reads a blob without it (or from such a node) with a default, as `pairs` (the roads' pair
# dots): a rolling upgrade then never voids a round for the sake of a scoreboard dot.
# Format 2 adds `fair`, the committed shoe (its seed, parameters and client seed): an older
# node that dropped it could not seal, prove or reveal the shoe, so it must not read it.
STATE_FORMAT = 2


class _Shoes:
    """The shoes' cards as the blob holds them (two characters a card), both ways, for the
    few shoes in play. A shoe of 8 decks is 416 cards, and a table steps a few times a
    second and every join reads its state: turning them to and from text each time cost
    ~170 and ~700 us, for cards that change once a shoe. Cards are immutable: shared."""

    def __init__(self, size: int = 32) -> None:
        self.size = size
        self.decoded: dict[str, list[Card]] = {}
        self.encoded: list[tuple[list[Card], str]] = []  # newest last

    def decode(self, text: str) -> list[Card]:
        cards = self.decoded.get(text)
        if cards is None:
            cards = decode_cards(text)
            self._keep(text, cards)
        return cards

    def encode(self, cards: list[Card]) -> str:
        # One shoe's cards are the same objects from one step to the next (each state's
        # list is a copy of the last one's), so the comparison is a pointer walk; another
        # shoe differs within a few cards.
        for known, text in reversed(self.encoded):
            if len(known) == len(cards) and known == cards:
                return text
        text = encode_cards(cards)
        self._keep(text, list(cards))
        return text

    def _keep(self, text: str, cards: list[Card]) -> None:
        if len(self.decoded) >= self.size:
            del self.decoded[next(iter(self.decoded))]  # the oldest
        self.decoded[text] = cards
        if len(self.encoded) >= self.size:
            del self.encoded[0]
        self.encoded.append((cards, text))


_SHOES = _Shoes()


def state_to_bytes(state: TableState) -> bytes:
    shoe = state.shoe
    if shoe is None:
        return packb({"v": STATE_FORMAT, **state.to_dict()})
    data = replace(state, shoe=None).to_dict()
    data["shoe"] = {  # Shoe.to_state's form, the cards' text from the cache
        "cards": _SHOES.encode(shoe.cards),
        "position": shoe.position,
        "cut_index": shoe.cut_index,
    }
    return packb({"v": STATE_FORMAT, **data})


def state_from_bytes(data: bytes) -> TableState:
    """The state in any format up to STATE_FORMAT; StateUnreadable for anything else."""
    try:
        raw = unpackb(data)
        if not isinstance(raw, dict):
            raise TypeError(f"a {type(raw).__name__}, not a map")
        fields = _migrate(raw)
        shoe = fields.get("shoe")
        if not isinstance(shoe, dict):
            return TableState.from_dict(fields)
        # Shoe.from_state's checks, the cards from the cache.
        cards, position, cut_index = shoe["cards"], shoe["position"], shoe["cut_index"]
        if not (isinstance(cards, str) and type(position) is int and type(cut_index) is int):
            raise TypeError(f"a shoe of {type(cards).__name__}, {position!r}, {cut_index!r}")
        state = TableState.from_dict({**fields, "shoe": None})
        return replace(state, shoe=Shoe(_SHOES.decode(cards), position, cut_index))
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


def _from_v1(data: dict[str, Any]) -> dict[str, Any]:
    """Format 1 had no committed shoe: its shoe plays on unproved, the next one is committed."""
    return {"fair": None, **data, "v": 2}


_MIGRATIONS = {0: _from_v0, 1: _from_v1}  # format -> the step to the next one


def rules_from_dict(data: Mapping[str, Any]) -> TableRules:
    """The inverse of TableRules.to_dict. Rules stored before tables had a title get their
    preset's (by name), or none."""
    paytable = Paytable(
        banker_commission_bp=int(data["banker_commission_bp"]),
        no_commission=bool(data["no_commission"]),
        tie_pays=int(data["tie_pays"]),
        pair_pays=int(data["pair_pays"]),
    )
    limits = TableLimits(
        {Spot(spot): SpotLimit(int(low), int(high)) for spot, (low, high) in data["limits"].items()}
    )
    name = str(data["name"])
    preset = PRESETS.get(name)
    title = data.get("title", preset.title if preset is not None else "")
    return TableRules(
        name=name,
        title=str(title),
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
