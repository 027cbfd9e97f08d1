"""Reading a recorded stream: JSON lines or a stream of msgpack objects, from a file or stdin.

Either holds one message per record: table events (`{"type": "event", ...}`, exactly as the
server sent them), `replay` answers (their events are taken), and any other server message
(a `welcome` or `snapshot` gives the table's rules; the rest is ignored).
"""

from __future__ import annotations

import json
from collections.abc import Iterator, Mapping
from typing import Any

import msgpack

__all__ = ["FORMATS", "InputError", "detect_format", "parse_messages"]

FORMATS = ("auto", "json", "msgpack")


class InputError(ValueError):
    """The input cannot be read as the format says: one line for stderr, exit status 2."""


def detect_format(data: bytes) -> str:
    """JSON lines start with `{` (msgpack maps never do: 0x7b is the integer 123 there)."""
    return "json" if data.lstrip()[:1] == b"{" else "msgpack"


def parse_messages(data: bytes, fmt: str = "auto") -> list[Mapping[str, Any]]:
    if fmt == "auto":
        fmt = detect_format(data) if data.strip() else "json"
    if fmt not in FORMATS:
        raise InputError(f"unknown format {fmt!r}; one of {', '.join(FORMATS)}")
    return list(_json_lines(data) if fmt == "json" else _msgpack_objects(data))


def _json_lines(data: bytes) -> Iterator[Mapping[str, Any]]:
    for number, line in enumerate(data.splitlines(), 1):
        if not line.strip():
            continue
        try:
            message = json.loads(line)
        except ValueError as error:  # UnicodeDecodeError and JSONDecodeError alike
            raise InputError(f"line {number}: not JSON: {error}") from None
        if not isinstance(message, dict):
            raise InputError(f"line {number}: a {type(message).__name__}, not a message (a map)")
        yield message


def _msgpack_objects(data: bytes) -> Iterator[Mapping[str, Any]]:
    unpacker = msgpack.Unpacker(raw=False, strict_map_key=False)
    unpacker.feed(data)
    number = end = 0
    try:
        for message in unpacker:
            number, end = number + 1, unpacker.tell()
            if not isinstance(message, dict):
                kind = type(message).__name__
                raise InputError(f"msgpack object {number}: a {kind}, not a message (a map)")
            yield message
    except (ValueError, msgpack.UnpackException) as error:
        if isinstance(error, InputError):
            raise
        raise InputError(f"msgpack object {number + 1}: cannot decode: {error}") from None
    if end != len(data):
        raise InputError(f"msgpack: the input ends inside object {number + 1} (truncated)")
