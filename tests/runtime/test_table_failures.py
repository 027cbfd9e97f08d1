"""The table loop's failure policy, on both engines: a state it cannot read or step is tried
a few times, then the round is voided and refunded once and a new shoe starts; a table that
still cannot go on is left to other nodes. An older state format just plays on."""

from __future__ import annotations

import asyncio
import contextlib
import random
from collections.abc import AsyncIterator, Callable
from functools import partial
from typing import Any

import pytest
import structlog.testing

from server.core.bets import Bet
from server.core.errors import BetRejected, RejectCode
from server.core.table import Phase, TableState
from server.runtime import slices, table_loop
from server.runtime.clock import ManualClock
from server.runtime.table_loop import STEP_ATTEMPTS, TableLoop, Timings
from server.store.base import Event, StateUnreadable, Store
from server.store.codec import STATE_FORMAT, packb
from tests.store import RULES, TABLE, Owner, bet, write_blob

TIMINGS = Timings(
    betting_window=0.3,  # short: on Redis the window is judged by Redis's real clock
    deal_interval=1.0,
    close_pause=1.0,
    result_pause=1.0,
    next_round_pause=1.0,
    lease_ttl=3.0,
    retry=0.5,
    totals_interval=0.25,
    abandon_pause=30.0,
)
STAKES = [("alice", "a1", "player", 500), ("alice", "a2", "tie", 100), ("bob", "b1", "banker", 300)]
BALANCES = {"alice": 10_000, "bob": 5_000}


async def _dealing_with_bets(store: Store) -> None:
    """Round 1 in its dealing phase with three bets on it, left by an owner that let go."""
    await store.create_table(TABLE, RULES)
    for player, balance in BALANCES.items():
        await store.ensure_player(player, balance)
    owner = await Owner(store, node="before").start()
    await owner.open()
    for player, bet_id, spot, amount in STAKES:
        await bet(store, player, amount, spot, bet_id=bet_id)
    await owner.close()
    await store.release_lease(TABLE, "before", owner.fence)


def _loop(store: Store, clock: ManualClock, node: str = "a") -> TableLoop:
    return TableLoop(
        store, TABLE, RULES, node, clock, TIMINGS, seeds=partial(random.Random(5).randbytes, 32)
    )


@contextlib.asynccontextmanager
async def _running(loop: TableLoop) -> AsyncIterator[None]:
    task = asyncio.create_task(loop.run())
    try:
        yield
    finally:
        task.cancel()
        with contextlib.suppress(asyncio.CancelledError):
            await task


async def _advance_until(
    clock: ManualClock, store: Store, done: Callable[[TableState], bool], limit: float = 600.0
) -> TableState:
    """Move the manual clock in small steps until the stored header satisfies `done` (the
    header: the state blob itself may be unreadable)."""
    for _ in range(round(limit / 0.25)):
        header = await store.load_header(TABLE)
        if header is not None and done(header):
            return header
        await clock.advance(0.25)
    raise AssertionError(f"never reached; at {await store.load_header(TABLE)}")


async def _events(store: Store) -> list[Event]:
    return await store.events_after(TABLE, 0) or []


async def _assert_round_one_refunded_once(store: Store) -> None:
    events = await _events(store)
    [voided] = [e for e in events if e["kind"] == "round_voided"]
    staked = sum(amount for *_, amount in STAKES)
    assert (voided["round"], voided["bets"], voided["refunded"]) == (1, len(STAKES), staked)
    assert not [e for e in events if e["kind"] == "round_settled" and e["round"] == 1]
    for player, balance in BALANCES.items():
        assert await store.balance(player) == balance
        settlement = await store.settlement(TABLE, 1, player)
        assert settlement is not None and settlement.balance == balance
        assert {p["outcome"] for p in settlement.payouts} == {"push"}
        # Game recall: restarted from its bare state, the round has no cards to show.
        [record] = await store.history(player)
        assert (record["round"], record["cards"], record["winner"]) == (1, [], None)
        assert record["payouts"] == settlement.payouts and record["balance_after"] == balance
    ledger = await store.ledger()
    assert ledger.balanced and ledger.in_play == 0 and ledger.house == 0
    # The next round starts a new shoe.
    opening = [e["kind"] for e in events if e["round"] == 2][:2]
    assert opening == ["shoe_committed", "round_opened"]
    assert next(e for e in events if e["kind"] == "shoe_committed" and e["round"] == 2)["shoe"] == 2


def _logged(logs: list[dict[str, Any]], name: str) -> list[dict[str, Any]]:
    return [entry for entry in logs if entry["event"] == name]


