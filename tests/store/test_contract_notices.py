"""Settled notices on both engines: a commit that pays tells every listener (every node) the
table, the round and the players with a settlement of it; nothing else does."""

from __future__ import annotations

import asyncio
from collections.abc import AsyncIterator

import pytest

from server.store.base import SettledNotice, Store
from tests.store import TABLE, WAIT_S, Owner, bet


async def next_notice(notices: AsyncIterator[SettledNotice]) -> SettledNotice:
    return await asyncio.wait_for(anext(notices), WAIT_S)


@pytest.mark.parametrize("ending", ["settle", "void"])
async def test_a_paying_commit_notifies_every_listener_of_its_players(
    table: Store, ending: str
) -> None:
    """Two listeners (two nodes) each hear one notice per settled or voided round, naming
    every player paid once, whatever the number of their bets; commits that pay nobody
    (opening, dealing, a round without bets) send none."""
    owner = await Owner(table).start()
    async with table.settled_notices() as first, table.settled_notices() as second:
        await owner.open()
        await bet(table, "alice", 100, "player")
        await bet(table, "bob", 200, "banker")
        await bet(table, "alice", 50, "tie")
        await owner.close()
        if ending == "settle":
            await owner.deal()
            await owner.settle()
        else:
            await owner.void()
        heard = [await next_notice(first), await next_notice(second)]
        for notice in heard:
            assert (notice.table, notice.round) == (TABLE, 1)
            assert sorted(notice.players) == ["alice", "bob"]
        # A round nobody bet in pays nobody: the next notice is round 3's, not round 2's.
        await owner.open()
        await owner.finish()
        await owner.open()
        await bet(table, "bob", 100, "player", round_no=3)
        await owner.finish()
        for notices in (first, second):
            notice = await next_notice(notices)
            assert (notice.round, notice.players) == (3, ("bob",))


async def test_a_listener_that_left_hears_nothing_more(table: Store) -> None:
    """Leaving unsubscribes: later commits queue nothing for it, and a new listener hears
    only what is settled after it entered."""
    owner = await Owner(table).start()
    async with table.settled_notices():
        pass
    await owner.open()
    await bet(table, "alice", 100, "player")
    await owner.finish()  # round 1: nobody listening
    async with table.settled_notices() as notices:
        await owner.open()
        await bet(table, "bob", 100, "player", round_no=2)
        await owner.finish()
        notice = await next_notice(notices)
    assert (notice.round, notice.players) == (2, ("bob",))
