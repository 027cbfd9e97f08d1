"""Client commands, parsed and checked from decoded frames; and the server's error codes (the
error answer itself is built by server/wire/shapes.py `error`).

A command that names a type we do not know, or lacks or mistypes a field, becomes an
`ErrorReply` sent back to the client; bet fields whose *values* the rules judge (spot, amount,
round) pass through so the store answers them with a bet_rejected code.

Every string in a message, map keys included, must be text that UTF-8 can encode (no lone
surrogates): anything the server accepts can then be echoed in either encoding and stored in
Redis. A message holding any other string is refused whole, with BAD_MESSAGE.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from enum import StrEnum
from typing import Any

from server.wire.codec import has_lone_surrogate

__all__ = [
    "HISTORY_DEFAULT",
    "HISTORY_MAX",
    "INT64",
    "MAX_ENTROPY_LENGTH",
    "MAX_ID_LENGTH",
    "Bet",
    "Command",
    "Entropy",
    "ErrorCode",
    "ErrorReply",
    "History",
    "Join",
    "Leave",
    "Ping",
    "Replay",
    "echo_ref",
    "is_encodable",
    "parse_command",
]

MAX_ID_LENGTH = 64
MAX_ENTROPY_LENGTH = 64  # characters of an entropy value
INT64 = range(-(2**63), 2**63)  # integer fields: what msgpack, Redis and Lua all hold exactly
HISTORY_DEFAULT = 20  # rounds in a history answer when the client names no limit
HISTORY_MAX = 100


class ErrorCode(StrEnum):
    BAD_MESSAGE = "BAD_MESSAGE"  # not a map, no string `type`, or a string UTF-8 cannot carry
    UNKNOWN_TYPE = "UNKNOWN_TYPE"
    MISSING_FIELD = "MISSING_FIELD"
    BAD_FIELD = "BAD_FIELD"
    UNKNOWN_TABLE = "UNKNOWN_TABLE"
    NOT_HELD = "NOT_HELD"  # a round no longer kept for replay
    UNAVAILABLE = "UNAVAILABLE"  # the store cannot be reached; try again
    RATE_LIMITED = "RATE_LIMITED"  # over this connection's rate for the kind of message
    INTERNAL = "INTERNAL"  # a bug on our side; the connection and the table carry on
    # entropy (docs/fairness.md): only players, only in a new shoe's first betting window,
    # one value per player per shoe, a string of 1-64 characters
    NOT_A_PLAYER = "NOT_A_PLAYER"
    ENTROPY_CLOSED = "ENTROPY_CLOSED"
    ENTROPY_ALREADY_SENT = "ENTROPY_ALREADY_SENT"
    ENTROPY_FULL = "ENTROPY_FULL"
    BAD_ENTROPY = "BAD_ENTROPY"


class ErrorReply(Exception):
    def __init__(self, code: ErrorCode, message: str, ref: object = None) -> None:
        super().__init__(message)
        self.code = code
        self.message = message
        self.ref = ref


@dataclass(frozen=True, slots=True)
class Join:
    table: str
    since: int | None
    epoch: str | None = None  # the history `since` is a seq of (from snapshot/joined)


@dataclass(frozen=True, slots=True)
class Leave:
    table: str


# Not frozen, by measure: one is made per bet, and a frozen dataclass's __init__ costs
# ~0.5 us more (docs/benchmarks.md, the bet path). Nothing assigns its fields after.
@dataclass(slots=True, unsafe_hash=True)
class Bet:
    table: str
    round: object  # judged by the table: WRONG_ROUND
    bet_id: str
    spot: object  # judged by the rules: UNKNOWN_SPOT
    amount: object  # judged by the rules: BAD_AMOUNT


@dataclass(frozen=True, slots=True)
class Replay:
    table: str
    round: int
    after: int | None = None  # page on: only events with a greater seq


@dataclass(frozen=True, slots=True)
class Ping:
    ref: object


@dataclass(frozen=True, slots=True)
class History:
    """Game recall: the player's last `limit` rounds, newest first (this table's only if given)."""

    table: str | None = None
    limit: int = HISTORY_DEFAULT


@dataclass(frozen=True, slots=True)
class Entropy:
    """A player's entropy for the shoe being committed (docs/fairness.md)."""

    table: str
    value: str


Command = Join | Leave | Bet | Replay | Ping | History | Entropy


def _field(message: dict[Any, Any], name: str, kind: type, optional: bool = False) -> Any:
    if name not in message or (optional and message[name] is None):
        if optional:
            return None
        raise ErrorReply(ErrorCode.MISSING_FIELD, f"{message['type']}: missing field {name!r}")
    value = message[name]
    if kind is int and (type(value) is not int or value not in INT64):
        raise ErrorReply(
            ErrorCode.BAD_FIELD, f"{message['type']}: {name!r} must be a 64-bit integer"
        )
    if kind is str and (not isinstance(value, str) or not 0 < len(value) <= MAX_ID_LENGTH):
        raise ErrorReply(
            ErrorCode.BAD_FIELD,
            f"{message['type']}: {name!r} must be a string of 1-{MAX_ID_LENGTH} characters",
        )
    return value


