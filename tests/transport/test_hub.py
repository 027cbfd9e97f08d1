"""The hub on its own: fake subscribers, a real MemoryStore, each delivery path in turn.

Events reach a feed by the commit hand-off (`Hub.offer`), by the follower (whatever the
store holds that nobody handed over) and by joins waiting ahead of the feed. Every
subscribed, waiting or parked client either keeps receiving or is asked to resync.
"""

from __future__ import annotations

import asyncio
import contextlib
import itertools
from collections.abc import AsyncIterator, Callable, Collection
from typing import Any

import pytest
import structlog

from server.core.recall import round_summary
from server.core.table import settle_round
from server.runtime.clock import ManualClock as LoopClock
from server.store.base import Event, Settlement, Snapshot, Store, StoreUnavailable
from server.store.memory import MemoryStore
from server.transport.hub import (
    SLOW_CHECK_EVERY,
    SNAPSHOT_REUSE_S,
    Hub,
    Subscriber,
    TableFeed,
)
from server.wire.codec import Encoding, Frame, decode
from tests.store import RULES, TABLE, ManualClock, Owner, bet
from tests.transport.conftest import within
from tests.transport.history import rewind

pytestmark = pytest.mark.timeout(30)

QUIET = 3600.0  # a watchdog interval that never elapses in a test: only a wake-up checks


class FakeSub:
    """A Subscriber that keeps what it is sent; it may rejoin by itself when asked to
    resync, as a session does (snapshot from the store, then subscribe after it)."""

    def __init__(self, player: str = "p", *, hub: Hub | None = None) -> None:
        self.encoding = Encoding.JSON
        self.player = player
        self.messages: list[dict[str, Any]] = []
        self.resyncs = 0
        self.slow = False
        self.dropped = False
        self.hub = hub  # set: rejoin on resync
        self.snapshots: list[tuple[int, str]] = []
        self.changed = asyncio.Event()
        self._tasks: set[asyncio.Task[None]] = set()

    @property
    def connection(self) -> object:
        return self

    @property
    def port(self) -> FakeSub:  # its own connection: the feed writes frames to it
        return self

    def push_frame(self, frame: Frame) -> None:
        self.messages.append(decode(frame))
        self.changed.set()

    def over_buffer_limit(self) -> bool:
        return self.slow

    def drop_slow(self) -> None:
        self.dropped = True

    def resync(self, table_id: str) -> None:
        self.resyncs += 1
        self.changed.set()
        if self.hub is not None:
            task = asyncio.create_task(self.rejoin(self.hub, table_id))
            self._tasks.add(task)
            task.add_done_callback(self._tasks.discard)

    async def rejoin(self, hub: Hub, table_id: str) -> int | None:
        """What Session does: a snapshot, then subscribe after its seq, in its epoch."""
        snap = await hub.store.snapshot(table_id, self.player)
        assert snap is not None
        self.snapshots.append((snap.seq, snap.epoch))
        self.messages.append({"type": "snapshot", "seq": snap.seq, "round": snap.state.round})
        self.changed.set()
        feed = await hub.feed(table_id)
        return feed.subscribe_after(self, snap.seq, snap.epoch, from_store=True)

    @property
    def seqs(self) -> list[int]:
        return [m["seq"] for m in self.messages if m["type"] == "event"]

    async def until(self, condition: Callable[[], bool]) -> None:
        async with asyncio.timeout(within()):
            while not condition():
                self.changed.clear()
                await self.changed.wait()


def fanout(subs: dict[object, Subscriber], frame: Frame) -> None:
    for sub in subs.values():
        sub.push_frame(frame)


@pytest.fixture
def clock() -> ManualClock:
    return ManualClock()


@pytest.fixture
async def store(clock: ManualClock) -> MemoryStore:
    store = MemoryStore(clock)
    await store.create_table(TABLE, RULES)
    return store


Make = Callable[..., Hub]


@pytest.fixture
async def make_hub() -> AsyncIterator[Make]:
    hubs: list[Hub] = []

    def make(
        store: Store,
        send: Callable[[Subscriber, object], None] | None = None,
        **options: Any,
    ) -> Hub:
        hub = Hub(store, deliver=send or (lambda sub, s: None), fanout=fanout, **options)
        hubs.append(hub)
        return hub

    yield make
    for hub in hubs:
        await hub.close()


async def _owner(store: Store) -> Owner:
    return await Owner(store).start()


# --- the three delivery paths --------------------------------------------------------------


async def test_offer_delivers_committed_events_at_once(store: MemoryStore, make_hub: Make) -> None:
    """The commit hand-off: events this node committed reach subscribers synchronously,
    before the follower has run at all; the follower then repeats nothing."""
    hub = make_hub(store, check_interval=QUIET)
    feed = await hub.feed(TABLE)
    sub = FakeSub()
    assert feed.subscribe_after(sub, 0) == 0
    owner = await _owner(store)
    opened = await owner.open()
    hub.offer(TABLE, opened)  # no await since the commit: the follower has not read them
    assert sub.seqs == [e["seq"] for e in opened]
    closed = await owner.close()
    hub.offer(TABLE, closed)
    hub.offer(TABLE, opened)  # an old hand-off again: already delivered, ignored
    assert sub.seqs == list(range(1, closed[-1]["seq"] + 1))
    dealt = await owner.deal()  # not handed over: the follower brings these, and no repeat
    await sub.until(lambda: dealt[-1]["seq"] in sub.seqs)
    assert sub.seqs == list(range(1, dealt[-1]["seq"] + 1))


