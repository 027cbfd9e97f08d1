"""The table loop on a manual clock: pacing, settlement, lease takeover and fencing."""

from __future__ import annotations

import asyncio
import contextlib
import dataclasses
import itertools
import random
from collections.abc import AsyncIterator, Callable
from functools import partial

import pytest
import structlog
import structlog.testing

from server.core.bets import Spot, settle_bets
from server.core.cards import Card, Suit
from server.core.rules import rules_preset
from server.core.shoe import Shoe
from server.core.table import Phase, TableState, close_betting, coup_of
from server.runtime.clock import ManualClock
from server.runtime.table_loop import TableLoop, Timings
from server.store.base import Event, StaleWrite
from server.store.memory import MemoryStore

TABLE = "t1"
RULES = rules_preset("classic8")
TIMINGS = Timings(
    betting_window=10.0,
    deal_interval=1.0,
    close_pause=2.0,
    result_pause=3.0,
    next_round_pause=4.0,
    lease_ttl=3.0,
    retry=0.5,
)
START_BALANCE = 1_000_000


async def _store(clock: ManualClock) -> MemoryStore:
    store = MemoryStore(clock.now_ms)
    await store.create_table(TABLE, RULES)
    return store


def _loop(store: MemoryStore, clock: ManualClock, node: str, seed: int = 7) -> TableLoop:
    return TableLoop(
        store, TABLE, RULES, node, clock, TIMINGS, seeds=partial(random.Random(seed).randbytes, 32)
    )


@contextlib.asynccontextmanager
async def _running(loop: TableLoop) -> AsyncIterator[asyncio.Task[None]]:
    task = asyncio.create_task(loop.run())
    await _settle()  # let it take the lease and open its first round
    try:
        yield task
    finally:
        task.cancel()
        with contextlib.suppress(asyncio.CancelledError):
            await task


async def _state(store: MemoryStore) -> TableState:
    state = await store.load_state(TABLE)
    assert state is not None
    return state


async def _events(store: MemoryStore) -> list[Event]:
    events = await store.events_after(TABLE, 0, limit=100_000)
    assert events is not None
    return events


async def _advance_until(
    clock: ManualClock,
    store: MemoryStore,
    done: Callable[[TableState], bool],
    step: float = 0.25,
    limit: float = 600.0,
) -> TableState:
    """Move the manual clock in small steps until the committed state satisfies `done`."""
    for _ in range(round(limit / step)):
        state = await _state(store)
        if done(state):
            return state
        await clock.advance(step)
    raise AssertionError(f"state never reached the condition; at {await _state(store)}")


async def _settle() -> None:
    """Let every task run until it waits on the manual clock again (no time passes)."""
    for _ in range(20):
        await asyncio.sleep(0)


def _card(ev: Event) -> Card:
    return Card(ev["rank"], Suit(ev["suit"]))


async def test_rounds_advance_only_with_the_clock() -> None:
    """Nothing happens while time stands still; a window closes exactly when it elapses."""
    clock = ManualClock()
    store = await _store(clock)
    async with _running(_loop(store, clock, "a")):
        opened = await _state(store)
        assert opened.phase is Phase.BETTING and opened.round == 1
        assert opened.closes_at_ms == clock.now_ms() + 10_000
        await _settle()  # the loop only ever waits on the clock: no progress without it
        assert await _state(store) == opened
        await clock.advance(9.999)
        assert (await _state(store)).phase is Phase.BETTING
        await clock.advance(0.001)
        closed = await _state(store)
        assert closed.phase is Phase.DEALING and closed.dealt == 0
        assert clock.now_ms() == opened.closes_at_ms


