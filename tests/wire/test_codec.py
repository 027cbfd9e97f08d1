"""The wire codec: one schema, msgpack in binary frames and JSON in text frames."""

from __future__ import annotations

import json
from typing import Any

import msgpack
import pytest

from server.wire import codec
from server.wire.codec import (
    MAX_JSON_DEPTH,
    SUBPROTOCOLS,
    Encoding,
    Undecodable,
    Unencodable,
    decode,
    encode,
)

EVENT: dict[str, Any] = {
    "type": "event",
    "table": "t1",
    "seq": 42,
    "round": 7,
    "kind": "round_result",
    "ts": 1_700_000_000_123,
    "winner": "banker",
    "natural": False,
    "player": ["10h", "Kc"],
    "banker": ["7s", "Ad"],
    "closes_at": None,
    "note": "Café ♠",
    "nested": {"a": [1, {"b": -2}], "empty": {}},
}


@pytest.mark.parametrize("encoding", list(Encoding))
def test_round_trip(encoding: Encoding) -> None:
    """decode(encode(m)) == m for every encoding."""
    assert decode(encode(EVENT, encoding)) == EVENT


def test_frame_types() -> None:
    """msgpack encodes to bytes (binary frames), JSON to str (text frames)."""
    assert isinstance(encode(EVENT, Encoding.MSGPACK), bytes)
    assert isinstance(encode(EVENT, Encoding.JSON), str)


def test_json_is_compact_and_keeps_unicode() -> None:
    """JSON frames have no spaces after separators and keep non-ASCII text as is."""
    frame = encode({"a": 1, "b": "♠"}, Encoding.JSON)
    assert frame == '{"a":1,"b":"♠"}'


def test_both_encodings_decode_to_the_same_value() -> None:
    """A message decodes identically whichever encoding carried it."""
    assert decode(encode(EVENT, Encoding.MSGPACK)) == decode(encode(EVENT, Encoding.JSON))


def test_decoding_follows_the_frame_type() -> None:
    """A text frame is JSON and a binary frame is msgpack, whatever the connection uses."""
    assert decode('{"type":"ping"}') == {"type": "ping"}
    assert decode(msgpack.packb({"type": "ping"})) == {"type": "ping"}


def test_subprotocol_names() -> None:
    """The two subprotocols, msgpack first (the default)."""
    assert [e.value for e in SUBPROTOCOLS] == ["baccarat.v1.msgpack", "baccarat.v1.json"]


def test_non_map_values_decode() -> None:
    """Decoding does not judge the shape: lists and scalars come back for the parser to refuse."""
    assert decode("[1,2]") == [1, 2]
    assert decode(msgpack.packb(5)) == 5


@pytest.mark.parametrize(
    "frame",
    [
        b"\xc1",  # a byte msgpack never uses
        b"\x01\x02",  # extra data after a value
        b"\x92\x01",  # truncated array
        b"",
        b"\xde\xff\xff",  # a map header claiming more entries than the frame holds
        b"\x91" * 5000,  # nested deeper than the unpacker allows
        b"\x81\x91\x01\x02",  # a map keyed by an array (unhashable)
        "{",
        "",
        "not json",
        "[" * 5000 + "]" * 5000,  # nested deeper than the parser recurses
    ],
    ids=repr,
)
def test_garbage_is_undecodable(frame: bytes | str) -> None:
    """Anything that is not one valid value raises Undecodable (the server closes with 1003)."""
    with pytest.raises(Undecodable):
        decode(frame)


def test_undecodable_is_a_value_error() -> None:
    """Undecodable is a ValueError, so generic handlers treat it as bad input."""
    assert issubclass(Undecodable, ValueError)


def test_a_frame_near_the_size_limit_decodes() -> None:
    """A 16 KiB msgpack frame (the default max_frame_bytes) decodes."""
    message = {"type": "ping", "ref": "x" * (16 * 1024 - 32)}
    frame = encode(message, Encoding.MSGPACK)
    assert 16 * 1024 - 32 < len(frame) <= 16 * 1024
    assert decode(frame) == message
    assert json.loads(encode(message, Encoding.JSON)) == message


@pytest.mark.parametrize(
    ("frame", "text"),
    [
        (b"\xd9\x02\xff\xfe", "\udcff\udcfe"),  # a msgpack str that is not UTF-8
        (b"\xa3\xed\xa0\x80", "\udced\udca0\udc80"),  # a surrogate encoded as if UTF-8
        ('"\\ud800"', "\ud800"),  # a JSON escape of a lone surrogate
        ('"\\udc00x"', "\udc00x"),
    ],
    ids=repr,
)
def test_strings_utf8_cannot_carry_decode_to_lone_surrogates(frame: bytes | str, text: str) -> None:
    """Both encodings decode such strings to lone surrogates, which parsing refuses as one rule
    (BAD_MESSAGE), instead of a close for msgpack and a crash later for JSON."""
    assert decode(frame) == text


BOTH = (Encoding.MSGPACK, Encoding.JSON)


@pytest.mark.parametrize(
    ("message", "encodings"),
    [
        ({"type": "pong", "ref": "\ud800"}, BOTH),
        ({"type": "error", "\udfff": 1}, BOTH),
        ({"type": "pong", "ref": object()}, BOTH),
        ({"type": "pong", "ref": 2**64}, (Encoding.MSGPACK,)),  # msgpack stops at 64 bits
        ({"type": "pong", "ref": float("nan")}, (Encoding.JSON,)),  # JSON has no NaN
    ],
    ids=repr,
)
def test_a_message_no_frame_can_carry_is_unencodable(
    message: dict[str, Any], encodings: tuple[Encoding, ...]
) -> None:
    """encode raises Unencodable (a ValueError) instead of returning a frame the WebSocket
    layer would then fail to send."""
    for encoding in encodings:
        with pytest.raises(Unencodable):
            encode(message, encoding)


def test_json_nested_past_the_depth_limit_is_refused_before_parsing(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """json's parser recurses on the interpreter's recursion budget, and near its limit any
    finalizer the collector runs meanwhile fails: a JSON frame nested deeper than the server's
    MAX_JSON_DEPTH never reaches the parser."""
    deep = "[" * (MAX_JSON_DEPTH + 1) + "]" * (MAX_JSON_DEPTH + 1)
    interleaved = "[[]" * MAX_JSON_DEPTH + "]" * MAX_JSON_DEPTH  # one level past, not in a row
    assert decode(deep[1:-1], MAX_JSON_DEPTH) is not None  # MAX_JSON_DEPTH levels decode

    def parser_called(text: str) -> object:
        raise AssertionError("the parser was given a frame nested past the limit")

    monkeypatch.setattr(codec.json, "loads", parser_called)
    for frame in (deep, interleaved, "[" * 5000 + "]" * 5000, '{"a":' + "[}" * 40 + "}"):
        with pytest.raises(Undecodable, match="nested deeper"):
            decode(frame, MAX_JSON_DEPTH)


def test_brackets_in_json_strings_are_not_nesting() -> None:
    """A string full of brackets (escaped quotes too) in a shallow frame decodes as usual."""
    text = "[{" * 100 + '\\"]}'
    frame = json.dumps({"type": "ping", "ref": text, "more": [[{"a": [1]}]] * 20})
    assert decode(frame, MAX_JSON_DEPTH) == {
        "type": "ping",
        "ref": text,
        "more": [[{"a": [1]}]] * 20,
    }