async def test_follower_delivers_what_nobody_handed_over(
    store: MemoryStore, make_hub: Make
) -> None:
    """The follower: events committed elsewhere (another node) arrive in order."""
    hub = make_hub(store, check_interval=QUIET)
    feed = await hub.feed(TABLE)
    subs = [FakeSub(f"p{i}") for i in range(3)]
    for sub in subs:
        feed.subscribe_after(sub, 0)
    owner = await _owner(store)
    events = await owner.open()
    await store.ensure_player("alice", 10_000)
    await bet(store, "alice", 100)
    events += await owner.publish()  # the totals: a commit this hub was not handed
    events += await owner.close()
    last = await store.last_seq(TABLE)
    for sub in subs:
        await sub.until(lambda sub=sub: len(sub.seqs) == last)  # type: ignore[misc]
        assert sub.seqs == list(range(1, last + 1))
    assert [m["kind"] for m in subs[0].messages][-1] == events[-1]["kind"]


async def test_a_join_waiting_ahead_is_subscribed_when_the_feed_gets_there(
    store: MemoryStore, make_hub: Make
) -> None:
    """A join whose snapshot is newer than the feed waits, then gets exactly the events
    after its snapshot."""
    hub = make_hub(store, check_interval=QUIET)
    feed = await hub.feed(TABLE)  # at seq 0; its follower has not run yet
    owner = await _owner(store)
    opened = await owner.open()
    ahead = opened[-1]["seq"]
    sub = FakeSub()
    assert feed.subscribe_after(sub, ahead) == ahead
    assert sub in feed.waiting
    closed = await owner.close()  # the follower reads the open round, then these
    await sub.until(lambda: len(sub.seqs) == len(closed))
    assert sub.seqs == [e["seq"] for e in closed]
    assert sub.resyncs == 0 and sub not in feed.waiting


# --- a follower that skips ahead tells everyone --------------------------------------------


async def test_a_follower_that_skips_ahead_resyncs_waiting_and_subscribed_clients(
    clock: ManualClock, make_hub: Make
) -> None:
    """The follower fell behind what the store holds and skipped to its end. Before, a join
    waiting ahead of it was never subscribed and heard nothing again; now every waiting and
    subscribed client is asked to resync and, rejoining, hears every event after."""
    # Four held: the close of a new shoe's first window is four events (with its seal).
    store = MemoryStore(clock, history_events=4)
    await store.create_table(TABLE, RULES)
    hub = make_hub(store, check_interval=QUIET)
    feed = await hub.feed(TABLE)  # at seq 0; nothing read yet
    owner = await _owner(store)
    opened = await owner.open()  # 2 events
    live, waiting = FakeSub("live", hub=hub), FakeSub("waiting", hub=hub)
    feed.subscribe_after(live, 0)
    feed.subscribe_after(waiting, opened[-1]["seq"])
    await store.ensure_player("alice", 10_000)
    for _ in range(4):  # the store now holds none of the events the follower has not read
        await bet(store, "alice", 100)
        await owner.publish()
    for sub in (live, waiting):
        await sub.until(lambda sub=sub: bool(sub.snapshots))  # type: ignore[misc]
        assert sub.resyncs == 1
    assert feed.last_seq == await store.last_seq(TABLE)
    closed = await owner.close()
    for sub in (live, waiting):
        await sub.until(lambda sub=sub: closed[-1]["seq"] in sub.seqs)  # type: ignore[misc]
        (snap_seq, _), *_ = sub.snapshots
        after = [m["seq"] for m in sub.messages[sub.messages.index(_snap(sub)) + 1 :]]
        assert after == list(range(snap_seq + 1, closed[-1]["seq"] + 1))


def _snap(sub: FakeSub) -> dict[str, Any]:
    return next(m for m in sub.messages if m["type"] == "snapshot")


# --- settlements -----------------------------------------------------------------------------


async def _round_with_bettors(store: MemoryStore, players: list[str]) -> tuple[Owner, int]:
    owner = await _owner(store)
    await owner.open()
    for player in players:
        await store.ensure_player(player, 10_000)
        await bet(store, player, 100, "banker")
    return owner, owner.state.round


async def test_one_failed_settlement_delivery_stops_no_other(
    store: MemoryStore, make_hub: Make
) -> None:
    """The first delivery raises: every other bettor still gets their settlement, and the
    failure is logged with its traceback."""
    players = [f"p{i}" for i in range(6)]
    failed: list[str] = []
    delivered: list[str] = []
    done = asyncio.Event()

    def send(sub: Subscriber, settlement: object) -> None:
        assert isinstance(settlement, Settlement) and settlement.round == round_no
        if not failed:
            failed.append(sub.player)
            raise RuntimeError("this connection broke mid-write")
        delivered.append(sub.player)
        if len(delivered) == len(players) - 1:
            done.set()

    with structlog.testing.capture_logs() as logs:
        hub = make_hub(store, send, check_interval=QUIET)
        await hub.feed(TABLE)  # the feed that sees the round settle
        owner, round_no = await _round_with_bettors(store, players)
        subs = [FakeSub(player) for player in players]
        hub.settlements.bettors[TABLE, round_no] = set(subs)
        hub.offer(TABLE, await owner.finish())
        await asyncio.wait_for(done.wait(), within())
    assert sorted(failed + delivered) == players
    [failure] = [e for e in logs if e["event"] == "settlement_not_delivered"]
    assert failure["exc_info"] is True and failure["round"] == round_no
    assert failure["player"] == failed[0]