@pytest.mark.parametrize(
    "blob",
    [b"\xc1junk", packb({"v": STATE_FORMAT + 1, "table_id": TABLE, "phase": "dealing"})],
    ids=["corrupt", "future-format"],
)
async def test_an_unreadable_state_voids_the_round_and_refunds_it_once(
    any_store: Store, clock: ManualClock, blob: bytes
) -> None:
    """A state blob that cannot be read (corrupt, or of a newer format) is tried
    STEP_ATTEMPTS times, then the round is voided from the stored bets, each stake refunded
    once, a new shoe started and `table_wedged` logged as critical with the traceback."""
    await _dealing_with_bets(any_store)
    await write_blob(any_store, TABLE, blob)
    with structlog.testing.capture_logs() as logs:
        async with _running(_loop(any_store, clock)):
            await _advance_until(clock, any_store, lambda h: h.round == 2)
            await clock.advance(5.0)  # playing on changes nothing more about round 1
    await _assert_round_one_refunded_once(any_store)
    failed = _logged(logs, "table_step_failed")
    assert [e["attempt"] for e in failed] == list(range(1, STEP_ATTEMPTS + 1))
    assert all(e["log_level"] == "error" for e in failed)
    [wedged] = _logged(logs, "table_wedged")
    assert wedged["log_level"] == "critical" and isinstance(wedged["exc_info"], StateUnreadable)
    assert (wedged["round"], wedged["phase"]) == (1, "dealing")
    state = await any_store.load_state(TABLE)  # written afresh, in this node's format
    assert state is not None and state.round == 2


async def test_a_transition_that_raises_voids_the_round_then_play_goes_on(
    any_store: Store, clock: ManualClock, monkeypatch: pytest.MonkeyPatch
) -> None:
    """A bug in a transition (here: dealing raises) gets the same policy; once the bug is
    gone the table plays normal rounds again."""

    def broken(state: TableState) -> table_loop.Transition:
        raise RuntimeError("a bug in dealing")

    await _dealing_with_bets(any_store)
    monkeypatch.setattr(table_loop, "deal_next_card", broken)
    with structlog.testing.capture_logs() as logs:
        async with _running(_loop(any_store, clock)):
            await _advance_until(clock, any_store, lambda h: h.round == 2)
            monkeypatch.undo()
            await _advance_until(
                clock, any_store, lambda h: h.round == 2 and h.phase is Phase.SETTLED
            )
    await _assert_round_one_refunded_once(any_store)
    [wedged] = _logged(logs, "table_wedged")
    assert isinstance(wedged["exc_info"], RuntimeError)
    assert len(_logged(logs, "table_step_failed")) == STEP_ATTEMPTS
    assert [e["kind"] for e in await _events(any_store)][-1] == "round_settled"


async def test_a_table_that_cannot_be_restarted_is_left_to_other_nodes(
    any_store: Store, clock: ManualClock, monkeypatch: pytest.MonkeyPatch
) -> None:
    """When even the restarted table cannot step, the node gives the lease up (no more
    renewals, `table_abandoned` logged) and leaves the table to others for abandon_pause."""

    def broken(*args: object) -> table_loop.Transition:
        raise RuntimeError("a bug in opening a round")

    await any_store.create_table(TABLE, RULES)
    monkeypatch.setattr(table_loop, "open_round", broken)
    first, second = _loop(any_store, clock, "a"), _loop(any_store, clock, "b")
    with structlog.testing.capture_logs() as logs:
        async with _running(first):
            await _advance_until(clock, any_store, lambda h: h.version == 1)  # restarted once
            for _ in range(2400):
                await any_store.load_header(TABLE)  # lets the loop's own store calls finish
                if _logged(logs, "table_abandoned"):
                    break
                await clock.advance(0.25)
            [abandoned] = _logged(logs, "table_abandoned")
            assert abandoned["log_level"] == "critical"
            assert not first.owning and await any_store.lease(TABLE) is None
            await clock.advance(TIMINGS.abandon_pause / 2)
            assert await any_store.lease(TABLE) is None  # the first node stays away
            async with _running(second):
                for _ in range(400):  # a few store round trips; little time on the clock
                    lease = await any_store.lease(TABLE)
                    if lease is not None:
                        break
                    await clock.advance(0.01)
                assert lease is not None and lease.node == "b"
            await second.release()  # stopped as a node stops: its lease given up
            # After the pause the first node tries again (and, the bug still there, gives the
            # table up again): it keeps running, it only stays away for the pause.
            owned = len(_logged(logs, "table_owned"))
            for _ in range(2400):
                if len(_logged(logs, "table_owned")) > owned:
                    break
                await any_store.load_header(TABLE)
                await clock.advance(0.25)
            assert _logged(logs, "table_owned")[-1]["node"] == "a"
    assert len(_logged(logs, "table_wedged")) >= 1


async def test_a_state_in_the_previous_format_plays_on(
    any_store: Store, clock: ManualClock
) -> None:
    """A rolling upgrade: a state written by the previous version (format 0, no `v`) is read
    and the round is dealt and settled as usual, without a single failure."""
    await _dealing_with_bets(any_store)
    state = await any_store.load_state(TABLE)
    assert state is not None
    await write_blob(any_store, TABLE, packb(state.to_dict()))
    with structlog.testing.capture_logs() as logs:
        async with _running(_loop(any_store, clock)):
            await _advance_until(clock, any_store, lambda h: h.phase is Phase.SETTLED)
    assert not _logged(logs, "table_step_failed")
    kinds = [e["kind"] for e in await _events(any_store)]
    assert kinds[-2:] == ["round_result", "round_settled"]
    assert (await any_store.ledger()).balanced


