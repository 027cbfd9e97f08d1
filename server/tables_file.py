"""Tables and their rules from a TOML file (`--tables-file`), so an operator can run a VIP
table with its own limits without code:

    [tables.vip]
    preset = "classic8"          # the rules it starts from (default: the table's id)
    name = "VIP Baccarat"        # what players read (sent as rules.title)
    [tables.vip.limits]
    banker = [1000, 500000]      # minimum and maximum stake, minor units

Every problem is a ValueError of one line naming the file and the key, so `baccarat serve`
stops at start with it (exit status 2), before it binds a port or touches a store.
"""

from __future__ import annotations

import dataclasses
import re
import tomllib
from collections.abc import Mapping
from pathlib import Path
from typing import Any

from server.core.bets import Paytable, Spot, SpotLimit, TableLimits
from server.core.rules import TableRules, rules_preset

__all__ = ["TABLE_ID", "read_tables_file", "tables_from_toml"]

TABLE_ID = re.compile(r"[A-Za-z0-9._-]{1,64}")

# key -> (type, where it goes); bool is checked apart from int (True is an int in Python).
_RULE_KEYS: dict[str, type] = {
    "name": str,  # the table's name for players: TableRules.title (the rules' name stays)
    "description": str,
    "decks": int,
    "cut_card_from_end": int,
    "reshuffle_every_round": bool,
}
_RULE_FIELDS = {"name": "title"}  # a file key -> its TableRules field, where they differ
_PAYTABLE_KEYS: dict[str, type] = {
    "banker_commission_bp": int,
    "no_commission": bool,
    "tie_pays": int,
    "pair_pays": int,
}
_TABLE_KEYS = {"preset", "limits", *_RULE_KEYS, *_PAYTABLE_KEYS}


class _Bad(ValueError):
    """A problem at one key of the file; the caller prefixes the file's name."""


def read_tables_file(path: str) -> dict[str, TableRules]:
    """The tables of a TOML file, in file order; ValueError (one line) when anything is off."""
    try:
        text = Path(path).read_text(encoding="utf-8")
    except (OSError, UnicodeDecodeError) as error:
        raise ValueError(f"tables file {path}: cannot read it: {error}") from None
    try:
        return tables_from_toml(text)
    except tomllib.TOMLDecodeError as error:
        raise ValueError(f"tables file {path}: not valid TOML: {error}") from None
    except _Bad as error:
        raise ValueError(f"tables file {path}: {error}") from None


def tables_from_toml(text: str) -> dict[str, TableRules]:
    document = tomllib.loads(text)
    if set(document) != {"tables"}:
        unknown = sorted(set(document) - {"tables"})
        raise _Bad(f"unknown top-level key {unknown[0]!r}" if unknown else "no [tables.ID]")
    tables = document["tables"]
    if not isinstance(tables, dict) or not tables:
        raise _Bad("no tables: add one as [tables.ID]")
    return {table_id: _table(table_id, spec) for table_id, spec in tables.items()}


def _table(table_id: str, spec: object) -> TableRules:
    where = f"tables.{table_id}"
    if not TABLE_ID.fullmatch(table_id):
        raise _Bad(f"{where}: a table id is 1-64 letters, digits, '.', '_' or '-'")
    if not isinstance(spec, dict):
        raise _Bad(f"{where}: must be a table ([{where}]), not a value")
    unknown = sorted(set(spec) - _TABLE_KEYS)
    if unknown:
        raise _Bad(f"{where}: unknown key {unknown[0]!r}; known: {', '.join(sorted(_TABLE_KEYS))}")
    preset = _typed(spec, "preset", str, where, default=table_id)
    try:
        base = rules_preset(preset)
        rules_fields = {
            _RULE_FIELDS.get(k, k): _typed(spec, k, t, where)
            for k, t in _RULE_KEYS.items()
            if k in spec
        }
        paytable = _paytable(base.paytable, spec, where)
        limits = _limits(base.limits, spec.get("limits", {}), where)
        return dataclasses.replace(base, **rules_fields, paytable=paytable, limits=limits)
    except _Bad:
        raise
    except ValueError as error:  # an unknown preset, decks out of range, a bad cut card
        raise _Bad(f"{where}: {error}") from None


def _typed(spec: Mapping[str, Any], key: str, kind: type, where: str, default: Any = None) -> Any:
    value = spec.get(key, default)
    if not isinstance(value, kind) or (kind is int and isinstance(value, bool)):
        raise _Bad(f"{where}.{key}: must be {_KIND_NAMES[kind]}, got {value!r}")
    return value


_KIND_NAMES = {str: "a string", int: "a whole number", bool: "true or false"}


def _paytable(base: Paytable, spec: Mapping[str, Any], where: str) -> Paytable:
    values = {k: _typed(spec, k, t, where) for k, t in _PAYTABLE_KEYS.items() if k in spec}
    paytable = dataclasses.replace(base, **values)
    if not 0 <= paytable.banker_commission_bp <= 10_000:
        raise _Bad(f"{where}.banker_commission_bp: must be 0-10000 basis points")
    if paytable.tie_pays < 1 or paytable.pair_pays < 1:
        raise _Bad(f"{where}: tie_pays and pair_pays must be at least 1 (N to 1)")
    return paytable


def _limits(base: TableLimits, spec: object, where: str) -> TableLimits:
    where = f"{where}.limits"
    if not isinstance(spec, dict):
        raise _Bad(f"{where}: must be a table ([{where}]) of spot = [minimum, maximum]")
    spots = dict(base.spots)
    for name, pair in spec.items():
        if name not in Spot._value2member_map_:
            raise _Bad(f"{where}: unknown spot {name!r}; one of {', '.join(s for s in Spot)}")
        spots[Spot(name)] = _limit(pair, f"{where}.{name}")
    return TableLimits(spots)


def _limit(pair: object, where: str) -> SpotLimit:
    if not (
        isinstance(pair, list)
        and len(pair) == 2
        and all(isinstance(v, int) and not isinstance(v, bool) for v in pair)
    ):
        raise _Bad(f"{where}: must be [minimum, maximum] in minor units, got {pair!r}")
    minimum, maximum = pair
    if not 1 <= minimum <= maximum:
        raise _Bad(f"{where}: need 1 <= minimum <= maximum, got [{minimum}, {maximum}]")
    return SpotLimit(minimum, maximum)