async def test_a_settlement_reaches_every_local_session_of_the_player(
    store: MemoryStore, make_hub: Make
) -> None:
    """One store read per round; each settlement goes to every registered session of its
    player (one that bet, one that only sits there) and to a player joined to the table who
    bet elsewhere; spectators (no player) and other players get nothing."""
    delivered: list[tuple[FakeSub, int]] = []
    done = asyncio.Event()

    def send(sub: Subscriber, settlement: object) -> None:
        assert isinstance(sub, FakeSub) and isinstance(settlement, Settlement)
        delivered.append((sub, settlement.round))
        if len(delivered) == 3:
            done.set()

    hub = make_hub(store, send, check_interval=QUIET)
    feed = await hub.feed(TABLE)
    owner, round_no = await _round_with_bettors(store, ["alice", "bob"])
    betting_tab, idle_tab = FakeSub("alice"), FakeSub("alice")
    joined_elsewhere, watcher, other = FakeSub("bob"), FakeSub(), FakeSub("carol")
    watcher.player = None  # type: ignore[assignment]
    for sub in (betting_tab, idle_tab, joined_elsewhere, watcher, other):
        hub.settlements.register(sub)
    for sub in (joined_elsewhere, watcher):
        assert feed.subscribe_after(sub, feed.last_seq) is not None
    hub.settlements.bettors[TABLE, round_no] = {betting_tab}
    hub.offer(TABLE, await owner.finish())
    await asyncio.wait_for(done.wait(), within())
    assert sorted((id(s), r) for s, r in delivered) == sorted(
        (id(s), round_no) for s in (betting_tab, idle_tab, joined_elsewhere)
    )
    hub.settlements.unregister(idle_tab)
    assert hub.settlements.sessions_of("alice") == {betting_tab}


class FlakyStore(MemoryStore):
    """A memory store whose first settlement read fails, as a Redis going down would."""

    def __init__(self, clock: ManualClock) -> None:
        super().__init__(clock)
        self.batch_reads = 0
        self.single_reads = 0  # the hub must not read them one by one

    async def settlements(
        self, table_id: str, round_no: int, players: Collection[str]
    ) -> dict[str, Settlement]:
        self.batch_reads += 1
        if self.batch_reads == 1:
            raise StoreUnavailable("redis is unreachable: connection reset")
        return await super().settlements(table_id, round_no, players)

    async def settlement(self, table_id: str, round_no: int, player: str) -> Settlement | None:
        self.single_reads += 1
        return await super().settlement(table_id, round_no, player)


async def test_a_failed_settlement_read_is_retried(clock: ManualClock, make_hub: Make) -> None:
    """The store fails the first read: it is logged with its traceback, retried after a
    pause, and every settlement arrives, read in one batch."""
    store = FlakyStore(clock)
    await store.create_table(TABLE, RULES)
    players = ["alice", "bob", "carol"]
    got: dict[str, Settlement] = {}
    arrived = asyncio.Event()

    def send(sub: Subscriber, settlement: object) -> None:
        assert isinstance(settlement, Settlement)
        got[sub.player] = settlement
        if len(got) == len(players):
            arrived.set()

    with structlog.testing.capture_logs() as logs:
        hub = make_hub(store, send, check_interval=QUIET, retry_delay=0.01)
        await hub.feed(TABLE)  # the feed that sees the round settle
        owner, round_no = await _round_with_bettors(store, players)
        hub.settlements.bettors[TABLE, round_no] = {FakeSub(player) for player in players}
        hub.offer(TABLE, await owner.finish())
        await asyncio.wait_for(arrived.wait(), within())
    assert (store.batch_reads, store.single_reads) == (2, 0)
    for player in players:
        assert got[player] == await store.settlement(TABLE, round_no, player)
    [failed] = [e for e in logs if e["event"] == "task_failed"]
    assert failed["exc_info"] is True and failed["task"] == "settlements"
    assert failed["attempt"] == 1 and failed["round"] == round_no


async def test_a_task_that_keeps_failing_is_given_up(store: MemoryStore, make_hub: Make) -> None:
    """Retries are bounded: after the last attempt the task is given up, and says so."""
    hub = make_hub(store, attempts=3, retry_delay=0.001)
    calls = 0

    async def broken() -> None:
        nonlocal calls
        calls += 1
        raise ValueError("always")

    with structlog.testing.capture_logs() as logs:
        assert await hub.tasks.spawn("broken", broken, table=TABLE) is False
    assert calls == 3
    assert [e["event"] for e in logs] == ["task_failed"] * 3 + ["task_gave_up"]


async def test_a_retry_waits_on_the_hubs_clock(store: MemoryStore, make_hub: Make) -> None:
    """The pause before a retry is a sleep on the hub's Clock, not on the wall clock: with a
    manual clock the retry runs only once the test moves time past the pause."""
    clock = LoopClock()
    hub = make_hub(store, clock=clock, retry_delay=5.0)
    calls = 0

    async def fails_once() -> None:
        nonlocal calls
        calls += 1
        if calls == 1:
            raise ValueError("first try")

    with structlog.testing.capture_logs():
        task = hub.tasks.spawn("flaky", fails_once, table=TABLE)
        await clock.advance(0)  # lets it run until it sleeps
        assert calls == 1 and clock.sleepers == 1 and not task.done()
        await clock.advance(4.9)
        assert calls == 1 and not task.done()
        await clock.advance(0.1)
        assert await task is True and calls == 2


