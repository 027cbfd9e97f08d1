"""Fan-out on one node: one follower per table, each event encoded once per encoding.

A TableFeed follows its table's event history from the store (one reader per table per node,
however many clients) and hands the same encoded bytes to every subscriber with websockets'
`broadcast`. It keeps the most recent events encoded, so a client joining or reconnecting is
caught up synchronously and then subscribed, with no await in between: no gap, no duplicate.

Events reach a feed by three paths: the commit hand-off (`Hub.offer`: what this node's own
table loops just committed), the follower (`Hub._follow`: everything else, read from the
store), and joins waiting ahead (`TableFeed.waiting`: a client whose snapshot is newer than
the feed, subscribed when the feed gets there).

Settlements reach a player's sessions by two paths. A feed, after a round's `round_settled`
or `round_voided`, reads the settlements of the sessions that bet through it or are joined to
its table, and delivers each to every local session of that player (so after the event, in
order). Every other session hears of the round from the store's settled notices
(`Hub._follow_settled`, one listener per node): a player with a bet in the round and local
sessions, none of them at that table here, gets it read and delivered too; a node with no
session of a notified player does nothing.

A history can go backwards: a Redis restarted without its last writes, or a failover to a
lagging replica, holds fewer events than the feed has delivered, and the events after that
point are written again with other content. Each feed's watchdog notices (the store's seq
below the feed's, another epoch, an event at a seq already delivered that differs, a join
whose place the feed cannot vouch for) within about a second, gives the history a new epoch
(`Store.reset_epoch`) and asks every client of the table to resync: each gets a fresh
snapshot with `recovered: false` and goes on live from it. The same happens when the follower
had to skip events it could no longer read. No client is left silently behind.
"""

from __future__ import annotations

import asyncio
import contextlib
import contextvars
from collections import OrderedDict, deque
from collections.abc import Awaitable, Callable, Collection, Coroutine
from dataclasses import dataclass, field
from typing import Protocol

import structlog
from websockets.asyncio.server import broadcast

from server.core.errors import BetRejected
from server.metrics import Metrics
from server.runtime.slices import SLICE
from server.store.base import Event, SettledNotice, Store, StoreUnavailable
from server.transport.shared_snapshot import SharedSnapshot
from server.wire.codec import Encoding, Frame, encode

__all__ = ["SLOW_CHECK_EVERY", "GapDetected", "Hub", "Subscriber", "TableFeed"]

RECENT_EVENTS = 4096  # encoded events kept per table for catch-up without a store read
CHECK_INTERVAL_S = 1.0  # how often a feed checks that the stored history did not go back
TASK_ATTEMPTS = 5  # a background task is tried this many times before it is given up
RETRY_DELAY_S = 0.2  # the pause before its first retry; it doubles for each next one
FOLLOWER_PAUSE_S = 0.5  # the follower's pause after a store error, before it reads again
SETTLING_KINDS = ("round_settled", "round_voided")  # events after which players get settlements
# Rounds whose settlements a feed sent, remembered until their settled notice comes (it comes
# within milliseconds, or never: pub/sub is at most once), so that notice reads them no more.
SERVED_ROUNDS = 256
# Players whose settlement a node reads at once, at first: after each read the next takes as
# many as make about SLICE payouts, so one read decodes and delivers a slice of a big round.
SETTLEMENTS_FIRST_READ = 8
SETTLEMENTS_READ_MAX = 1000
# Subscribers' send buffers are checked after every this many events of a table, after the
# broadcast: asking each transport costs ~0.6 us, 6 ms at 10,000 spectators, which in front
# of the broadcast delayed every event's first write. A stalled client is still dropped,
# holding at most this many events more than --max-buffer-bytes.
SLOW_CHECK_EVERY = 8
# A spectators' snapshot is shared by the joins of this long at most (see spectator_snapshot):
# the events after it catch a join up, but it also holds what no event says (the round's bet
# totals counted since the last bet_totals event), and a fresh read now and then is a join
# the feed checks against the store.
SNAPSHOT_REUSE_S = 0.5


