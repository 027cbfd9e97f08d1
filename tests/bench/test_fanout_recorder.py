"""bench/fanout.py's Recorder times the card events stamped inside the window, every arrival
of them, and only them: an event half delivered when the window opens is not timed (its first
write would look as late as its broadcast is long), one still arriving after it closes is, and
the measure ends only once every connection has had an event stamped after the window."""

from __future__ import annotations

import time

from bench.fanout import Recorder


def _event(seq: int, ts_ms: float, kind: str = "card") -> dict[str, object]:
    return {"type": "event", "kind": kind, "seq": seq, "ts": int(ts_ms)}


def _window(recorder: Recorder) -> None:
    """Open it as if 100 ms ago (stamps inside it are easy to make), and close it now."""
    recorder.open()
    recorder.since_ms -= 100


def test_events_are_timed_by_their_stamp_and_deliveries_counted_while_open() -> None:
    recorder = Recorder()
    before = _event(1, time.time() * 1000 - 200)  # stamped, half delivered, before the window
    recorder.seen(before, 0, "a")  # a delivery before the window: neither counted nor timed
    assert recorder.deliveries == 0 and not recorder.arrivals
    _window(recorder)
    recorder.seen(before, 0, "b")  # its later arrivals: counted, but the event is not timed
    inside = _event(2, recorder.since_ms + 50)
    recorder.seen(inside, 0, "a")
    recorder.seen(_event(3, inside["ts"], "bet_totals"), 0, "a")  # counted, not timed
    assert recorder.deliveries == 3
    assert list(recorder.arrivals) == [2] and len(recorder.arrivals[2]) == 1
    recorder.close(clients=2)
    recorder.seen(inside, 1, "b")  # after the window: not counted, but its event is timed
    assert recorder.deliveries == 3
    assert list(recorder.arrivals) == [2] and len(recorder.arrivals[2]) == 2
    assert set(recorder.by_node) == {0, 1}


def test_the_measure_ends_once_every_connection_is_past_the_window() -> None:
    recorder = Recorder()
    _window(recorder)
    early, late = _event(1, recorder.since_ms + 10), _event(2, recorder.since_ms + 90)
    for client in ("a", "b"):
        recorder.seen(early, 0, client)
    recorder.close(clients=2)
    # Every event seen so far is complete, yet `late` (stamped inside) has not come: not done.
    assert not recorder.finished.is_set()
    after = _event(3, recorder.until_ms + 1, "round_result")
    recorder.seen(late, 0, "a")
    recorder.seen(after, 0, "a")  # "a" is past the window; "b" is not yet
    assert not recorder.finished.is_set()
    recorder.seen(late, 0, "b")
    recorder.seen(after, 0, "b")
    assert recorder.finished.is_set()
    assert len(recorder.arrivals[2]) == 2 and 3 not in recorder.arrivals  # after: not timed
