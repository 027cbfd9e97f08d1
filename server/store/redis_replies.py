"""Reading what Redis answers the engine: the client decodes nothing (decode_responses is
off), so replies arrive as bytes, and a stream entry's id and fields are taken apart here."""

from __future__ import annotations

from collections.abc import Sequence

from server.core.bets import BetTotals
from server.core.errors import BetRejected, RejectCode
from server.store.base import Event
from server.store.codec import unpackb

__all__ = [
    "as_bytes",
    "entry_event",
    "entry_seq",
    "flat_pairs",
    "raw_entry_event",
    "stream_entries",
    "totals_of",
    "unknown_table",
]


def unknown_table(table_id: str) -> BetRejected:
    return BetRejected(RejectCode.UNKNOWN_TABLE, f"no table {table_id!r}")


def as_bytes(value: object) -> bytes:
    """A reply value of a client that decodes nothing (decode_responses is off)."""
    assert isinstance(value, bytes), value
    return value


def entry_seq(entry_id: object) -> int:
    """The event's seq, which is its stream entry's id ('<seq>-0')."""
    return int(as_bytes(entry_id).split(b"-", 1)[0])


def entry_event(fields: object) -> Event:
    assert isinstance(fields, dict), fields
    event_: Event = unpackb(fields[b"e"])
    return event_


def raw_entry_event(fields: object) -> Event:
    """The event of a stream entry as Redis sent it (no reply callback): [field, value, ...]."""
    assert isinstance(fields, list), fields
    event_: Event = unpackb(fields[fields.index(b"e") + 1])
    return event_


def stream_entries(reply: object) -> list[list[object]]:
    """The entries of a one-stream XREAD's reply as Redis sent it: a map {stream: entries} in
    RESP3, [[stream, entries]] in RESP2; none when the read timed out (a null reply)."""
    if not reply:
        return []
    if isinstance(reply, dict):
        (entries,) = reply.values()
    else:
        assert isinstance(reply, list), reply
        ((_, entries),) = reply
    assert isinstance(entries, list), entries
    return entries


def flat_pairs(reply: object) -> list[object]:
    """An HGETALL's reply as Redis sent it, flat: a map in RESP3, [field, value, ...] in RESP2."""
    if isinstance(reply, dict):
        return [item for pair in reply.items() for item in pair]
    assert isinstance(reply, list), reply
    return reply


def totals_of(pairs: Sequence[object]) -> BetTotals:
    """BetTotals from a totals hash's HGETALL pairs: spots, 'bets' and 'bettors'."""
    counts = {
        as_bytes(pairs[i]).decode(): int(as_bytes(pairs[i + 1])) for i in range(0, len(pairs), 2)
    }
    return BetTotals.of(counts, counts.get("bettors", 0), counts.get("bets", 0))