async def test_a_round_wedged_while_betting_is_closed_before_its_refunds(
    any_store: Store, clock: ManualClock, monkeypatch: pytest.MonkeyPatch
) -> None:
    """A wedged round still taking bets is closed before its bets are read for the refunds:
    a bet racing the restart is refused, not debited and left unrefunded."""
    await any_store.create_table(TABLE, RULES)
    for player, balance in BALANCES.items():
        await any_store.ensure_player(player, balance)
    owner = await Owner(any_store, node="before").start()
    await owner.open()  # a long window, on the store's clock
    for player, bet_id, spot, amount in STAKES:
        await bet(any_store, player, amount, spot, bet_id=bet_id)
    await any_store.release_lease(TABLE, "before", owner.fence)
    await write_blob(any_store, TABLE, b"\xc1junk")
    read_bets = any_store.round_bets
    racing: list[BaseException] = []

    async def racing_bet_then_read(table_id: str, round_no: int) -> list[Bet]:
        try:  # another node's bet, landing while the table restarts
            await bet(any_store, "alice", 200, "banker", bet_id="racer")
        except BetRejected as refused:
            racing.append(refused)
        return await read_bets(table_id, round_no)

    monkeypatch.setattr(any_store, "round_bets", racing_bet_then_read)
    async with _running(_loop(any_store, clock)):
        await _advance_until(clock, any_store, lambda h: h.round == 2)
    monkeypatch.undo()
    assert [getattr(e, "code", None) for e in racing] == [RejectCode.BETTING_CLOSED]
    kinds = [e["kind"] for e in await _events(any_store) if e["round"] == 1]
    assert kinds[-2:] == ["betting_closed", "round_voided"]
    await _assert_round_one_refunded_once(any_store)


async def test_an_owner_lost_halfway_through_settling_leaves_each_bet_credited_once(
    any_store: Store, clock: ManualClock, monkeypatch: pytest.MonkeyPatch
) -> None:
    """A round is credited in slices of whole players (one player a slice here); the owner
    dies right after its first slice, holding the lease. The next owner settles the round from
    the same stored state and bets: the player already paid is not paid again, the others are
    paid once, and the round ends once, with every bet in its event."""
    monkeypatch.setattr(slices, "SLICE", 1)
    await _dealing_with_bets(any_store)
    stakes = STAKES
    first = _loop(any_store, clock, "first")
    died = asyncio.Event()
    commit = any_store.commit

    async def dies_after_its_first_slice(
        table_id: str,
        fence: int,
        expected: int,
        state: TableState,
        events: list[Any],
        payouts: Any = None,
        summary: Any = None,
    ) -> list[Event]:
        stored = await commit(table_id, fence, expected, state, events, payouts, summary)
        if fence == first.token and payouts and not events:
            died.set()
            await asyncio.Event().wait()  # hung for good: the loop is killed in here
        return stored

    monkeypatch.setattr(any_store, "commit", dies_after_its_first_slice)
    task = asyncio.create_task(first.run())
    async with asyncio.timeout(10):
        while not died.is_set():
            await clock.advance(0.25)
    token = first.token
    assert token is not None
    task.cancel()
    with contextlib.suppress(asyncio.CancelledError):
        await task
    [paid_first] = [p for p in BALANCES if await any_store.settlement(TABLE, 1, p) is not None]
    balance_paid_first = await any_store.balance(paid_first)
    # Its lease lapses (released here: on Redis it would take lease_ttl of real time).
    await any_store.release_lease(TABLE, "first", token)
    async with _running(_loop(any_store, clock, "second")):
        await _advance_until(clock, any_store, lambda h: h.round == 1 and h.phase is Phase.SETTLED)
    assert await any_store.balance(paid_first) == balance_paid_first
    events = await _events(any_store)
    [settled] = [e for e in events if e["kind"] == "round_settled"]
    assert (settled["round"], settled["bets"]) == (1, len(stakes))
    assert settled["staked"] == sum(amount for *_, amount in stakes)
    for player, balance in BALANCES.items():
        settlement = await any_store.settlement(TABLE, 1, player)
        assert settlement is not None
        mine = [s for s in stakes if s[0] == player]
        assert [p["bet_id"] for p in settlement.payouts] == [bet_id for _, bet_id, *_ in mine]
        staked = sum(amount for *_, amount in mine)
        credit = sum(p["credit"] for p in settlement.payouts)
        assert await any_store.balance(player) == balance - staked + credit == settlement.balance
        [record] = await any_store.history(player)  # recorded once
        assert record["round"] == 1 and record["payouts"] == settlement.payouts
    ledger = await any_store.ledger()
    assert ledger.balanced and ledger.in_play == 0
    assert ledger.house == settled["staked"] - settled["paid"]