class GapDetected(Exception):
    """An event arrived whose seq is not the next one: the missing ones must come first."""


class Subscriber(Protocol):
    """What the hub needs of a client session."""

    @property
    def encoding(self) -> Encoding: ...

    @property
    def player(self) -> str | None:
        """Whose settlements it gets: None for a spectator or an operator."""

    @property
    def connection(self) -> object: ...

    def push_frame(self, frame: Frame) -> None: ...

    def over_buffer_limit(self) -> bool: ...

    def drop_slow(self) -> None: ...

    def resync(self, table_id: str) -> None:
        """The feed lost this subscriber's place in the table's history (the history went
        back, or the feed skipped events): it is no longer subscribed and must start over
        from a fresh snapshot. Must not block or raise: start the work and return."""


Fanout = Callable[[dict[object, Subscriber], Frame], None]


def websocket_fanout(subs: dict[object, Subscriber], frame: Frame) -> None:
    """One frame to many WebSocket connections, written without awaiting any of them."""
    broadcast(subs.keys(), frame)  # type: ignore[arg-type]


def _table_task(coro: Coroutine[object, object, None]) -> asyncio.Task[None]:
    """A task of the table's, not of the connection that happened to start it: it does not
    inherit that connection's log context (conn, player)."""
    return asyncio.create_task(coro, context=contextvars.Context())


def _retrieved(task: asyncio.Task[SharedSnapshot | None]) -> None:
    """Mark a shared read's failure seen: its joiners may all have gone (they hear it if not)."""
    if not task.cancelled():
        task.exception()


@dataclass(slots=True)
class _Cached:
    event: Event
    frames: dict[Encoding, Frame] = field(default_factory=dict)

    def frame(self, encoding: Encoding) -> Frame:
        frame = self.frames.get(encoding)
        if frame is None:
            frame = self.frames[encoding] = encode(self.event, encoding)
        return frame