# --- the history goes backwards --------------------------------------------------------------


_players = itertools.count()


async def _played(store: MemoryStore, clock: ManualClock, owner: Owner, n: int) -> list[Event]:
    """Commit `n` more bet_totals events (each with a later ts than any before)."""
    events = []
    for _ in range(n):
        clock.now_ms += 7
        player = f"b{next(_players)}"
        await store.ensure_player(player, 1_000)
        await bet(store, player, 100, round_no=owner.state.round)
        events += await owner.publish()
    return events


async def _history(
    store: MemoryStore, clock: ManualClock, hub: Hub, n: int = 10
) -> tuple[Owner, TableFeed, list[Event]]:
    """A feed that has delivered `n` events past an open round."""
    feed = await hub.feed(TABLE)
    owner = await _owner(store)
    events = await owner.open(window_ms=3_600_000)
    hub.offer(TABLE, events)
    more = await _played(store, clock, owner, n)
    hub.offer(TABLE, more)
    return owner, feed, events + more


def _consistent(sub: FakeSub, store_events: list[Event]) -> None:
    """After its last snapshot the subscriber got exactly the store's events, in order."""
    last = max(i for i, m in enumerate(sub.messages) if m["type"] == "snapshot")
    snap = sub.messages[last]
    after = sub.messages[last + 1 :]
    held = {e["seq"]: e for e in store_events}
    assert [m["seq"] for m in after] == list(range(snap["seq"] + 1, snap["seq"] + 1 + len(after)))
    assert all(m == held[m["seq"]] for m in after)


async def test_the_watchdog_notices_a_store_behind_the_feed(
    store: MemoryStore, clock: ManualClock, make_hub: Make
) -> None:
    """Nobody commits: the store silently holds less than the feed delivered. Within the
    check interval the history gets a new epoch and every client resyncs to it."""
    hub = make_hub(store, check_interval=0.05)
    owner, feed, events = await _history(store, clock, hub)
    old_epoch = feed.epoch
    subs = [FakeSub(f"p{i}", hub=hub) for i in range(2)]
    feed.subscribe_after(subs[0], 0)
    feed.subscribe_after(subs[1], feed.last_seq)
    rewind(store, TABLE, events[-6]["seq"])
    for sub in subs:
        await sub.until(lambda sub=sub: bool(sub.snapshots))  # type: ignore[misc]
    new_epoch = await store.epoch(TABLE)
    assert new_epoch != old_epoch and feed.epoch == new_epoch
    assert [sub.snapshots for sub in subs] == [[(events[-6]["seq"], new_epoch)]] * 2
    more = await _played(store, clock, owner, 3)  # the new history goes on
    for sub in subs:
        await sub.until(lambda sub=sub: more[-1]["seq"] in sub.seqs)  # type: ignore[misc]
        _consistent(sub, await store.events_after(TABLE, 0) or [])


async def test_an_own_commit_under_a_delivered_seq_resets_at_once(
    store: MemoryStore, clock: ManualClock, make_hub: Make
) -> None:
    """This node's owner commits a seq the feed already delivered, with other content: the
    history went back. No waiting for the interval: the reset comes at once."""
    hub = make_hub(store, check_interval=QUIET)
    owner, feed, events = await _history(store, clock, hub)
    sub = FakeSub(hub=hub)
    feed.subscribe_after(sub, feed.last_seq)
    rewind(store, TABLE, events[-4]["seq"])
    clock.now_ms += 1
    recommitted = await owner.close()
    hub.offer(TABLE, recommitted)
    assert feed.stale
    assert sub.seqs == []  # nothing of the new history reached it on top of the old one
    await sub.until(lambda: bool(sub.snapshots))
    assert sub.snapshots == [(recommitted[-1]["seq"], await store.epoch(TABLE))]
    await owner.deal()
    await sub.until(lambda: len(sub.seqs) > 0)
    _consistent(sub, await store.events_after(TABLE, 0) or [])


async def test_a_join_is_never_followed_by_another_history(
    store: MemoryStore, clock: ManualClock, make_hub: Make
) -> None:
    """The reported case: the store went back and grew again, elsewhere; a new join's
    snapshot is of the new history, while the feed still caches the old events after it.
    Before, those stale events followed the snapshot; now the join is parked, the store is
    read at once, and the client is resynced to the new history."""
    hub = make_hub(store, check_interval=QUIET)
    owner, _, events = await _history(store, clock, hub, n=20)
    rewind(store, TABLE, events[-15]["seq"])
    clock.now_ms += 1000
    await _played(store, clock, owner, 5)  # the new history, not handed to this node
    newcomer = FakeSub(hub=hub)
    assert await newcomer.rejoin(hub, TABLE) == events[-10]["seq"]  # parked: nothing sent
    assert newcomer.seqs == []
    await newcomer.until(lambda: len(newcomer.snapshots) == 2)
    assert newcomer.resyncs == 1 and newcomer.seqs == []
    assert newcomer.snapshots[1][1] == await store.epoch(TABLE) != newcomer.snapshots[0][1]
    more = await _played(store, clock, owner, 2)
    await newcomer.until(lambda: more[-1]["seq"] in newcomer.seqs)
    _consistent(newcomer, await store.events_after(TABLE, 0) or [])


