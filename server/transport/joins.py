"""A session's place at its tables: join (snapshot or catch-up, then live), leave, resync.

A join sends a snapshot, or the events missed since the client's `since`, then `joined`, and
subscribes the session to the table's feed (server/transport/feed.py) with no gap and no
duplicate in between; the rounds its catch-up settled are handed to settlement delivery
(`Settlements.resume`). A resync is a join the feed asks for when it lost the session's place
(the history went back, or the feed skipped events). A join and a resync of one session never
interleave: each holds the session's join lock, made on first use and dropped after.

Everything a session needs for this is on the `Member` protocol; the session keeps that state
(its tables, its lock) in its own slots, so an idle connection costs no object here.
"""

from __future__ import annotations

import asyncio
import contextlib
import sys
from collections.abc import AsyncIterator
from typing import Protocol

from server.transport.context import SessionContext
from server.transport.feed import SETTLING_KINDS, TableFeed
from server.transport.port import STORE_CLOSE_CODE
from server.transport.settlements import Recipient
from server.wire import shapes
from server.wire.messages import ErrorCode, ErrorReply, Join, Leave

__all__ = ["JoinLock", "Member", "join", "leave", "resync"]


class JoinLock(asyncio.Lock):
    """A session's join lock, with how many hold or await it (dropped when none do)."""

    def __init__(self) -> None:
        super().__init__()
        self.users = 0


class Member(Recipient, Protocol):
    """A session as a join sees it."""

    joined: tuple[str, ...]  # the tables it joined; rarely more than one
    join_lock: JoinLock | None  # None while no join or resync runs


@contextlib.asynccontextmanager
async def _exclusive(member: Member) -> AsyncIterator[None]:
    """Hold the member's join lock; it is dropped again once nobody holds or awaits it."""
    lock = member.join_lock
    if lock is None:
        lock = member.join_lock = JoinLock()
    lock.users += 1
    try:
        async with lock:
            yield
    finally:
        lock.users -= 1
        if not lock.users:
            member.join_lock = None


async def join(member: Member, ctx: SessionContext, command: Join) -> None:
    async with _exclusive(member):  # never interleaved with a resync of this session
        settled = await _join_unlocked(member, ctx, command)
    await ctx.hub.settlements.resume(member, command.table, settled)


def leave(member: Member, ctx: SessionContext, command: Leave) -> None:
    ctx.known_table(command.table)
    feed = ctx.hub.feeds.get(command.table)
    if feed is not None:
        feed.unsubscribe(member)
    member.joined = tuple(t for t in member.joined if t != command.table)
    member.port.send(shapes.left(command.table))


def resync(member: Member, ctx: SessionContext, table_id: str) -> None:
    """The feed lost the member's place in the table's history (a Redis that lost writes, or
    a feed that skipped events): it is no longer subscribed. It gets a fresh snapshot
    (`recovered: false`, the new epoch), then `joined` and the live events, as a join would.
    If the store cannot be read meanwhile, the connection is closed (1011) rather than left
    silently unsubscribed."""
    if not member.port.dropped:
        ctx.hub.tasks.spawn(
            "resync", lambda: _resync_or_close(member, ctx, table_id), 1, table=table_id
        )


async def _join_unlocked(member: Member, ctx: SessionContext, command: Join) -> list[int]:
    ctx.known_table(command.table)
    feed = await ctx.hub.feed(command.table)
    was_live = feed.is_subscribed(member)
    resume = feed.last_seq  # everything up to here was already sent to a live subscriber
    feed.unsubscribe(member)
    try:
        settled = await _catch_up(member, ctx, command, feed)
    except Exception:
        if was_live:  # a failed re-join leaves the earlier subscription as it was
            feed.subscribe_after(member, resume)
        raise
    if command.table not in member.joined:
        member.joined += (sys.intern(command.table),)  # not the message's copy of the id
    return settled


