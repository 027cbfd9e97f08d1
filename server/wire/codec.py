"""One message schema, two encodings: msgpack in binary frames, JSON in text frames.

The encoding is chosen per connection by WebSocket subprotocol; a client that asks for
neither gets msgpack. Incoming frames are decoded by their frame type, so a JSON text frame
on a msgpack connection is understood too. Answers always use the connection's encoding.
"""

from __future__ import annotations

import json
from enum import StrEnum
from typing import Any

import msgpack

__all__ = [
    "MAX_FRAME_BYTES",
    "SUBPROTOCOLS",
    "Encoding",
    "Undecodable",
    "decode",
    "encode",
]

MAX_FRAME_BYTES = 16 * 1024  # a client message is small; bigger frames close with 1009


class Encoding(StrEnum):
    MSGPACK = "baccarat.v1.msgpack"
    JSON = "baccarat.v1.json"


SUBPROTOCOLS = (Encoding.MSGPACK, Encoding.JSON)

Frame = bytes | str


class Undecodable(ValueError):
    """A frame that is neither valid msgpack nor valid JSON: the connection closes (1003)."""


def encode(message: dict[str, Any], encoding: Encoding) -> Frame:
    if encoding is Encoding.JSON:
        return json.dumps(message, separators=(",", ":"), ensure_ascii=False)
    packed: bytes = msgpack.packb(message, use_bin_type=True)
    return packed


def decode(frame: Frame) -> object:
    """Decode one frame; the result may be any value (callers check it is a map)."""
    try:
        if isinstance(frame, str):
            return json.loads(frame)
        # The frame's size is already bounded by the server's max_size; unpackb sizes its own
        # limits from len(frame) (it takes no max_buffer_size).
        return msgpack.unpackb(frame, raw=False, strict_map_key=False)
    except (ValueError, TypeError, RecursionError, msgpack.UnpackException) as error:
        raise Undecodable(f"cannot decode frame: {error}") from None