async def test_phases_are_paced_by_the_timings() -> None:
    """Over several rounds: window, close pause, deal interval, result and next-round pauses."""
    clock = ManualClock()
    store = await _store(clock)
    async with _running(_loop(store, clock, "a")):
        await _advance_until(clock, store, lambda s: s.round == 4)
    events = await _events(store)
    assert [e["seq"] for e in events] == list(range(1, len(events) + 1))
    for round_no in (1, 2, 3):
        mine = [e for e in events if e["round"] == round_no]
        ts = {e["kind"]: e["ts"] for e in mine if e["kind"] != "card"}
        cards = [e for e in mine if e["kind"] == "card"]
        assert ts["betting_closed"] - ts["round_opened"] == 10_000
        assert cards[0]["ts"] - ts["betting_closed"] == 2_000
        gaps = [b["ts"] - a["ts"] for a, b in itertools.pairwise(cards)]
        assert gaps == [1_000] * (len(cards) - 1)
        assert [c["index"] for c in cards] == list(range(len(cards)))
        assert 4 <= len(cards) <= 6
        assert ts["round_result"] == cards[-1]["ts"]
        assert ts["round_settled"] - cards[-1]["ts"] == 3_000
        next_open = next(
            e for e in events if e["round"] == round_no + 1 and e["kind"] == "round_opened"
        )
        assert next_open["ts"] - ts["round_settled"] == 4_000


async def test_settlement_credits_the_cores_payouts() -> None:
    """Balances after settlement equal settle_bets on the round's coup; money is conserved."""
    clock = ManualClock()
    store = await _store(clock)
    stakes = {
        "alice": [("a1", Spot.PLAYER, 10_000), ("a2", Spot.PLAYER_PAIR, 500)],
        "bob": [("b1", Spot.BANKER, 7_300), ("b2", Spot.TIE, 1_000), ("b3", Spot.BANKER_PAIR, 200)],
    }
    async with _running(_loop(store, clock, "a")):
        state = await _state(store)
        for player, bets in stakes.items():
            await store.ensure_player(player, START_BALANCE)
            for bet_id, spot, amount in bets:
                await store.place_bet(TABLE, player, state.round, bet_id, spot.value, amount)
        bets = await store.round_bets(TABLE, state.round)
        settled = await _advance_until(clock, store, lambda s: s.phase is Phase.SETTLED)
    assert settled.round == state.round
    payouts = settle_bets(RULES.paytable, bets, coup_of(settled))
    for player, placed in stakes.items():
        mine = [p for p in payouts if p.player == player]
        staked = sum(amount for _, _, amount in placed)
        assert await store.balance(player) == START_BALANCE - staked + sum(p.credit for p in mine)
        settlement = await store.settlement(TABLE, state.round, player)
        assert settlement is not None
        assert settlement.payouts == [p.to_dict() for p in mine]
    settled_events = [e for e in await _events(store) if e["kind"] == "round_settled"]
    assert [e["paid"] for e in settled_events] == [sum(p.credit for p in payouts)]
    assert (await store.ledger()).balanced


async def test_settlement_writes_each_bettors_recall_from_the_coup() -> None:
    """The loop passes the round's summary with the payouts: each bettor's history record has
    the cards as dealt (card events), the result and the balance after."""
    clock = ManualClock()
    store = await _store(clock)
    await store.ensure_player("alice", START_BALANCE)
    await store.ensure_player("bob", START_BALANCE)
    async with _running(_loop(store, clock, "a")):
        state = await _state(store)
        await store.place_bet(TABLE, "alice", state.round, "a1", "banker", 5_000)
        settled = await _advance_until(clock, store, lambda s: s.phase is Phase.SETTLED)
    events = [e for e in await _events(store) if e["round"] == settled.round]
    cards = [
        {"hand": e["hand"], "rank": e["rank"], "suit": e["suit"]}
        for e in events
        if e["kind"] == "card"
    ]
    result = next(e for e in events if e["kind"] == "round_result")
    [record] = await store.history("alice")
    assert record["cards"] == cards and len(cards) == coup_of(settled).cards_used
    assert (record["winner"], record["natural"]) == (result["winner"], result["natural"])
    assert (record["player_total"], record["banker_total"]) == (
        result["player_total"],
        result["banker_total"],
    )
    assert record["time"] == next(e["ts"] for e in events if e["kind"] == "round_settled")
    assert record["balance_after"] == await store.balance("alice")
    assert await store.history("bob") == []  # bob did not bet