class TableFeed:
    def __init__(self, hub: Hub, table_id: str, last_seq: int, epoch: str = "") -> None:
        self.hub = hub
        self.table_id = table_id
        self.last_seq = last_seq
        self.epoch = epoch  # the history this feed's seqs belong to
        self.recent: deque[_Cached] = deque(maxlen=RECENT_EVENTS)
        self.subscribers: dict[Encoding, dict[object, Subscriber]] = {e: {} for e in Encoding}
        self.waiting: dict[Subscriber, int] = {}  # joined ahead of this feed: seq to wait for
        # Joins this feed cannot vouch for until the watchdog has read the store: their seq
        # is of another epoch, or came from the store while this feed is ahead of it (for a
        # moment after a commit; for good after the store went back). Value: (seq, epoch).
        self.pending: dict[Subscriber, tuple[int, str | None]] = {}
        self.bettors: dict[int, set[Subscriber]] = {}  # round -> local sessions that bet in it
        self.stale = False  # the history went back: nothing is delivered until the reset
        self.stale_reason = ""
        self.generation = 0  # counts rebases, so a check that raced one is not trusted
        self.check_now = asyncio.Event()  # wakes the watchdog before its next interval
        self.task: asyncio.Task[None] | None = None  # the follower
        self.watchdog: asyncio.Task[None] | None = None
        self.delivered = 0
        self.unchecked = 0  # events published since the subscribers' buffers were checked
        # The spectators' snapshot (see spectator_snapshot), and the store read of one under
        # way with the generation it was started in.
        self.shared: SharedSnapshot | None = None
        self.sharing: tuple[int, asyncio.Task[SharedSnapshot | None]] | None = None

    @property
    def subscriber_count(self) -> int:
        return sum(len(subs) for subs in self.subscribers.values())

    def can_serve_after(self, seq: int) -> bool:
        first = self.recent[0].event["seq"] if self.recent else self.last_seq + 1
        return first - 1 <= seq <= self.last_seq

    def subscribe_after(
        self, sub: Subscriber, seq: int, epoch: str | None = None, from_store: bool = False
    ) -> int | None:
        """Send the cached events after `seq` and subscribe, atomically; return the last seq
        sent. None if the cache does not reach back to `seq` (the caller reads the store).

        `epoch` is the history `seq` belongs to, if the caller knows it; `from_store` says
        the caller just read `seq` from the store (a snapshot, or events it sent). A place
        this feed cannot vouch for yet is parked until the watchdog has read the store; the
        subscriber is then attached, or asked to resync."""
        if self.stale or (epoch is not None and epoch != self.epoch):
            return self._park(sub, seq, epoch)
        if from_store and seq < self.last_seq:
            return self._park(sub, seq, epoch)
        return self._attach(sub, seq)

    async def spectator_snapshot(self) -> SharedSnapshot | None:
        """The table's snapshot for a spectator (no player), None if the store has no such
        table. Spectators joining this node share one: its `vouched` says this feed has its
        place (see below), so the join subscribes after it with `from_store` False.

        A snapshot read while this feed was at or behind its seq, in this feed's epoch and
        generation, is a place in the feed's history: a join may start from it as long as
        the feed still caches every event after it (they are sent right after it, as to a
        client catching up with `since`), for SNAPSHOT_REUSE_S at most. Such a join never
        waits: a burst of thousands of joins costs a few store reads, and no join is held
        suspended (thousands of suspended joins left megabytes of RSS behind). Once the
        feed has moved past it, or it is half its age limit old, a fresh one is read in the
        background for the joins after. Only when there is none to serve does a join wait,
        and every join waiting meanwhile shares that one read."""
        shared = self.shared
        if shared is not None and self._serves(shared):
            if shared.seq < self.last_seq or shared.age() >= SNAPSHOT_REUSE_S / 2:
                self._read_shared()  # a fresher one for the next joins
            return shared
        # Shielded: a joiner whose connection closes does not cancel the others' read.
        return await asyncio.shield(self._read_shared())

    def _serves(self, shared: SharedSnapshot) -> bool:
        """Whether a join may start from this shared snapshot now."""
        return (
            not self.stale
            and shared.generation == self.generation
            and shared.epoch == self.epoch
            and shared.age() < SNAPSHOT_REUSE_S
            and (shared.seq >= self.last_seq or self.can_serve_after(shared.seq))
        )

    def _read_shared(self) -> asyncio.Task[SharedSnapshot | None]:
        """The store read of a spectators' snapshot under way in this generation, started if
        there is none."""
        if self.sharing is None or self.sharing[0] != self.generation:
            read = self._read_snapshot(self.generation)
            task = asyncio.create_task(read, context=contextvars.Context())
            task.add_done_callback(_retrieved)
            self.sharing = (self.generation, task)
        return self.sharing[1]

    async def _read_snapshot(self, generation: int) -> SharedSnapshot | None:
        try:
            snap = await self.hub.store.snapshot(self.table_id, None)
            if snap is None:
                return None
            now_ms = await self.hub.store.now_ms()
            taken = asyncio.get_running_loop().time()
            # Read at or ahead of this feed, in its history: a place the feed can vouch for.
            # Behind it (a commit raced the read, or the store went back) it is served only
            # to the joins that waited for it, each parked until the store is checked.
            vouched = (
                generation == self.generation
                and not self.stale
                and snap.epoch == self.epoch
                and snap.seq >= self.last_seq
            )
            shared = SharedSnapshot(self.table_id, snap, now_ms, taken, generation, vouched)
            if vouched:
                self.shared = shared
            return shared
        finally:
            if self.sharing is not None and self.sharing[1] is asyncio.current_task():
                self.sharing = None

    def _park(self, sub: Subscriber, seq: int, epoch: str | None) -> int:
        self.pending[sub] = (seq, epoch)
        self.check_now.set()
        return seq  # nothing after `seq` was sent

    def _attach(self, sub: Subscriber, seq: int) -> int | None:
        if seq > self.last_seq:
            self.waiting[sub] = seq  # this feed has not seen `seq` yet: join when it does
            return seq
        if not self.can_serve_after(seq):
            return None
        for cached in self.recent:
            if cached.event["seq"] > seq:
                sub.push_frame(cached.frame(sub.encoding))
                self.hub.metrics.message_out("event")
        self.subscribers[sub.encoding][sub.connection] = sub
        return self.last_seq

    def is_subscribed(self, sub: Subscriber) -> bool:
        return (
            sub.connection in self.subscribers[sub.encoding]
            or sub in self.waiting
            or sub in self.pending
        )

    def unsubscribe(self, sub: Subscriber) -> None:
        self.subscribers[sub.encoding].pop(sub.connection, None)
        self.waiting.pop(sub, None)
        self.pending.pop(sub, None)

    def publish(self, event: Event) -> None:
        if self.stale:
            return  # another history: the reset resyncs everyone, then the follower resumes
        seq = event["seq"]
        if seq <= self.last_seq:
            # Already delivered (the follower and the commit hand-off both bring it), unless
            # it is another event under the same seq: the history went back.
            cached = self._cached(seq)
            if cached is not None and cached.event != event:
                self.went_back(f"seq {seq} was written again with other content")
            return
        if seq != self.last_seq + 1:
            raise GapDetected(f"{self.table_id}: expected seq {self.last_seq + 1}, got {seq}")
        cached = _Cached(event)
        self.recent.append(cached)
        self.last_seq = seq
        for encoding, subs in self.subscribers.items():
            if subs:
                self.hub.fanout(subs, cached.frame(encoding))
                self.delivered += len(subs)
        self.hub.metrics.event_written(event["ts"], self.subscriber_count)
        self.unchecked += 1
        if self.unchecked >= SLOW_CHECK_EVERY:
            self.drop_slow_subscribers()
        for sub, after in list(self.waiting.items()):
            if after <= seq:
                del self.waiting[sub]
                if self._attach(sub, after) is None:
                    self._resync(sub)  # its place is no longer cached: never drop it silently
        if event.get("kind") in SETTLING_KINDS:
            # Every local player at this table gets it, whoever placed the bet and wherever
            # (another tab, another node, a connection since closed).
            bettors = self.bettors.pop(event["round"], set())
            players = self.joined_players() | self.hub.take_deferred(self.table_id, event["round"])
            if bettors or players:
                served = players | {s.player for s in bettors if s.player is not None}
                self.hub.note_served(self.table_id, event["round"], served)
                self.hub.spawn_settlements(self.table_id, event["round"], bettors, players)

    def joined_players(self) -> set[str]:
        """The players of this feed's live subscribers (spectators have none)."""
        return {
            sub.player
            for subs in self.subscribers.values()
            for sub in subs.values()
            if sub.player is not None
        }

    def settled_rounds(self, after: int, upto: int) -> list[int]:
        """The rounds settled or voided by the cached events with after < seq <= upto (what a
        join's catch-up from this cache sent)."""
        return [
            cached.event["round"]
            for cached in self.recent
            if after < cached.event["seq"] <= upto and cached.event.get("kind") in SETTLING_KINDS
        ]

    def _cached(self, seq: int) -> _Cached | None:
        back = self.last_seq - seq  # recent holds consecutive seqs ending at last_seq
        return self.recent[-1 - back] if 0 <= back < len(self.recent) else None

    def drop_slow_subscribers(self) -> None:
        """Cut every subscriber whose unsent data passed the limit (it stopped reading)."""
        self.unchecked = 0
        for subs in self.subscribers.values():
            slow = [sub for sub in subs.values() if sub.over_buffer_limit()]
            for sub in slow:
                self.unsubscribe(sub)
                sub.drop_slow()

    def went_back(self, reason: str) -> None:
        """The history went backwards: deliver nothing more until the watchdog resets."""
        if not self.stale:
            self.stale, self.stale_reason = True, reason
            self.hub.log.warning("history_went_back", table=self.table_id, reason=reason)
        self.check_now.set()

    def rebase(self, seq: int, epoch: str) -> None:
        """Start over at the store's `seq` of history `epoch`: the cache is of another
        history (or misses a stretch), so every client of the table is asked to resync."""
        self.last_seq, self.epoch = seq, epoch
        self.recent.clear()
        self.stale, self.stale_reason = False, ""
        self.generation += 1
        self.shared = None
        everyone = [sub for subs in self.subscribers.values() for sub in subs.values()]
        everyone += [*self.waiting, *self.pending]
        for subs in self.subscribers.values():
            subs.clear()
        self.waiting.clear()
        self.pending.clear()
        for sub in dict.fromkeys(everyone):
            self._resync(sub)

    def resync_waiting(self) -> None:
        """Ask every join waiting ahead of this feed to start over from a fresh snapshot."""
        waiting = list(self.waiting)
        self.waiting.clear()
        for sub in waiting:
            self._resync(sub)

    def resolve_pending(self) -> None:
        """The store was read and agrees with this feed: attach the parked joins."""
        for sub, (seq, epoch) in list(self.pending.items()):
            del self.pending[sub]
            if (epoch is not None and epoch != self.epoch) or self._attach(sub, seq) is None:
                self._resync(sub)

    def _resync(self, sub: Subscriber) -> None:
        try:
            sub.resync(self.table_id)
        except Exception:  # one client's failure must not stop the others being told
            self.hub.log.exception("resync_failed", table=self.table_id)


