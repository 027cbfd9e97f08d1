"""An operator's pause in the table loop: the round in play finishes, then no round opens
until the request is withdrawn; wake() makes the owner look at once."""

from __future__ import annotations

from server.core.table import Phase
from server.runtime.clock import ManualClock
from tests.runtime.test_table_loop import (
    TABLE,
    _advance_until,
    _events,
    _loop,
    _running,
    _settle,
    _state,
    _store,
)


async def test_a_pause_lets_the_round_finish_then_opens_none() -> None:
    """Paused during betting: the round is dealt and settled, table_paused follows, and no
    round opens however long the clock runs; resuming opens the next round."""
    clock = ManualClock()
    store = await _store(clock)
    loop = _loop(store, clock, "a")
    async with _running(loop):
        assert (await _state(store)).phase is Phase.BETTING
        await store.set_paused(TABLE, True)
        paused = await _advance_until(clock, store, lambda s: s.paused)
        assert (paused.phase, paused.round) == (Phase.SETTLED, 1)
        kinds = [e["kind"] for e in await _events(store)]
        assert kinds[-3:] == ["round_result", "round_settled", "table_paused"]
        await clock.advance(120)
        still = await _state(store)
        assert (still.phase, still.round, still.paused) == (Phase.SETTLED, 1, True)
        assert [e["kind"] for e in await _events(store)] == kinds  # nothing more happened
        await store.set_paused(TABLE, False)
        loop.wake()  # the owner's own node pokes it: no need to wait for `retry`
        await _settle()
        resumed = await _state(store)
        assert (resumed.phase, resumed.round, resumed.paused) == (Phase.BETTING, 2, False)
        kinds = [e["kind"] for e in await _events(store)]
        assert kinds[kinds.index("table_paused") + 1] == "table_resumed"


async def test_a_request_from_another_node_is_seen_within_retry() -> None:
    """Without wake() (the request came through another node) the paused owner checks every
    `retry` seconds."""
    clock = ManualClock()
    store = await _store(clock)
    await store.set_paused(TABLE, True)
    async with _running(_loop(store, clock, "a")):
        state = await _state(store)
        assert (state.phase, state.paused) == (Phase.IDLE, True)  # never opened a round
        await store.set_paused(TABLE, False)
        await _settle()
        assert (await _state(store)).phase is Phase.IDLE
        await clock.advance(0.5)  # TIMINGS.retry
        assert (await _state(store)).phase is Phase.BETTING


async def test_a_new_owner_keeps_the_table_paused() -> None:
    """The pause lives in the store: the owner's successor opens no round either."""
    clock = ManualClock()
    store = await _store(clock)
    await store.set_paused(TABLE, True)
    first = _loop(store, clock, "a")
    async with _running(first):
        assert (await _state(store)).paused
        await first.release()
    async with _running(_loop(store, clock, "b")):
        await clock.advance(30)
        state = await _state(store)
        assert (state.phase, state.round, state.paused) == (Phase.IDLE, 0, True)
        assert [e["kind"] for e in await _events(store)] == ["table_paused"]  # announced once
