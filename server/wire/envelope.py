"""The envelope of a table event: the one place that puts `type`, `table`, `seq`, `round` and
`ts` in front of a payload the core built (server/core/events.py).

One definition, two forms. `stamp` is the event as a map: what the memory engine keeps and
what the hub encodes. `template` is the same event as msgpack bytes with the two values a
store assigns atomically with the append (`seq`, `ts`) left out: the Redis commit script
writes those two values between the three parts, so it defines no key and no order itself,
and both engines keep the same bytes (tests/store/test_shapes_engines.py).
"""

from __future__ import annotations

from typing import cast

import msgpack

from server.core.events import EventPayload
from server.wire.shapes import TableEvent

__all__ = ["STORE_ASSIGNED", "Template", "stamp", "template"]

# The envelope's values a store assigns when it appends the event, in envelope order.
STORE_ASSIGNED = ("seq", "ts")

# The event's bytes before seq's value, between seq's and ts's, and after ts's.
Template = tuple[bytes, bytes, bytes]

_PACKER = msgpack.Packer(use_bin_type=True)  # autoreset: each pack returns its own bytes


def stamp(table: str, seq: int, round_no: int, ts: int, payload: EventPayload) -> TableEvent:
    """An event as broadcast: the envelope first, then the payload (which starts with kind)."""
    event = {"type": "event", "table": table, "seq": seq, "round": round_no, "ts": ts, **payload}
    # Each TableEvent is the envelope plus one payload kind (server/wire/shapes.py), but mypy
    # cannot spread a union of payloads into the matching member of the union of events.
    return cast(TableEvent, event)


def template(table: str, round_no: int, payload: EventPayload) -> Template:
    """The msgpack map of stamp(table, seq, round_no, ts, payload), but the values of seq and
    ts: a store joins the parts around its own msgpack encoding of those two integers."""
    event = stamp(table, 0, round_no, 0, payload)
    parts: list[bytes] = []
    chunk: list[bytes] = [_PACKER.pack_map_header(len(event))]
    for key, value in event.items():
        chunk.append(_PACKER.pack(key))
        if key in STORE_ASSIGNED:
            parts.append(b"".join(chunk))
            chunk = []
        else:
            chunk.append(_PACKER.pack(value))
    parts.append(b"".join(chunk))
    before_seq, before_ts, after_ts = parts
    return before_seq, before_ts, after_ts
