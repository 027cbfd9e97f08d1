"""One message schema, two encodings: msgpack in binary frames, JSON in text frames.

The encoding is chosen per connection by WebSocket subprotocol; a client that asks for
neither gets msgpack. Incoming frames are decoded by their frame type, so a JSON text frame
on a msgpack connection is understood too. Answers always use the connection's encoding.
"""

from __future__ import annotations

import json
import re
from collections.abc import Mapping
from enum import StrEnum

import msgpack

__all__ = [
    "MAX_FRAME_BYTES",
    "MAX_JSON_DEPTH",
    "SUBPROTOCOLS",
    "Encoding",
    "Undecodable",
    "Unencodable",
    "decode",
    "encode",
    "has_lone_surrogate",
]

MAX_FRAME_BYTES = 16 * 1024  # a client message is small; bigger frames close with 1009
# No client message nests arrays and maps more than a few levels; the server refuses a JSON
# frame nested deeper before parsing it (decode's max_json_depth, see _json_too_deep).
MAX_JSON_DEPTH = 32
_JSON_STRING = re.compile(r'"(?:[^"\\]|\\.)*"', re.DOTALL)  # a bracket in one is no nesting
_NOT_BRACKETS = re.compile(r"[^\[\]{}]+")
_EMPTY_PAIR = re.compile(r"\[\]|\{\}")  # one substitution removes exactly one level


class Encoding(StrEnum):
    MSGPACK = "baccarat.v1.msgpack"
    JSON = "baccarat.v1.json"


SUBPROTOCOLS = (Encoding.MSGPACK, Encoding.JSON)

Frame = bytes | str


# A str holding a UTF-16 surrogate (from a JSON "\ud800" escape, or from invalid UTF-8 in a
# msgpack str, see decode) is no Unicode text: UTF-8 cannot encode it, so neither a text frame,
# a msgpack str nor Redis can carry it.
_SURROGATE = re.compile("[\ud800-\udfff]")


class Undecodable(ValueError):
    """A frame that is neither valid msgpack nor valid JSON: the connection closes (1003)."""


class Unencodable(ValueError):
    """A message the chosen encoding cannot carry (a bug: client input is checked first)."""


def has_lone_surrogate(text: str) -> bool:
    return not text.isascii() and _SURROGATE.search(text) is not None


def encode(message: Mapping[str, object], encoding: Encoding) -> Frame:
    """One frame for the message; raises Unencodable rather than build a frame that the
    WebSocket layer would fail to send (text frames must be valid UTF-8)."""
    try:
        if encoding is Encoding.JSON:
            text = json.dumps(message, separators=(",", ":"), ensure_ascii=False, allow_nan=False)
            if has_lone_surrogate(text):
                raise ValueError("a string holds a lone surrogate")
            return text
        packed: bytes = msgpack.packb(message, use_bin_type=True)
    except (ValueError, TypeError, OverflowError, RecursionError) as error:
        raise Unencodable(f"cannot encode {message.get('type')!r}: {error}") from None
    return packed


def _json_too_deep(text: str, limit: int) -> bool:
    """Whether the JSON text nests arrays and objects more than `limit` deep (or its brackets
    do not match, which no JSON value has).

    Checked before parsing because json's parser recurses once per level on the interpreter's
    recursion budget: a frame nested ~1,000 deep is refused with a RecursionError, but on the
    way there any finalizer the cyclic collector runs (an allocation can start a collection)
    finds no budget left and fails, reported as an unraisable exception (seen in the fuzz
    test). A frame nests no deeper than it has opening brackets, so the common frame costs two
    counts. Otherwise its brackets outside strings are kept and the innermost pairs removed,
    one level a pass, all in C: at most `limit` passes."""
    if text.count("[") + text.count("{") <= limit:
        return False
    brackets = _NOT_BRACKETS.sub("", _JSON_STRING.sub("", text))
    too_many_opened = re.compile(r"[\[{]{%d}" % (limit + 1))  # noqa: UP031 (re caches it)
    for _ in range(limit):
        if too_many_opened.search(brackets):  # the plain "[[[[..." at once
            return True
        # One substitution, not two str.replace: "{[]}" would lose two levels in one pass.
        inner_removed = _EMPTY_PAIR.sub("", brackets)
        if not inner_removed:
            return False
        if len(inner_removed) == len(brackets):
            return True  # unmatched
        brackets = inner_removed
    return True


def decode(frame: Frame, max_json_depth: int | None = None) -> object:
    """Decode one frame; the result may be any value (callers check it is a map).

    With `max_json_depth` (the server, for its clients' frames: MAX_JSON_DEPTH), a JSON frame
    nested deeper is Undecodable before it is parsed (see _json_too_deep). Frames from a
    server (bots, tests) are not checked: a settlement or a replay holds hundreds of maps,
    and the check would cost ~1 ms a message where it protects nothing."""
    try:
        if isinstance(frame, str):
            if max_json_depth is not None and _json_too_deep(frame, max_json_depth):
                raise ValueError(f"arrays and objects nested deeper than {max_json_depth}")
            return json.loads(frame)
        # The frame's size is already bounded by the server's max_size; unpackb sizes its own
        # limits from len(frame) (it takes no max_buffer_size). Invalid UTF-8 in a str decodes
        # to lone surrogates, so parsing refuses it (BAD_MESSAGE) as it does a JSON "\ud800".
        return msgpack.unpackb(
            frame, raw=False, strict_map_key=False, unicode_errors="surrogateescape"
        )
    except (ValueError, TypeError, RecursionError, msgpack.UnpackException) as error:
        raise Undecodable(f"cannot decode frame: {error}") from None
