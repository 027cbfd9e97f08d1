"""Memory-engine specifics: what it forgets, so the embedded default runs for ever."""

from __future__ import annotations

from collections.abc import Iterator

import pytest

from server.core.bets import Bet, BetTotals
from server.core.errors import BetRejected, RejectCode
from server.store.memory import MemoryStore
from tests.store import RULES, TABLE, ManualClock, Owner, bet


async def test_old_rounds_receipts_and_settlements_are_forgotten_safely() -> None:
    """Receipts and settlements older than the replay window are dropped; retrying a
    forgotten bet is refused as WRONG_ROUND and debits nothing."""
    store = MemoryStore(ManualClock(), history_rounds=2)
    await store.create_table(TABLE, RULES)
    await store.ensure_player("p", 10_000)
    owner = await Owner(store).start()
    for round_no in range(1, 6):
        await owner.open()
        await bet(store, "p", 100, round_no=round_no, bet_id=f"b{round_no}")
        await owner.finish()
    assert await store.settlement(TABLE, 1, "p") is None
    assert await store.settlement(TABLE, 5, "p") is not None
    repeat = await bet(store, "p", 100, round_no=5, bet_id="b5")
    assert repeat.round == 5  # a remembered receipt is still answered
    await owner.open()
    balance = await store.balance("p")
    with pytest.raises(BetRejected) as refused:
        await bet(store, "p", 100, round_no=1, bet_id="b1")
    assert refused.value.code is RejectCode.WRONG_ROUND
    assert await store.balance("p") == balance
    assert (await store.ledger()).balanced


class _NoScan(list[Bet]):
    """A round's bet list that fails the test if anything reads through it."""

    def __iter__(self) -> Iterator[Bet]:
        raise AssertionError("place_bet read through the round's bets")


async def test_a_bet_never_reads_through_the_rounds_bets() -> None:
    """A bet's cost does not grow with the bets already placed: place_bet keeps running totals
    (per player and spot for the limits, per spot, per player) and never walks the round's
    bets, however many there are (before, it summed them all for every bet)."""
    store = MemoryStore(ManualClock())
    await store.create_table(TABLE, RULES)
    owner = await Owner(store).start()
    await owner.open()
    record = store._tables[TABLE].rounds[1]
    record.bets = _NoScan()
    for number in range(300):
        player = f"p{number % 100}"  # each bets 100 once on each of three spots
        await store.ensure_player(player, 10_000)
        await bet(store, player, 100, ("player", "banker", "tie")[number % 3], bet_id=f"b{number}")
    with pytest.raises(BetRejected) as over:  # the limits still see the running totals
        await bet(store, "p0", 1_000, "player", bet_id="over")
    assert over.value.code is RejectCode.LIMIT
    assert len(record.bets) == 300
    assert record.bet_totals() == BetTotals(
        {"player": 10_000, "banker": 10_000, "tie": 10_000}, 100, 300
    )
    assert (await store.ledger()).balanced


async def test_a_thousand_guest_visits_leave_no_player_behind() -> None:
    """Guests that expired leave no record: the engine holds the players that stay, only."""
    clock = ManualClock()
    store = MemoryStore(clock)
    await store.ensure_player("stays", 1_000)
    for i in range(1_000):
        await store.ensure_player(f"guest-{i}", 1_000_000, guest_ttl_ms=5)
        if i % 100 == 0:
            await store.move_money(f"guest-{i}", 500, f"k-{i}")
    assert len(store._players) == 1_001
    clock.now_ms += 5
    assert await store.expire_guests() == 1_000
    assert list(store._players) == ["stays"]
    assert (await store.ledger()).balanced


async def test_audit_logs_idle_past_their_age_are_dropped() -> None:
    """The twin of a Redis audit stream expiring: a log whose last entry is older than
    audit_keep_ms is dropped by a later append of anyone, so a thousand guests that came and
    expired cost nothing once that long has passed."""
    clock = ManualClock()
    store = MemoryStore(clock, audit_keep_ms=1_000)
    for i in range(1_000):
        await store.ensure_player(f"g{i}", 100, guest_ttl_ms=10)
    assert await store.expire_guests(now_ms=clock.now_ms + 10) == 1_000
    assert len(store._audit._logs) == 1_000
    clock.now_ms += 1_000  # exactly audit_keep_ms old: still kept
    await store.ensure_player("p", 5)
    assert len(store._audit._logs) == 1_001
    assert [e.kind for e in await store.audit("g0")] == ["issue", "expire"]
    clock.now_ms += 1
    await store.ensure_player("q", 5)
    assert sorted(store._audit._logs) == ["p", "q"]