async def _catch_up(
    member: Member,
    ctx: SessionContext,
    command: Join,
    feed: TableFeed,
    recovered: bool | None = None,
) -> list[int]:
    """Snapshot or missed events, then `joined`; returns the rounds settled or voided by
    the events sent (the player's settlements of those follow: see Settlements.resume)."""
    after, epoch, from_store = command.since, command.epoch, False
    settled: list[int] = []
    if after is not None:
        last, current = await ctx.store.head(command.table)
        # A seq this table never reached (e.g. from before a memory server restarted), or
        # one of another history (the client's epoch is not the current one): nothing to
        # catch up from, so start over from a fresh state.
        if after > last or (epoch is not None and epoch != current):
            after, recovered = None, False
        epoch = current
    if after is None:
        after, epoch, from_store = await _send_snapshot(member, ctx, feed, recovered)
    # The feed checks that `after` is a place in its own history (epoch; not behind it
    # when read from the store), so a snapshot is never followed by another history.
    while (live_from := feed.subscribe_after(member, after, epoch, from_store)) is None:
        missed = await ctx.store.events_after(command.table, after)
        if missed is None:  # no longer held: start again from a fresh snapshot
            after, epoch, from_store = await _send_snapshot(member, ctx, feed, False)
            settled.clear()
            continue
        for event in missed:
            member.port.send(event)
            if event.get("kind") in SETTLING_KINDS:
                settled.append(event["round"])
            after = event["seq"]
        from_store = True
    settled += feed.settled_rounds(after, live_from)
    assert epoch is not None  # the store's, or the snapshot's
    # Sent right after the catch-up and before any live event: from here the table's
    # events follow without a gap.
    member.port.send(shapes.joined(command.table, live_from, epoch))
    return settled


async def _send_snapshot(
    member: Member, ctx: SessionContext, feed: TableFeed, recovered: bool | None
) -> tuple[int, str, bool]:
    """Send a snapshot of the feed's table; return its seq, its history's epoch and
    whether it is a fresh store read the feed must check (`from_store`). A spectator's is
    the one spectators share (a few store reads for a burst of joins); a player's is
    read for it: its bets and balance are its own."""
    table_id, player = feed.table_id, member.player
    if player is None:
        shared = await feed.spectator_snapshot()
        if shared is None:
            raise ErrorReply(ErrorCode.UNKNOWN_TABLE, f"no table {table_id!r}")
        member.port.send(shared.message(recovered))
        return shared.seq, shared.epoch, not shared.vouched
    snap = await ctx.store.snapshot(table_id, player)
    if snap is None:
        raise ErrorReply(ErrorCode.UNKNOWN_TABLE, f"no table {table_id!r}")
    now = await ctx.store.now_ms()
    balance = await ctx.store.balance(player)
    member.port.send(
        shapes.snapshot(
            table_id,
            snap.seq,
            snap.epoch,
            snap.state,
            now,
            snap.rules,
            snap.bets,
            snap.totals,  # everyone's stakes this round, per spot; never who
            snap.bettors,
            balance,
            recovered,
        )
    )
    return snap.seq, snap.epoch, True


async def _resync_or_close(member: Member, ctx: SessionContext, table_id: str) -> None:
    if not await ctx.hub.tasks.retrying(
        "resync", lambda: _resync(member, ctx, table_id), table=table_id
    ):
        await member.port.close(STORE_CLOSE_CODE, "could not resync the table; reconnect")


async def _resync(member: Member, ctx: SessionContext, table_id: str) -> None:
    async with _exclusive(member):
        if table_id not in member.joined or member.port.dropped:
            return  # left the table, or the connection, meanwhile
        feed = await ctx.hub.feed(table_id)
        feed.unsubscribe(member)
        await _catch_up(member, ctx, Join(table_id, None), feed, recovered=False)
        if table_id not in member.joined:  # the connection closed during the catch-up
            feed.unsubscribe(member)