async def test_second_node_waits_while_the_first_holds_the_lease() -> None:
    """A live owner keeps the table: the other node never owns it nor writes to it."""
    clock = ManualClock()
    store = await _store(clock)
    first, second = _loop(store, clock, "a"), _loop(store, clock, "b")
    async with _running(first), _running(second):
        await _advance_until(clock, store, lambda s: s.round == 3)
        assert first.owning and not second.owning
        lease = await store.lease(TABLE)
        assert lease is not None and lease.node == "a" and lease.token == first.token


async def test_takeover_resumes_the_same_round_from_the_same_shoe_position() -> None:
    """A crashed owner's round is finished by the next node: same cards, no gap, one settle."""
    clock = ManualClock()
    store = await _store(clock)
    first, second = _loop(store, clock, "a", seed=1), _loop(store, clock, "b", seed=2)
    first_task = asyncio.create_task(first.run())
    await _settle()  # the first node takes the table before the second one looks
    await store.ensure_player("carol", START_BALANCE)
    await store.place_bet(TABLE, "carol", 1, "c1", "banker", 5_000)
    bets = await store.round_bets(TABLE, 1)
    async with _running(second):
        mid = await _advance_until(
            clock, store, lambda s: s.phase is Phase.DEALING and s.dealt >= 2
        )
        first_token = first.token
        first_task.cancel()  # a crash: the lease is not released
        with contextlib.suppress(asyncio.CancelledError):
            await first_task
        assert mid.shoe is not None
        round_no, round_start, dealt = mid.round, mid.round_start, mid.dealt
        # Until the lease expires nothing happens: the dead owner still holds it.
        await clock.advance(TIMINGS.lease_ttl / 2)
        assert await _state(store) == mid and not second.owning
        settled = await _advance_until(
            clock, store, lambda s: s.round == round_no and s.phase is Phase.SETTLED
        )
        assert second.owning and second.token != first_token
    events = await _events(store)
    assert [e["seq"] for e in events] == list(range(1, len(events) + 1))
    cards = [e for e in events if e["round"] == round_no and e["kind"] == "card"]
    assert [c["index"] for c in cards] == list(range(len(cards)))  # none twice, none skipped
    assert [_card(c) for c in cards] == mid.shoe.cards[round_start : round_start + len(cards)]
    assert len(cards) == coup_of(settled).cards_used > dealt
    assert [e["kind"] for e in events if e["round"] == round_no].count("round_settled") == 1
    assert settled.shoe is not None
    assert settled.shoe.position == round_start + len(cards)
    # The bet placed under the first owner is paid once, by the second, as the core says.
    (payout,) = settle_bets(RULES.paytable, bets, coup_of(settled))
    assert round_no == 1
    assert await store.balance("carol") == START_BALANCE - 5_000 + payout.credit
    assert (await store.ledger()).balanced


async def test_release_hands_the_table_over_at_once() -> None:
    """After release() another node owns the table on its next try, without waiting the TTL."""
    clock = ManualClock()
    store = await _store(clock)
    first, second = _loop(store, clock, "a"), _loop(store, clock, "b")
    first_task = asyncio.create_task(first.run())
    await _settle()  # the first node takes the table before the second one looks
    async with _running(second):
        await clock.advance(1.0)
        assert first.owning
        first_task.cancel()  # a graceful stop: cancel the loop, then give the lease up
        with contextlib.suppress(asyncio.CancelledError):
            await first_task
        await first.release()
        assert await store.lease(TABLE) is None
        await clock.advance(TIMINGS.retry)  # the other node's next look at the lease
        assert second.owning
        lease = await store.lease(TABLE)
        assert lease is not None and lease.node == "b"


async def test_release_after_the_store_lost_the_table_does_not_raise() -> None:
    """A store that came back empty (Redis restarted without its data) has no lease to give
    up: release() logs it and returns, so a node's stop goes on to its other tables."""
    clock = ManualClock()
    store = await _store(clock)
    loop = _loop(store, clock, "a")
    task = asyncio.create_task(loop.run())
    await _settle()
    assert loop.owning
    task.cancel()
    with contextlib.suppress(asyncio.CancelledError):
        await task
    store._tables.clear()  # what a Redis restarted from nothing holds
    with structlog.testing.capture_logs() as logs:
        await loop.release()
    assert loop.token is None
    assert [e["event"] for e in logs] == ["release_failed"]


