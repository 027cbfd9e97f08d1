"""bench/fanout.py's Recorder times the card events stamped inside the window, every arrival
of them, and only them: an event half delivered when the window opens is not timed (its first
write would look as late as its broadcast is long), one still arriving after it closes is."""

from __future__ import annotations

import time

from bench.fanout import Recorder


def _card(seq: int, ts_ms: float) -> dict[str, object]:
    return {"type": "event", "kind": "card", "seq": seq, "ts": int(ts_ms)}


def test_events_are_timed_by_their_stamp_and_deliveries_counted_while_open() -> None:
    recorder = Recorder()
    before = _card(1, time.time() * 1000 - 40)  # stamped, and half delivered, before the window
    recorder.seen(before, 0)  # a delivery before the window: neither counted nor timed
    assert recorder.deliveries == 0 and not recorder.arrivals
    recorder.open()
    recorder.since_ms -= 10  # as if it opened 10 ms ago: `inside` is stamped before its close
    recorder.seen(before, 0)  # its later arrivals: counted, but the event is not timed
    inside = _card(2, recorder.since_ms + 5)
    recorder.seen(inside, 0)
    recorder.seen({"type": "event", "kind": "bet_totals", "seq": 3, "ts": inside["ts"]}, 0)
    assert recorder.deliveries == 3
    assert list(recorder.arrivals) == [2] and len(recorder.arrivals[2]) == 1
    recorder.close(clients=2)
    assert not recorder.finished.is_set()  # one of two clients so far
    recorder.seen(inside, 1)  # after the window: not counted, but its event is timed
    recorder.seen(_card(4, recorder.until_ms + 1), 0)  # stamped after the window: not timed
    assert recorder.deliveries == 3
    assert list(recorder.arrivals) == [2] and len(recorder.arrivals[2]) == 2
    assert recorder.finished.is_set()
    assert set(recorder.by_node) == {0, 1}