async def test_a_join_racing_a_commit_is_attached_after_one_check(
    store: MemoryStore, clock: ManualClock, make_hub: Make
) -> None:
    """A snapshot older than the feed is normal when a commit lands between the two: the
    join is parked for one read of the store, then gets the cached events; no resync."""
    hub = make_hub(store, check_interval=QUIET)
    _, feed, events = await _history(store, clock, hub)
    sub = FakeSub()
    before = events[-3]["seq"]
    assert feed.subscribe_after(sub, before, feed.epoch, from_store=True) == before
    assert sub in feed.pending and sub.seqs == []
    await sub.until(lambda: len(sub.seqs) == 2)
    assert sub.seqs == [before + 1, before + 2] and sub.resyncs == 0
    assert feed.is_subscribed(sub) and not feed.pending


async def test_a_join_of_another_epoch_is_resynced(
    store: MemoryStore, clock: ManualClock, make_hub: Make
) -> None:
    """A place in another history (an epoch not the feed's) is never served from the feed."""
    hub = make_hub(store, check_interval=QUIET)
    _, feed, _ = await _history(store, clock, hub)
    sub = FakeSub()
    feed.subscribe_after(sub, 2, "another-history")
    await sub.until(lambda: sub.resyncs == 1)
    assert sub.seqs == [] and not feed.is_subscribed(sub)


async def test_an_epoch_reset_by_another_node_is_adopted(
    store: MemoryStore, clock: ManualClock, make_hub: Make
) -> None:
    """Another node found the loss first and reset the epoch: this feed adopts that epoch
    (no second reset) and resyncs its clients."""
    hub = make_hub(store, check_interval=0.05)
    _, feed, _ = await _history(store, clock, hub)
    sub = FakeSub(hub=hub)
    feed.subscribe_after(sub, feed.last_seq)
    theirs = await store.reset_epoch(TABLE, feed.epoch)
    await sub.until(lambda: bool(sub.snapshots))
    assert feed.epoch == theirs == await store.epoch(TABLE)
    assert sub.snapshots == [(feed.last_seq, theirs)]


async def test_a_table_without_an_epoch_is_given_one(store: MemoryStore, make_hub: Make) -> None:
    """A table stored by an older version has no epoch: the hub gives it one before any
    client is sent an empty one."""
    store._tables[TABLE].epoch = ""
    hub = make_hub(store, check_interval=QUIET)
    feed = await hub.feed(TABLE)
    assert feed.epoch and feed.epoch == await store.epoch(TABLE)


class DownOnceStore(MemoryStore):
    """A memory store whose first follow() fails, as a Redis restarting would."""

    def __init__(self, clock: ManualClock) -> None:
        super().__init__(clock)
        self.follows = 0

    async def follow(self, table_id: str, after_seq: int) -> AsyncIterator[Event]:
        self.follows += 1
        if self.follows == 1:
            raise StoreUnavailable("redis is unreachable: connection reset")
        async for event in super().follow(table_id, after_seq):
            yield event


async def test_a_join_waiting_ahead_starts_over_after_a_store_failure(
    clock: ManualClock, make_hub: Make
) -> None:
    """A join waiting ahead holds a snapshot the feed never saw. After the store failed (it
    may have come back without that data) the join is asked to resync rather than attached
    to whatever the store writes under its seq next."""
    store = DownOnceStore(clock)
    await store.create_table(TABLE, RULES)
    hub = make_hub(store, check_interval=QUIET)
    feed = await hub.feed(TABLE)
    owner = await _owner(store)
    opened = await owner.open()
    sub = FakeSub(hub=hub)
    feed.subscribe_after(sub, opened[-1]["seq"])
    await sub.until(lambda: bool(sub.snapshots))
    assert sub.resyncs == 1 and store.follows == 2
    closed = await owner.close()
    await sub.until(lambda: closed[-1]["seq"] in sub.seqs)
    assert sub.seqs == [e["seq"] for e in closed]


# --- slow subscribers ----------------------------------------------------------------------


async def test_the_broadcast_comes_before_the_buffer_check_and_a_slow_sub_is_dropped(
    store: MemoryStore, make_hub: Make
) -> None:
    """No subscriber's buffer is asked about in front of an event's broadcast (that delayed
    the first write by ~0.6 us per subscriber); a stalled one is still cut within
    SLOW_CHECK_EVERY events, and the others miss nothing."""
    calls: list[str] = []

    class Recording(FakeSub):
        def push_frame(self, frame: Frame) -> None:
            calls.append("write")
            super().push_frame(frame)

        def over_buffer_limit(self) -> bool:
            calls.append("check")
            return super().over_buffer_limit()

    hub = make_hub(store, check_interval=QUIET)
    feed = TableFeed(hub, TABLE, 0, "e")  # no follower: only what is published here
    fine, stalled = Recording("fine"), Recording("stalled")
    feed.subscribe_after(fine, 0)
    feed.subscribe_after(stalled, 0)
    stalled.slow = True
    events: list[Event] = [
        {"type": "event", "table": TABLE, "seq": seq, "round": 1, "ts": 0, "kind": "bet_totals"}
        for seq in range(1, 2 * SLOW_CHECK_EVERY + 1)
    ]
    for event in events:
        calls.clear()
        feed.publish(event)
        assert calls[0] == "write", "a buffer was checked before the event was written"
        if stalled.dropped:
            break
    assert stalled.dropped and not fine.dropped
    assert len(stalled.seqs) <= SLOW_CHECK_EVERY
    assert not feed.is_subscribed(stalled) and feed.is_subscribed(fine)
    for event in events[len(fine.seqs) :]:
        feed.publish(event)
    assert fine.seqs == [e["seq"] for e in events]


