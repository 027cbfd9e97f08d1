"""Memory-engine specifics: what it forgets, so the embedded default runs for ever."""

from __future__ import annotations

import pytest

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