async def test_stale_owner_cannot_commit_and_steps_down() -> None:
    """Once its fencing token is replaced, a loop's commit raises StaleWrite and it stops."""
    clock = ManualClock()
    store = await _store(clock)
    # A long lease: no renewal falls inside the window, so the close is the first write.
    timings = dataclasses.replace(TIMINGS, lease_ttl=300.0)
    with structlog.testing.capture_logs() as logs:
        loop = TableLoop(
            store, TABLE, RULES, "a", clock, timings, seeds=partial(random.Random(3).randbytes, 32)
        )
        async with _running(loop):
            opened = await _state(store)
            old_token = loop.token
            assert old_token is not None
            # Another node gets the table (as after a partition): a new fencing token.
            await store.release_lease(TABLE, "a", old_token)
            usurper = await store.acquire_lease(TABLE, "b", 600_000)
            assert usurper is not None and usurper.token != old_token
            with pytest.raises(StaleWrite):
                await store.commit(
                    TABLE, old_token, opened.version, close_betting(opened).state, []
                )
            await clock.advance(TIMINGS.betting_window)  # its own close falls due now
            assert not loop.owning
            await clock.advance(TIMINGS.betting_window)  # and it does not take the table back
            assert not loop.owning
            assert await _state(store) == opened  # nothing committed by the stale owner
            assert [e["kind"] for e in await _events(store)][-1] == "round_opened"
            # Still alive: once the table is free it takes it again, with a new token.
            await store.release_lease(TABLE, "b", usurper.token)
            await clock.advance(TIMINGS.retry)
            assert loop.owning and loop.token is not None and loop.token > usurper.token
    lost = [entry for entry in logs if entry["event"] == "lease_lost"]
    assert len(lost) == 1 and "fencing token" in lost[0]["reason"]


async def test_round_the_shoe_cannot_finish_is_voided_and_refunded_once() -> None:
    """A stored round whose shoe cannot complete the coup is voided with an event, and every
    stake goes back exactly once; the next round starts on a fresh shoe."""
    clock = ManualClock()
    store = await _store(clock)
    await store.ensure_player("p", START_BALANCE)
    async with _running(_loop(store, clock, "a")) as task:
        opened = await _state(store)
        await store.place_bet(TABLE, "p", opened.round, "b1", "banker", 5_000)
        await store.place_bet(TABLE, "p", opened.round, "b2", "tie", 1_000)
        task.cancel()
    lease = await store.acquire_lease(TABLE, "surgeon", 60_000)
    assert lease is None  # the cancelled owner's lease is still live: wait it out
    await clock.advance(TIMINGS.lease_ttl + 0.1)
    lease = await store.acquire_lease(TABLE, "surgeon", 1)
    assert lease is not None
    state = await _state(store)
    closed = close_betting(state).state
    # A shoe of four cards whose coup needs a fifth: Player A+2 = 3 must draw.
    four = [
        Card("A", Suit.CLUBS),
        Card("K", Suit.CLUBS),
        Card("2", Suit.CLUBS),
        Card("Q", Suit.CLUBS),
    ]
    broken = dataclasses.replace(closed, shoe=Shoe(four, 0, 4), round_start=0, dealt=0)
    await store.commit(TABLE, lease.token, state.version, broken, [])
    await clock.advance(0.01)  # the surgeon's lease lapses
    async with _running(_loop(store, clock, "b")):
        await _advance_until(clock, store, lambda s: s.round == opened.round + 1)
    events = await _events(store)
    voided = [e for e in events if e["kind"] == "round_voided"]
    assert len(voided) == 1
    assert voided[0]["round"] == opened.round
    assert voided[0]["refunded"] == 6_000
    assert await store.balance("p") == START_BALANCE
    [record] = await store.history("p")  # not a card was dealt, and there is no result
    assert (record["round"], record["cards"], record["winner"]) == (opened.round, [], None)
    assert (await store.ledger()).balanced
    assert not [e for e in events if e["kind"] == "round_settled" and e["round"] == opened.round]
    reopened = [e for e in events if e["kind"] == "shoe_committed"]
    assert reopened[-1]["round"] == opened.round + 1