# --- settled notices: every session of a bettor, wherever it is ------------------------------


class CountingStore(MemoryStore):
    """A memory store that records the players of every settlements read."""

    def __init__(self, clock: ManualClock) -> None:
        super().__init__(clock)
        self.reads: list[set[str]] = []

    async def settlements(
        self, table_id: str, round_no: int, players: Collection[str]
    ) -> dict[str, Settlement]:
        self.reads.append(set(players))
        return await super().settlements(table_id, round_no, players)


def _collect(into: list[tuple[str, int]], arrived: asyncio.Event) -> Callable[..., None]:
    def send(sub: Subscriber, settlement: object) -> None:
        assert isinstance(sub, FakeSub) and isinstance(settlement, Settlement)
        into.append((sub.player, settlement.round))
        arrived.set()

    return send


async def _wait(arrived: asyncio.Event) -> None:
    await asyncio.wait_for(arrived.wait(), within())
    arrived.clear()


async def test_a_notice_brings_the_settlement_to_a_session_of_no_table(
    clock: ManualClock, make_hub: Make
) -> None:
    """The hub follows no table; dave's only session here joined none, and his bet came
    through another node: the store's notice brings his settlement, read once for him.
    Carol, with a session here and no bet, costs no read; a notice naming only players with
    no session here costs none either."""
    store = CountingStore(clock)
    await store.create_table(TABLE, RULES)
    got: list[tuple[str, int]] = []
    arrived = asyncio.Event()
    hub = make_hub(store, _collect(got, arrived), check_interval=QUIET)
    dave, carol = FakeSub("dave"), FakeSub("carol")
    hub.settlements.register(dave)
    hub.settlements.register(carol)
    await asyncio.wait_for(hub.settlements.notices_live.wait(), within())
    owner, round_no = await _round_with_bettors(store, ["erin", "dave"])
    await owner.finish()
    await _wait(arrived)
    assert got == [("dave", round_no)] and store.reads == [{"dave"}]
    assert hub.feeds == {}
    await owner.open()
    await bet(store, "erin", 100, "player", round_no=round_no + 1)
    await owner.finish()  # a notice for erin alone: nothing to do here
    await owner.open()
    await bet(store, "dave", 100, "player", round_no=round_no + 2)
    await owner.finish()
    await _wait(arrived)
    assert got == [("dave", round_no), ("dave", round_no + 2)]
    assert store.reads == [{"dave"}, {"dave"}]


@pytest.mark.parametrize("handed_over", [True, False])
async def test_players_a_feed_serves_are_not_read_again_for_the_notice(
    clock: ManualClock, make_hub: Make, handed_over: bool
) -> None:
    """Dave is joined to the table here: the feed reads his settlement after the round's
    event (handed over by the commit, or read by the follower, before or after the notice
    comes); the notice reads only erin's, whose session here joined nothing."""
    store = CountingStore(clock)
    await store.create_table(TABLE, RULES)
    got: list[tuple[str, int]] = []
    arrived = asyncio.Event()
    hub = make_hub(store, _collect(got, arrived), check_interval=QUIET)
    feed = await hub.feed(TABLE)
    dave, erin = FakeSub("dave"), FakeSub("erin")
    hub.settlements.register(dave)
    hub.settlements.register(erin)
    assert feed.subscribe_after(dave, feed.last_seq) is not None
    await asyncio.wait_for(hub.settlements.notices_live.wait(), within())
    owner, round_no = await _round_with_bettors(store, ["dave", "erin"])
    events = await owner.finish()
    if handed_over:
        hub.offer(TABLE, events)
    await dave.until(lambda: events[-1]["seq"] in dave.seqs)
    async with asyncio.timeout(within()):
        while len(got) < 2:
            await _wait(arrived)
    assert sorted(got) == [("dave", round_no), ("erin", round_no)]
    assert sorted(sorted(read) for read in store.reads) == [["dave"], ["erin"]]


async def test_a_player_joined_when_a_slices_notice_came_gets_it_after_the_event(
    clock: ManualClock, make_hub: Make
) -> None:
    """A big round is credited in slices, each with its notice, before the round's event.
    Dave is joined to the table here when his slice's notice comes, so it is left to the
    feed; he leaves the table before the event, and the feed still delivers his settlement
    after it."""
    store = CountingStore(clock)
    await store.create_table(TABLE, RULES)
    got: list[tuple[str, int]] = []
    arrived = asyncio.Event()
    hub = make_hub(store, _collect(got, arrived), check_interval=QUIET)
    feed = await hub.feed(TABLE)
    dave = FakeSub("dave")
    hub.settlements.register(dave)
    assert feed.subscribe_after(dave, feed.last_seq) is not None
    await asyncio.wait_for(hub.settlements.notices_live.wait(), within())
    heard = asyncio.Event()
    on_settled = hub.settlements.on_settled

    def hearing(notice: Any) -> None:
        on_settled(notice)
        heard.set()

    hub.settlements.on_settled = hearing  # type: ignore[method-assign]
    owner, round_no = await _round_with_bettors(store, ["dave", "erin"])
    await owner.close()
    await owner.deal()
    dealing = owner.state
    transition, payouts = settle_round(dealing, owner.rules, await store.round_bets(TABLE, 1))
    summary = round_summary(transition.state)
    daves = [p for p in payouts if p.player == "dave"]
    await store.commit(TABLE, owner.fence, dealing.version, dealing, [], daves, summary)
    await asyncio.wait_for(heard.wait(), within())
    assert got == [] and store.reads == []  # left to the feed: dave is joined here
    feed.unsubscribe(dave)
    events = await owner.apply(transition, payouts)
    hub.offer(TABLE, events)
    await _wait(arrived)
    assert got == [("dave", round_no)]