class Hub:
    def __init__(
        self,
        store: Store,
        send_settlement: Callable[[Subscriber, object], None],
        metrics: Metrics | None = None,
        *,
        fanout: Fanout = websocket_fanout,
        check_interval: float = CHECK_INTERVAL_S,
        attempts: int = TASK_ATTEMPTS,
        retry_delay: float = RETRY_DELAY_S,
    ) -> None:
        self.store = store
        self.metrics = metrics or Metrics()
        self.feeds: dict[str, TableFeed] = {}
        self.fanout = fanout
        self.check_interval = check_interval
        self.attempts = attempts
        self.retry_delay = retry_delay
        self._send_settlement = send_settlement
        self._tasks: set[asyncio.Task[bool]] = set()
        self._starting: dict[str, asyncio.Future[TableFeed]] = {}
        # Every live local session of each player, joined to a table or not: a settlement
        # goes to all of them (two tabs see the same wallet).
        self.players: dict[str, set[Subscriber]] = {}
        self.log = structlog.get_logger("hub")
        self._notices: asyncio.Task[None] | None = None  # the settled notices' listener
        self.notices_live = asyncio.Event()  # set while that listener is subscribed
        self._served: OrderedDict[tuple[str, int], set[str]] = OrderedDict()  # see note_served
        self._deferred: OrderedDict[tuple[str, int], set[str]] = OrderedDict()  # see on_settled

    def subscriber_counts(self) -> dict[str, int]:
        """How many of this node's connections watch each table it follows."""
        return {table_id: feed.subscriber_count for table_id, feed in self.feeds.items()}

    # --- the players' sessions on this node ----------------------------------------------------
    def register(self, sub: Subscriber) -> None:
        if sub.player is not None:
            self.players.setdefault(sub.player, set()).add(sub)
            self.listen_for_settlements()

    def unregister(self, sub: Subscriber) -> None:
        if sub.player is None:
            return
        sessions = self.players.get(sub.player)
        if sessions is not None:
            sessions.discard(sub)
            if not sessions:
                del self.players[sub.player]

    def sessions_of(self, player: str) -> set[Subscriber]:
        return set(self.players.get(player, ()))

    async def feed(self, table_id: str) -> TableFeed:
        """The table's feed, starting its follower and watchdog on first use."""
        feed = self.feeds.get(table_id)
        if feed is not None:
            return feed
        if table_id in self._starting:
            return await self._starting[table_id]
        future: asyncio.Future[TableFeed] = asyncio.get_running_loop().create_future()
        self._starting[table_id] = future
        try:
            feed = TableFeed(self, table_id, *await self._head(table_id))
            feed.task = _table_task(self._follow(feed))
            feed.watchdog = _table_task(self._watch(feed))
            self.feeds[table_id] = feed
            future.set_result(feed)
            return feed
        except BaseException as error:
            future.set_exception(error)
            future.exception()  # mark retrieved: the caller gets it raised below
            raise
        finally:
            del self._starting[table_id]

    # --- the follower -------------------------------------------------------------------
    async def _follow(self, feed: TableFeed) -> None:
        """Follow the table's history, resuming after errors from the last seq delivered.
        Returns once the history went back: the watchdog then starts a new follower."""
        behind = failed = False
        while not feed.stale:
            try:
                if failed:
                    # The store failed (restarted, failed over): a join waiting ahead holds a
                    # snapshot this feed never saw and cannot check; it may be of data the
                    # store lost. It starts again from a snapshot of what the store holds now.
                    feed.resync_waiting()
                    failed = False
                if behind:
                    # Fell behind what the store holds: skip to now, and tell every client.
                    seq, epoch = await self._head(feed.table_id)
                    if not feed.stale:  # else the watchdog is resetting it already
                        feed.rebase(seq, epoch)
                    behind = False
                elif not await self._continues(feed):
                    feed.went_back("the store no longer holds the last event delivered")
                    return
                async for event in self.store.follow(feed.table_id, feed.last_seq):
                    feed.publish(event)
                    if feed.stale:
                        return
            except asyncio.CancelledError:
                raise
            except GapDetected as gap:
                # Fill from the stored history: the next pass resumes after the last seq
                # actually delivered, so the missing events come first.
                self.log.warning("follower_gap", table=feed.table_id, gap=str(gap))
            except LookupError:
                self.log.warning("follower_behind", table=feed.table_id, seq=feed.last_seq)
                behind = True
            except (StoreUnavailable, BetRejected) as error:  # down, or lost the table
                self.log.warning("follower_error", table=feed.table_id, error=str(error))
                self.metrics.store_error("hub")
                failed = True
                await asyncio.sleep(FOLLOWER_PAUSE_S)
            except Exception:
                self.log.exception("follower_failed", table=feed.table_id)
                failed = True
                await asyncio.sleep(FOLLOWER_PAUSE_S)

    async def _continues(self, feed: TableFeed) -> bool:
        """Whether the store still holds, at the feed's last seq, the event delivered there.
        Checked whenever the follower starts again (after Redis restarted, say): a history
        that went back and grew past that seq again would otherwise look gapless."""
        if not feed.recent:
            return True
        last = feed.recent[-1].event
        held = await self.store.events_after(feed.table_id, last["seq"] - 1, limit=1)
        return held is None or held == [last]  # None: trimmed meanwhile; follow() says so

    # --- the watchdog ----------------------------------------------------------------------
    async def _watch(self, feed: TableFeed) -> None:
        """Check the stored history every `check_interval`, or at once when asked."""
        while True:
            with contextlib.suppress(TimeoutError):
                async with asyncio.timeout(self.check_interval):
                    await feed.check_now.wait()
            feed.check_now.clear()
            try:
                await self._check(feed)
            except asyncio.CancelledError:
                raise
            except (StoreUnavailable, BetRejected) as error:  # the follower reports these
                self.log.debug("feed_check_failed", table=feed.table_id, error=str(error))
                await asyncio.sleep(self.retry_delay)
            except Exception:
                self.log.exception("feed_check_failed", table=feed.table_id)
                await asyncio.sleep(self.retry_delay)

    async def _check(self, feed: TableFeed) -> None:
        """One cheap read of the store's seq and epoch: reset the feed if the history went
        back or was replaced; otherwise attach the joins parked for this check."""
        generation, before = feed.generation, feed.last_seq
        seq, epoch = await self._head(feed.table_id)
        if generation != feed.generation:
            feed.check_now.set()  # rebased meanwhile: look again
            return
        if epoch != feed.epoch:
            reason = f"the history's epoch changed from {feed.epoch!r} to {epoch!r}"
        elif feed.stale or seq < before:
            reason = feed.stale_reason or f"the store is at seq {seq}, behind {before}"
        else:
            feed.resolve_pending()
            return
        feed.stale = True  # from here until the rebase, the old history delivers nothing
        if epoch == feed.epoch:
            epoch = await self.store.reset_epoch(feed.table_id, feed.epoch)
        log = self.log.bind(table=feed.table_id, seq_was=before, seq=seq, epoch=epoch)
        log.warning("history_reset", reason=reason)
        if feed.task is not None:
            feed.task.cancel()
            await asyncio.gather(feed.task, return_exceptions=True)
        feed.rebase(seq, epoch)
        feed.task = _table_task(self._follow(feed))

    async def _head(self, table_id: str) -> tuple[int, str]:
        """The store's seq and epoch. A table stored before histories had epochs (a node of
        an older version made it) is given one here, so clients are never sent an empty one."""
        seq, epoch = await self.store.head(table_id)
        if not epoch:
            epoch = await self.store.reset_epoch(table_id, "")
        return seq, epoch

    # --- the commit hand-off ---------------------------------------------------------------
    def offer(self, table_id: str, events: list[Event]) -> None:
        """Events this node just committed: deliver them now if they are next in line (or
        compare them with what was delivered under their seqs); otherwise the follower
        delivers them in order. Never raises into the table loop that calls it."""
        feed = self.feeds.get(table_id)
        if feed is None or not events or events[0]["seq"] > feed.last_seq + 1:
            return
        try:
            for event in events:
                feed.publish(event)
        except Exception:
            self.log.exception("offer_failed", table=table_id)

    # --- the settled notices --------------------------------------------------------------
    def listen_for_settlements(self) -> None:
        """Start this node's listener of settled notices (once; the first player session
        starts it, so a node that only ever serves spectators never subscribes)."""
        if self._notices is None:
            self._notices = _table_task(self._follow_settled())

    async def _follow_settled(self) -> None:
        """Hear every round settled or voided on any node, for as long as the hub lives:
        after a store error (Redis restarted, failed over) subscribe again, with a log line.
        Notices sent meanwhile are lost; resume and `history` still give those settlements."""
        failures = 0
        while True:
            try:
                async with self.store.settled_notices() as notices:
                    self.notices_live.set()
                    if failures:
                        self.log.info("settled_notices_resumed", failures=failures)
                        failures = 0
                    async for notice in notices:
                        self.on_settled(notice)
            except asyncio.CancelledError:
                raise
            except StoreUnavailable as error:
                self.log.warning("settled_notices_error", error=str(error))
                self.metrics.store_error("hub")
            except Exception:
                self.log.exception("settled_notices_failed")
            self.notices_live.clear()
            failures += 1
            await asyncio.sleep(FOLLOWER_PAUSE_S)

    def note_served(self, table_id: str, round_no: int, players: set[str]) -> None:
        """A feed is sending these players' settlements of the round: its notice skips them."""
        self._served.setdefault((table_id, round_no), set()).update(players)
        while len(self._served) > SERVED_ROUNDS:
            self._served.popitem(last=False)

    def on_settled(self, notice: SettledNotice) -> None:
        """Deliver a round's settlements to this node's sessions of the players paid, but
        for those a feed of the table here serves (it did already, or they are joined to it
        or bet through it, and theirs come after the round's event, in order). Only players
        with local sessions cost a store read, all of them in one."""
        served = self._served.pop((notice.table, notice.round), set())
        if not self.players:
            return
        feed = self.feeds.get(notice.table)
        bettors = feed.bettors.get(notice.round, set()) if feed is not None else set()
        wanted = []
        deferred = []
        for player in notice.players:
            sessions = self.players.get(player)
            if not sessions or player in served:
                continue
            if feed is not None and any(s in bettors or feed.is_subscribed(s) for s in sessions):
                deferred.append(player)
                continue
            wanted.append(player)
        if deferred:
            # A round settled in slices sends its notices before its event: the feed serves
            # these players after the event even if they have left the table by then.
            self._deferred.setdefault((notice.table, notice.round), set()).update(deferred)
            while len(self._deferred) > SERVED_ROUNDS:
                self._deferred.popitem(last=False)
        if wanted:
            self.spawn_settlements(notice.table, notice.round, set(), wanted)

    def take_deferred(self, table_id: str, round_no: int) -> set[str]:
        """The players a notice of the round left to the table's feed (see on_settled)."""
        return self._deferred.pop((table_id, round_no), set())

    # --- background tasks ------------------------------------------------------------------
    def spawn(
        self,
        name: str,
        make: Callable[[], Awaitable[object]],
        attempts: int | None = None,
        **context: object,
    ) -> asyncio.Task[bool]:
        """Run `make()` in the background with retries (see `retrying`)."""
        task = asyncio.create_task(self.retrying(name, make, attempts, **context))
        self._tasks.add(task)
        task.add_done_callback(self._tasks.discard)
        return task

    async def retrying(
        self,
        name: str,
        make: Callable[[], Awaitable[object]],
        attempts: int | None = None,
        **context: object,
    ) -> bool:
        """Await `make()` until it succeeds, at most `attempts` times, with a doubling pause
        in between; log each failure with its traceback. True if it succeeded."""
        attempts = attempts or self.attempts
        for attempt in range(1, attempts + 1):
            try:
                await make()
            except asyncio.CancelledError:
                raise
            except Exception:
                self.log.exception("task_failed", task=name, attempt=attempt, **context)
            else:
                return True
            if attempt < attempts:
                await asyncio.sleep(self.retry_delay * 2 ** (attempt - 1))
        self.log.error("task_gave_up", task=name, attempts=attempts, **context)
        return False

    def spawn_settlements(
        self,
        table_id: str,
        round_no: int,
        bettors: set[Subscriber],
        players: Collection[str] = (),
    ) -> None:
        self.spawn(
            "settlements",
            lambda: self.send_settlements(table_id, round_no, bettors, players),
            table=table_id,
            round=round_no,
        )

    async def send_settlements(
        self,
        table_id: str,
        round_no: int,
        bettors: set[Subscriber],
        players: Collection[str] = (),
    ) -> None:
        """Read the settlements of the local sessions that bet in the round and of `players`
        (those joined to the table), then deliver each to every live session of its player on
        this node (and to the sessions that bet), each delivery on its own: only a read can
        fail (and the whole is retried: a session sends a round's settlement once), and one
        failed delivery stops no other.

        A batch of players at a time, yielding after each: a round of 40,000 bets is too much
        to decode and encode in one turn of the loop. The first read takes a few players, each
        next one as many as make about SLICE payouts by the sizes seen so far."""
        wanted = list({s.player for s in bettors if s.player is not None} | set(players))
        batch, first = SETTLEMENTS_FIRST_READ, 0
        while first < len(wanted):
            names = wanted[first : first + batch]
            first += len(names)
            found = await self.store.settlements(table_id, round_no, names)
            payouts = 0
            for player, settlement in found.items():
                payouts += len(settlement.payouts)
                targets = self.sessions_of(player) | {s for s in bettors if s.player == player}
                for sub in targets:
                    try:
                        self._send_settlement(sub, settlement)
                    except Exception:
                        self.log.exception(
                            "settlement_not_delivered",
                            table=table_id,
                            round=round_no,
                            player=player,
                        )
            batch = max(1, min(SETTLEMENTS_READ_MAX, len(names) * SLICE // max(payouts, 1)))
            await asyncio.sleep(0)  # the memory engine's read does not yield by itself

    def unsubscribe_everywhere(self, sub: Subscriber) -> None:
        for feed in self.feeds.values():
            feed.unsubscribe(sub)

    async def close(self) -> None:
        tasks: list[asyncio.Task[None]] = []
        reads: list[asyncio.Task[SharedSnapshot | None]] = []
        for feed in self.feeds.values():
            tasks += [task for task in (feed.task, feed.watchdog) if task is not None]
            if feed.sharing is not None:
                reads.append(feed.sharing[1])
        if self._notices is not None:
            tasks.append(self._notices)
        for task in [*tasks, *reads, *self._tasks]:
            task.cancel()
        await asyncio.gather(*tasks, *reads, *self._tasks, return_exceptions=True)