async def test_totals_are_shown_at_most_every_interval_and_only_when_bets_came() -> None:
    """Privacy and flood safety: bets appear only as bet_totals events (spot totals, bettors,
    bets; never who), at most one per totals_interval and none while nothing changes."""
    clock = ManualClock()
    store = await _store(clock)
    for player in ("alice", "bob"):
        await store.ensure_player(player, START_BALANCE)
    async with _running(_loop(store, clock, "a")):
        opened = await _state(store)
        seq = await store.last_seq(TABLE)
        await store.place_bet(TABLE, "alice", opened.round, "a1", "banker", 1_000)
        await clock.advance(0.25)  # the loop's next look: one event for the new bet
        await clock.advance(1.0)  # nothing new: nothing shown
        for number in range(3):
            await store.place_bet(TABLE, "bob", opened.round, f"b{number}", "player", 500)
        await clock.advance(0.1)  # not yet: at most one event per interval
        assert len(await _events(store)) == seq + 1
        await clock.advance(0.15)
    shown = [e for e in await _events(store) if e["kind"] == "bet_totals"]
    assert [(e["totals"], e["bettors"], e["bets"]) for e in shown] == [
        ({"banker": 1_000}, 1, 1),
        ({"player": 1_500, "banker": 1_000}, 2, 4),
    ]
    assert shown[1]["ts"] - shown[0]["ts"] == 1_250  # at 0.25 s, then at 1.5 s
    assert all(
        set(e) == {"type", "table", "seq", "round", "ts", "kind", "totals", "bettors", "bets"}
        for e in shown
    )


async def test_final_totals_come_just_before_betting_closed() -> None:
    """A bet in the window's last moments is shown by a final bet_totals committed with
    betting_closed; a round whose totals were already shown closes without another one."""
    clock = ManualClock()
    store = await _store(clock)
    await store.ensure_player("carol", START_BALANCE)
    async with _running(_loop(store, clock, "a")):
        await clock.advance(TIMINGS.betting_window - 0.05)
        await store.place_bet(TABLE, "carol", 1, "late", "tie", 100)
        await _advance_until(clock, store, lambda s: s.round == 2)
        await store.place_bet(TABLE, "carol", 2, "early", "player", 200)
        await _advance_until(clock, store, lambda s: s.round == 2 and s.phase is Phase.DEALING)
    events = await _events(store)
    for round_no, totals, with_the_close in ((1, {"tie": 100}, True), (2, {"player": 200}, False)):
        mine = [e for e in events if e["round"] == round_no]
        [shown] = [e for e in mine if e["kind"] == "bet_totals"]
        [closed] = [e for e in mine if e["kind"] == "betting_closed"]
        assert shown["totals"] == totals and shown["seq"] == closed["seq"] - 1
        assert (shown["ts"] == closed["ts"]) is with_the_close


async def test_a_bet_flood_shows_a_bounded_number_of_totals() -> None:
    """Thousands of bets in one window make at most window / totals_interval + 1 events."""
    clock = ManualClock()
    store = await _store(clock)
    players = [f"p{i}" for i in range(50)]
    for player in players:
        await store.ensure_player(player, START_BALANCE)
    async with _running(_loop(store, clock, "a")):
        opened = await _state(store)
        for number in range(2_000):
            await store.place_bet(
                TABLE, players[number % 50], opened.round, f"f{number}", "banker", 100
            )
            if number % 40 == 39:
                await clock.advance(0.1)  # 2,000 bets spread over 5 s of the 10 s window
        await _advance_until(clock, store, lambda s: s.phase is Phase.DEALING)
    shown = [e for e in await _events(store) if e["kind"] == "bet_totals"]
    assert len(shown) <= TIMINGS.betting_window / 0.25 + 1
    assert (shown[-1]["totals"], shown[-1]["bettors"], shown[-1]["bets"]) == (
        {"banker": 200_000},
        50,
        2_000,
    )