class NoticesDownOnceStore(MemoryStore):
    """A memory store whose first settled_notices() fails, as a Redis restarting would."""

    def __init__(self, clock: ManualClock) -> None:
        super().__init__(clock)
        self.subscriptions = 0

    def settled_notices(self) -> contextlib.AbstractAsyncContextManager[Any]:
        self.subscriptions += 1
        if self.subscriptions == 1:
            return _failing()
        return super().settled_notices()


@contextlib.asynccontextmanager
async def _failing() -> AsyncIterator[Any]:
    raise StoreUnavailable("redis is unreachable: connection reset")
    yield  # pragma: no cover - never reached


async def test_the_notice_listener_outlives_a_store_error(
    clock: ManualClock, make_hub: Make
) -> None:
    """The store fails the subscription: a warning is logged, the listener subscribes again
    after a pause, says so, and settlements are delivered; the node never notices."""
    store = NoticesDownOnceStore(clock)
    await store.create_table(TABLE, RULES)
    got: list[tuple[str, int]] = []
    arrived = asyncio.Event()
    hub = make_hub(store, _collect(got, arrived), check_interval=QUIET)
    with structlog.testing.capture_logs() as logs:
        hub.settlements.register(FakeSub("dave"))
        await asyncio.wait_for(hub.settlements.notices_live.wait(), within())
        owner, round_no = await _round_with_bettors(store, ["dave"])
        await owner.finish()
        await _wait(arrived)
    assert got == [("dave", round_no)] and store.subscriptions == 2
    names = [entry["event"] for entry in logs]
    assert names == ["settled_notices_error", "settled_notices_resumed"], logs
    assert logs[0]["log_level"] == "warning"


@pytest.mark.redis
async def test_the_notice_listener_outlives_a_redis_restart(make_hub: Make) -> None:
    """Redis is killed and started again under a listening hub: it logs the loss, subscribes
    again once Redis is back, and the next rounds' settlements arrive."""
    from server.store.redis import RedisStore
    from tests.redis_server import start_redis

    with start_redis() as server, structlog.testing.capture_logs() as logs:
        store = RedisStore.from_url(server.url)
        try:
            got: list[tuple[str, int]] = []
            arrived = asyncio.Event()
            hub = make_hub(store, _collect(got, arrived), check_interval=QUIET)
            hub.settlements.register(FakeSub("dave"))
            await asyncio.wait_for(hub.settlements.notices_live.wait(), within())
            server.restart()  # killed: nothing kept
            await store.create_table(TABLE, RULES)
            await store.ensure_player("dave", 10_000)
            owner = await _owner(store)
            # Notices of rounds settled before the listener is back are lost (at most once):
            # play rounds until one arrives, a bounded number of them.
            for _ in range(20):
                await owner.open()
                await bet(store, "dave", 100, "banker", round_no=owner.state.round)
                await owner.finish()
                with contextlib.suppress(TimeoutError):
                    await asyncio.wait_for(arrived.wait(), within(0.5))
                    break
            assert got and got[-1] == ("dave", owner.state.round)
        finally:
            await hub.close()
            await store.close()
    names = [entry["event"] for entry in logs]
    assert "settled_notices_error" in names and "settled_notices_resumed" in names, names


# --- the spectators' shared snapshot ---------------------------------------------------------


class SnapshotCounter(MemoryStore):
    """A memory store that counts snapshot reads; one may be held (`gate`) after it read, as
    a Redis reply still on its way, or fail as a Redis that is down."""

    def __init__(self, clock: ManualClock) -> None:
        super().__init__(clock)
        self.snapshots = 0
        self.gate: asyncio.Event | None = None
        self.reading = asyncio.Event()  # set when a read starts
        self.down = False

    async def snapshot(self, table_id: str, player: str | None) -> Snapshot | None:
        self.snapshots += 1
        self.reading.set()
        if self.down:
            raise StoreUnavailable("redis is unreachable: connection refused")
        snap = await super().snapshot(table_id, player)
        if self.gate is not None:
            await self.gate.wait()
        return snap


@pytest.fixture
async def counting(clock: ManualClock) -> SnapshotCounter:
    store = SnapshotCounter(clock)
    await store.create_table(TABLE, RULES)
    return store


