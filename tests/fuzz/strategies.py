"""Hypothesis strategies for client frames: valid-looking commands with mutated fields, junk
values (lone surrogates, huge integers, floats, bytes, deep nesting), and mutated bytes.

A frame is drawn as a `FrameSpec`: a message (or raw text/bytes), how to encode it, and byte
mutations to apply. Values that depend on the live table (its current round) are drawn as
CURRENT_ROUND and filled in just before sending, so bets can actually be accepted.
"""

from __future__ import annotations

import json
from dataclasses import dataclass
from typing import Any

import msgpack
from hypothesis import strategies as st

from server.core.bets import Spot
from server.wire.messages import MAX_ID_LENGTH

__all__ = ["CURRENT_ROUND", "Deep", "FrameSpec", "frame_specs", "frames_of", "junk_values"]

CURRENT_ROUND = "\x00current-round\x00"  # a marker replaced by the table's round when sent
TYPES = ["join", "leave", "bet", "replay", "ping"]
SERVER_LIKE_TYPES = ["welcome", "snapshot", "event", "pong", "error", "JOIN", "", "bet "]

# Every code point, lone surrogates (category Cs) included: a JSON "\ud800" escape decodes
# to one, and invalid UTF-8 in a msgpack str decodes to one (surrogateescape).
_any_char = st.characters(codec=None, exclude_categories=())
_texts = st.text(_any_char, max_size=12) | st.text(max_size=80)
_big_ints = st.sampled_from(
    [2**31, 2**53 + 1, 2**63 - 1, 2**63, 2**64 - 1, 2**64, -(2**63), -(2**63) - 1, 10**30, -1]
)
_ints = st.integers(-(2**64), 2**64) | _big_ints | st.integers()
_scalars = (
    st.none()
    | st.booleans()
    | _ints
    | st.floats(allow_nan=True, allow_infinity=True)
    | _texts
    | st.binary(max_size=12)
)


def _containers(inner: st.SearchStrategy[Any]) -> st.SearchStrategy[Any]:
    keys = _texts | st.integers(-5, 5) | st.binary(max_size=4)
    return st.lists(inner, max_size=4) | st.dictionaries(keys, inner, max_size=4)


@dataclass(frozen=True)
class Deep:
    """Lists nested `depth` deep, built only when sent (hypothesis would recurse to print it)."""

    depth: int

    @property
    def token(self) -> str:
        return f"\x00deep-{self.depth}\x00"  # encoded as a plain string, then swapped

    def json(self) -> str:
        return "[" * self.depth + '"deep"' + "]" * self.depth

    def msgpack(self) -> bytes:
        packed: bytes = msgpack.packb("deep")
        return b"\x91" * self.depth + packed


junk_values: st.SearchStrategy[Any] = st.recursive(_scalars, _containers, max_leaves=10)
_deep = st.builds(Deep, st.integers(1, 3000))


def _weighted(*choices: tuple[int, st.SearchStrategy[Any]]) -> st.SearchStrategy[Any]:
    """One of the strategies, each drawn with its weight (one_of gives equal shares to
    distinct strategies and may merge repeated ones)."""
    table = [strategy for weight, strategy in choices for _ in range(weight)]
    return st.integers(0, len(table) - 1).flatmap(lambda i: table[i])


def _mostly(good: st.SearchStrategy[Any], *others: st.SearchStrategy[Any]) -> Any:
    """`good` three times in four, else one of the others."""
    return _weighted((3, good), (1, st.one_of(*others)))


def _plausible(name: str) -> st.SearchStrategy[Any]:
    """Values a real client would send for this field, near the edges of what is valid."""
    ids = st.text(st.characters(codec="utf-8"), min_size=1, max_size=MAX_ID_LENGTH)
    spots = st.sampled_from([s.value for s in Spot])
    plausible: dict[str, st.SearchStrategy[Any]] = {
        "table": _mostly(st.just("t1"), st.sampled_from(["t2", "T1", "x" * 65, ""]), ids),
        "since": st.integers(-2, 5000) | _big_ints,
        "round": _mostly(st.just(CURRENT_ROUND), st.integers(-1, 5000), _big_ints),
        "after": st.integers(-2, 5000) | _big_ints,
        "bet_id": _mostly(ids, st.sampled_from(["b", "retry", "x" * 65, ""])),
        "spot": _mostly(spots, st.sampled_from(["Player", "none", ""])),
        "amount": _mostly(st.integers(1, 20_000), st.integers(-10, 10**7), _big_ints),
        "ref": st.integers() | ids | st.just("x" * 65),
        "type": st.sampled_from(TYPES + SERVER_LIKE_TYPES),
    }
    return plausible[name]


_FIELDS = ["table", "since", "round", "after", "bet_id", "spot", "amount", "ref"]
_OWN_FIELDS = {
    "join": ["table", "since"],
    "leave": ["table"],
    "bet": ["table", "round", "bet_id", "spot", "amount"],
    "replay": ["table", "round", "after"],
    "ping": ["ref"],
}


