"""The envelope (server/wire/envelope.py): one definition, as a map and as the bytes a store
completes with its seq and ts."""

from __future__ import annotations

import msgpack
import pytest

from server.core import events
from server.core.events import EventPayload
from server.core.rules import TableRules
from server.wire.envelope import stamp, template
from server.wire.shape_check import message_problems
from tests.wire.test_shapes import _core_payloads

PAYLOADS: list[EventPayload] = [
    *_core_payloads(5, TableRules("one", decks=1, cut_card_from_end=7)),
    events.table_paused(),
    events.table_resumed(),
]
# msgpack's integer forms: positive fixint, uint8, uint16, uint32, uint64.
NUMBERS = [1, 200, 60_000, 1_700_000_000, 1_700_000_000_000]


def _packb(value: object) -> bytes:
    data: bytes = msgpack.packb(value, use_bin_type=True)
    return data


def test_stamp_puts_the_envelope_first_and_fits_the_shapes() -> None:
    for payload in PAYLOADS:
        event = stamp("t1", 7, 3, 99, payload)
        assert list(event)[:6] == ["type", "table", "seq", "round", "ts", "kind"]
        assert list(event.items())[5:] == list(payload.items())
        assert message_problems(event) == [], event


@pytest.mark.parametrize("number", NUMBERS)
def test_template_completed_is_the_stamped_event_byte_for_byte(number: int) -> None:
    """What the Redis commit script builds (the parts around the msgpack of its seq and ts)
    is the msgpack of stamp(): the bytes the memory engine's events encode to."""
    for payload in PAYLOADS:
        before_seq, before_ts, after_ts = template("classic-8", number, payload)
        built = before_seq + _packb(number) + before_ts + _packb(number + 1) + after_ts
        assert built == _packb(stamp("classic-8", number, number, number + 1, payload))
