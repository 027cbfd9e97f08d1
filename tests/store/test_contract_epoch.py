"""The contract, continued: settlements in one batch, and the history's epoch."""

from __future__ import annotations

import pytest

from server.core.errors import BetRejected, RejectCode
from server.store.base import Store
from tests.store import RULES, TABLE, Owner, bet
from tests.store.conftest import StoreFactory


async def _settled_round(store: Store) -> Owner:
    owner = await Owner(store).start()
    await owner.open()
    await bet(store, "alice", 500, "player")
    await bet(store, "alice", 100, "tie")
    await bet(store, "bob", 300, "banker")
    await owner.finish()
    return owner


# --- settlements in one batch --------------------------------------------------------------


async def test_settlements_reads_every_bettor_at_once(table: Store) -> None:
    """settlements gives each asked player's settlement, the same as settlement() does, and
    leaves out players without one."""
    await _settled_round(table)
    found = await table.settlements(TABLE, 1, ["alice", "bob", "carol", "alice"])
    assert sorted(found) == ["alice", "bob"]
    for player in ("alice", "bob"):
        assert found[player] == await table.settlement(TABLE, 1, player)
    assert await table.settlements(TABLE, 1, {"carol"}) == {}
    assert await table.settlements(TABLE, 2, ["alice"]) == {}
    assert await table.settlements(TABLE, 1, []) == {}


async def test_settlements_of_an_unknown_table(store: Store) -> None:
    """Asking an unknown table is UNKNOWN_TABLE, as settlement() is."""
    for players in (["alice"], []):
        with pytest.raises(BetRejected) as info:
            await store.settlements("nope", 1, players)
        assert info.value.code is RejectCode.UNKNOWN_TABLE


# --- the history's epoch -------------------------------------------------------------------


async def test_a_table_has_an_epoch_that_commits_keep(table: Store) -> None:
    """A new table has a short epoch; commits, bets and create_table again keep it; head and
    snapshot read it with the seq."""
    epoch = await table.epoch(TABLE)
    assert isinstance(epoch, str) and 0 < len(epoch) <= 64
    assert await table.head(TABLE) == (0, epoch)
    await _settled_round(table)
    await table.create_table(TABLE, RULES)
    assert await table.epoch(TABLE) == epoch
    seq = await table.last_seq(TABLE)
    assert seq > 0 and await table.head(TABLE) == (seq, epoch)
    snap = await table.snapshot(TABLE, "alice")
    assert snap is not None and (snap.seq, snap.epoch) == (seq, epoch)


async def test_each_table_and_store_has_its_own_epoch(make_store: StoreFactory) -> None:
    """Two tables, or the same table in two stores (two memory processes), never share one."""
    first, second = await make_store(), await make_store()
    for store in (first, second):
        await store.create_table(TABLE, RULES)
        await store.create_table("t2", RULES)
    epochs = {await s.epoch(t) for s in (first, second) for t in (TABLE, "t2")}
    assert len(epochs) == 4


async def test_reset_epoch_is_a_compare_and_set(table: Store) -> None:
    """reset_epoch replaces the epoch only if it is still the one seen, and returns the
    current one either way, so every node that saw the same loss ends up with one epoch."""
    old = await table.epoch(TABLE)
    new = await table.reset_epoch(TABLE, old)
    assert new != old and await table.epoch(TABLE) == new
    assert await table.reset_epoch(TABLE, old) == new  # another node, late: no second change
    assert await table.epoch(TABLE) == new
    seq, epoch = await table.head(TABLE)
    assert (seq, epoch) == (0, new)


async def test_epoch_calls_on_an_unknown_table(store: Store) -> None:
    """epoch, head and reset_epoch of an unknown table are UNKNOWN_TABLE."""
    for call in (store.epoch("nope"), store.head("nope"), store.reset_epoch("nope", "x")):
        with pytest.raises(BetRejected) as info:
            await call
        assert info.value.code is RejectCode.UNKNOWN_TABLE