@st.composite
def commands(draw: st.DrawFn) -> dict[Any, Any]:
    """A command of a known type (bets most often: they move money), either well formed with
    plausible values, or with any field plausible, missing or junk."""
    kind = draw(st.sampled_from(["bet", "bet", "bet", *TYPES]))
    message: dict[Any, Any] = {"type": kind}
    well_formed = draw(st.booleans())
    for name in _OWN_FIELDS[kind] if well_formed else _FIELDS:
        choice = 0 if well_formed else draw(st.integers(0, 9))
        if choice < 7:
            message[name] = draw(_plausible(name))
        elif choice == 9:
            message[name] = draw(junk_values | _deep)
    if draw(st.integers(0, 9)) == 0:
        message["type"] = draw(_plausible("type") | junk_values)
    if draw(st.integers(0, 9)) == 0:
        message[draw(junk_values.filter(_hashable))] = draw(junk_values)
    return message


def _hashable(value: object) -> bool:
    try:
        hash(value)
    except TypeError:
        return False
    return True


@dataclass(frozen=True)
class FrameSpec:
    message: Any  # a value to encode, or raw bytes/str when encoding is "raw"
    encoding: str  # "json", "msgpack" or "raw"
    mutations: tuple[tuple[int, int], ...] = ()  # (position, new byte or -1 to cut there)


def frame_specs() -> st.SearchStrategy[FrameSpec]:
    """Mostly commands (so the handlers run), then any value, mutated bytes, raw junk."""
    encodings = st.sampled_from(["json", "msgpack"])
    encoded = st.builds(FrameSpec, commands(), encodings)
    other = st.builds(FrameSpec, junk_values | _deep, encodings)
    mutation = st.tuples(st.integers(0, 200), st.integers(-1, 255))
    mutations = st.lists(mutation, min_size=1, max_size=3).map(tuple)
    mutated = st.builds(FrameSpec, commands(), encodings, mutations)
    raw = st.builds(FrameSpec, st.binary(max_size=64) | _texts, st.just("raw"))
    return _weighted((6, encoded), (1, other), (2, mutated), (1, raw))


def _default(value: object) -> Any:
    if isinstance(value, bytes):
        return value.decode("latin-1")
    raise TypeError(f"not JSON: {type(value).__name__}")


def frames_of(spec: FrameSpec, current_round: int) -> tuple[bytes, bool]:
    """The frame to send, as (payload, is_text): the message encoded (markers filled in),
    then mutated. A text payload may be invalid UTF-8 on purpose (sent with text=True)."""
    if spec.encoding == "raw":
        if isinstance(spec.message, str):
            return spec.message.encode("utf-8", "surrogatepass"), True
        return bytes(spec.message), False
    deep: list[Deep] = []
    message = _fill(spec.message, current_round, deep)
    if spec.encoding == "json":
        try:  # json escapes lone surrogates (\ud800): exactly what a hostile client sends
            text = json.dumps(message, default=_default)
        except (ValueError, TypeError):  # keys JSON cannot have (bytes)
            text = json.dumps({"type": "unencodable"})
        for nested in deep:
            text = text.replace(json.dumps(nested.token), nested.json(), 1)
        return _mutate(text.encode(), spec.mutations), True
    try:
        packed = msgpack.packb(message, use_bin_type=True, unicode_errors="surrogatepass")
    except (ValueError, TypeError, OverflowError):  # ints beyond 64 bits: send the largest
        packed = msgpack.packb(_clamp(message), use_bin_type=True, unicode_errors="surrogatepass")
    for nested in deep:
        packed = packed.replace(msgpack.packb(nested.token), nested.msgpack(), 1)
    return _mutate(packed, spec.mutations), False


def _fill(value: Any, current_round: int, deep: list[Deep]) -> Any:
    """Markers replaced: CURRENT_ROUND by the round; each Deep by its token (collected)."""
    if isinstance(value, Deep):
        deep.append(value)
        return value.token
    if isinstance(value, str) and value == CURRENT_ROUND:
        return current_round
    if isinstance(value, dict):
        return {k: _fill(v, current_round, deep) for k, v in value.items()}
    if isinstance(value, list):
        return [_fill(v, current_round, deep) for v in value]
    return value


def _clamp(value: Any) -> Any:
    if isinstance(value, int) and not isinstance(value, bool):
        return max(-(2**63), min(value, 2**64 - 1))
    if isinstance(value, dict):
        return {_clamp(k): _clamp(v) for k, v in value.items()}
    if isinstance(value, list):
        return [_clamp(v) for v in value]
    return value


def _mutate(data: bytes, mutations: tuple[tuple[int, int], ...]) -> bytes:
    buffer = bytearray(data)
    for position, byte in mutations:
        if not buffer:
            break
        at = position % len(buffer)
        if byte < 0:
            del buffer[at:]
        else:
            buffer[at] = byte
    return bytes(buffer)