def _parse_join(m: dict[Any, Any]) -> Command:
    since = _field(m, "since", int, optional=True)
    if since is not None and since < 0:
        raise ErrorReply(ErrorCode.BAD_FIELD, "join: 'since' must be >= 0")
    return Join(_field(m, "table", str), since, _field(m, "epoch", str, optional=True))


def _parse_bet(m: dict[Any, Any]) -> Command:
    for name in ("round", "spot", "amount"):
        if name not in m:
            raise ErrorReply(ErrorCode.MISSING_FIELD, f"bet: missing field {name!r}")
    return Bet(
        _field(m, "table", str), m["round"], _field(m, "bet_id", str), m["spot"], m["amount"]
    )


def _parse_leave(m: dict[Any, Any]) -> Command:
    return Leave(_field(m, "table", str))


def _parse_replay(m: dict[Any, Any]) -> Command:
    after = _field(m, "after", int, optional=True)
    if after is not None and after < 0:
        raise ErrorReply(ErrorCode.BAD_FIELD, "replay: 'after' must be >= 0")
    return Replay(_field(m, "table", str), _field(m, "round", int), after)


def _parse_history(m: dict[Any, Any]) -> Command:
    limit = _field(m, "limit", int, optional=True)
    if limit is not None and not 1 <= limit <= HISTORY_MAX:
        raise ErrorReply(ErrorCode.BAD_FIELD, f"history: 'limit' must be 1-{HISTORY_MAX}")
    table = _field(m, "table", str, optional=True)
    return History(table, HISTORY_DEFAULT if limit is None else limit)


def _parse_entropy(m: dict[Any, Any]) -> Command:
    table = _field(m, "table", str)
    if "value" not in m:
        raise ErrorReply(ErrorCode.MISSING_FIELD, "entropy: missing field 'value'")
    value = m["value"]
    if not isinstance(value, str) or not 0 < len(value) <= MAX_ENTROPY_LENGTH:
        raise ErrorReply(
            ErrorCode.BAD_ENTROPY,
            f"entropy: 'value' must be a string of 1-{MAX_ENTROPY_LENGTH} characters",
        )
    return Entropy(table, value)


def echo_ref(message: object) -> str | int | None:
    """The message's `ref` if it is one we echo back: a short string or an integer both
    encodings can carry (msgpack stops at 64 bits); anything else is answered as no ref."""
    ref = message.get("ref") if isinstance(message, dict) else None
    if isinstance(ref, bool) or not isinstance(ref, str | int):
        return None
    if isinstance(ref, str) and (len(ref) > MAX_ID_LENGTH or has_lone_surrogate(ref)):
        return None
    if isinstance(ref, int) and not -(2**63) <= ref < 2**64:
        return None
    return ref


def _parse_ping(m: dict[Any, Any]) -> Command:
    return Ping(echo_ref(m))


_PARSERS: dict[str, Callable[[dict[Any, Any]], Command]] = {
    "join": _parse_join,
    "leave": _parse_leave,
    "bet": _parse_bet,
    "replay": _parse_replay,
    "ping": _parse_ping,
    "history": _parse_history,
    "entropy": _parse_entropy,
}


def is_encodable(value: object) -> bool:
    """Every string in the value, map keys included, is text UTF-8 can encode. Iterative:
    a decoded frame may nest as deep as its decoder allows."""
    if type(value) is dict and _flat_ascii(value):
        return True
    pending = [value]
    while pending:
        item = pending.pop()
        if isinstance(item, str):
            if has_lone_surrogate(item):
                return False
        elif isinstance(item, dict):
            pending.extend(item)
            pending.extend(item.values())
        elif isinstance(item, list | tuple):
            pending.extend(item)
    return True


def _flat_ascii(message: dict[Any, Any]) -> bool:
    """The common frame, checked in one pass: a map of ASCII strings to ASCII strings and
    numbers (an ASCII string holds no surrogate). Anything else: the full walk decides."""
    for key, value in message.items():
        if type(key) is not str or not key.isascii():
            return False
        kind = type(value)
        if kind is str:
            if not value.isascii():
                return False
        elif kind is not int and kind is not bool and kind is not float and value is not None:
            return False
    return True


def parse_command(message: object) -> Command:
    """Turn a decoded frame into a command, or raise ErrorReply saying what is wrong."""
    if not isinstance(message, dict) or not isinstance(message.get("type"), str):
        raise ErrorReply(ErrorCode.BAD_MESSAGE, "a message must be a map with a string 'type'")
    if not is_encodable(message):
        raise ErrorReply(
            ErrorCode.BAD_MESSAGE, "strings must be valid Unicode text (no lone surrogates)"
        )
    parser = _PARSERS.get(message["type"])
    if parser is None:
        known = ", ".join(_PARSERS)
        shown = message["type"][:MAX_ID_LENGTH]  # an answer never grows with the input
        raise ErrorReply(ErrorCode.UNKNOWN_TYPE, f"unknown type {shown!r}; one of {known}")
    return parser(message)