async def test_concurrent_spectator_joins_share_one_store_read(
    counting: SnapshotCounter, clock: ManualClock, make_hub: Make
) -> None:
    """Many spectators joining at once cost one snapshot read, and joins after it none,
    while the feed has delivered nothing after it."""
    hub = make_hub(counting, check_interval=QUIET)
    _, feed, _ = await _history(counting, clock, hub)
    counting.snapshots = 0
    shared = await asyncio.gather(*(feed.spectator_snapshot() for _ in range(50)))
    assert counting.snapshots == 1
    first = shared[0]
    assert first is not None and all(s is first for s in shared)
    assert (first.seq, first.epoch, first.vouched) == (feed.last_seq, feed.epoch, True)
    assert first.snapshot.bets == [] and first.message()["balance"] is None
    assert await feed.spectator_snapshot() is first
    assert counting.snapshots == 1


async def test_a_join_after_a_new_event_gets_it_after_the_shared_snapshot_then_a_fresh_one(
    counting: SnapshotCounter, clock: ManualClock, make_hub: Make
) -> None:
    """The feed moved past the shared snapshot: the next join still starts from it, with the
    events after it from the feed's cache (no gap, no duplicate, no wait), and a fresh read
    starts at once; the joins after that read get the fresh snapshot."""
    hub = make_hub(counting, check_interval=QUIET)
    owner, feed, _ = await _history(counting, clock, hub)
    old = await feed.spectator_snapshot()
    assert old is not None and counting.snapshots == 1
    hub.offer(TABLE, await _played(counting, clock, owner, 2))
    assert await feed.spectator_snapshot() is old
    sub = FakeSub()
    sub.messages.append({"type": "snapshot", "seq": old.seq})
    assert (
        feed.subscribe_after(sub, old.seq, old.epoch, from_store=not old.vouched) == feed.last_seq
    )
    assert sub.seqs == [old.seq + 1, old.seq + 2]
    _consistent(sub, await counting.events_after(TABLE, 0) or [])
    assert feed.sharing is not None  # the fresh read, started by that join
    await feed.sharing[1]
    fresh = await feed.spectator_snapshot()
    assert fresh is not None and fresh is not old
    assert fresh.seq == feed.last_seq and counting.snapshots == 2


async def test_the_shared_snapshot_is_served_for_a_limited_time(
    counting: SnapshotCounter, clock: ManualClock, make_hub: Make
) -> None:
    """It also holds what no event says (bet totals since the last bet_totals): once it is
    SNAPSHOT_REUSE_S old the next join waits for a fresh read."""
    hub = make_hub(counting, check_interval=QUIET)
    _, feed, _ = await _history(counting, clock, hub)
    old = await feed.spectator_snapshot()
    assert old is not None
    old.taken -= SNAPSHOT_REUSE_S
    fresh = await feed.spectator_snapshot()
    assert fresh is not old and counting.snapshots == 2


async def test_an_epoch_reset_invalidates_the_shared_snapshot(
    counting: SnapshotCounter, clock: ManualClock, make_hub: Make
) -> None:
    """After the history got a new epoch no join starts from the old history's snapshot."""
    hub = make_hub(counting, check_interval=QUIET)
    _, feed, _ = await _history(counting, clock, hub)
    old = await feed.spectator_snapshot()
    assert old is not None
    live = FakeSub()
    feed.subscribe_after(live, feed.last_seq)
    theirs = await counting.reset_epoch(TABLE, feed.epoch)
    feed.check_now.set()
    await live.until(lambda: live.resyncs == 1)  # the feed adopted the new epoch
    assert feed.epoch == theirs
    fresh = await feed.spectator_snapshot()
    assert fresh is not None and fresh is not old
    assert (fresh.epoch, fresh.vouched) == (theirs, True) and counting.snapshots == 2


async def test_a_shared_read_behind_the_feed_is_not_vouched_and_outlives_a_cancelled_join(
    counting: SnapshotCounter, clock: ManualClock, make_hub: Make
) -> None:
    """A commit lands while the read's reply is on its way: the snapshot is behind the feed.
    The joins that waited for it get it unvouched (parked until the store is checked, as any
    snapshot read behind the feed) and it is not kept for later joins. A waiting join that
    is cancelled (its connection closed) cancels the read for no other."""
    hub = make_hub(counting, check_interval=QUIET)
    owner, feed, _ = await _history(counting, clock, hub)
    counting.gate = asyncio.Event()
    gone = asyncio.create_task(feed.spectator_snapshot())
    waiting = asyncio.create_task(feed.spectator_snapshot())
    async with asyncio.timeout(within()):
        await counting.reading.wait()
    hub.offer(TABLE, await _played(counting, clock, owner, 1))
    gone.cancel()
    counting.gate.set()
    behind = await waiting
    assert gone.cancelled() and counting.snapshots == 1
    assert behind is not None and behind.seq == feed.last_seq - 1 and not behind.vouched
    assert feed.shared is None
    sub = FakeSub()
    assert feed.subscribe_after(sub, behind.seq, behind.epoch, from_store=True) == behind.seq
    assert sub in feed.pending


async def test_a_failed_shared_read_fails_its_joins_and_the_next_join_reads_again(
    counting: SnapshotCounter, clock: ManualClock, make_hub: Make
) -> None:
    hub = make_hub(counting, check_interval=QUIET)
    _, feed, _ = await _history(counting, clock, hub)
    counting.down = True
    results = await asyncio.gather(
        *(feed.spectator_snapshot() for _ in range(3)), return_exceptions=True
    )
    assert all(isinstance(r, StoreUnavailable) for r in results) and counting.snapshots == 1
    counting.down = False
    shared = await feed.spectator_snapshot()
    assert shared is not None and shared.vouched and counting.snapshots == 2
