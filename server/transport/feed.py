"""One table's fan-out on one node: its recent events encoded once per encoding, its subscribers.

A TableFeed hands the same encoded bytes to every subscriber with websockets' `broadcast`. It
keeps the most recent events encoded, so a client joining or reconnecting is caught up
synchronously and then subscribed, with no await in between: no gap, no duplicate. The hub
(server/transport/hub.py) starts a feed's follower and watchdog and hands it events; a join
(server/transport/joins.py) subscribes through `subscribe_after`; after a round's
`round_settled` or `round_voided` the feed tells its host's settlement delivery
(server/transport/settlements.py), which sends the players' settlements after the event.

Events reach a feed by three paths: the commit hand-off (`Hub.offer`), the follower (everything
else, read from the store) and joins waiting ahead (`TableFeed.waiting`: a client whose
snapshot is newer than the feed, subscribed when the feed gets there).
"""

from __future__ import annotations

import asyncio
import contextvars
from collections import deque
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any, Protocol

from websockets.asyncio.server import broadcast

from server.metrics import Metrics
from server.store.base import Event, Store
from server.transport.port import Sink
from server.transport.shared_snapshot import SharedSnapshot
from server.wire.codec import Encoding, Frame, encode

__all__ = [
    "SETTLING_KINDS",
    "SLOW_CHECK_EVERY",
    "SNAPSHOT_REUSE_S",
    "Fanout",
    "FeedHost",
    "GapDetected",
    "RoundSettled",
    "Subscriber",
    "TableFeed",
    "websocket_fanout",
]

RECENT_EVENTS = 4096  # encoded events kept per table for catch-up without a store read
SETTLING_KINDS = ("round_settled", "round_voided")  # events after which players get settlements
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
    """What a feed needs of a client session: its connection, whose it is, and the way back
    in when the feed loses its place."""

    @property
    def port(self) -> Sink: ...

    @property
    def player(self) -> str | None:
        """Whose settlements it gets: None for a spectator or an operator."""

    def resync(self, table_id: str) -> None:
        """The feed lost this subscriber's place in the table's history (the history went
        back, or the feed skipped events): it is no longer subscribed and must start over
        from a fresh snapshot. Must not block or raise: start the work and return."""


Fanout = Callable[[dict[object, Subscriber], Frame], None]


class RoundSettled(Protocol):
    """Who hears that a round's settling event was published (settlement delivery)."""

    def round_settled(self, feed: TableFeed, round_no: int) -> None: ...


class FeedHost(Protocol):
    """What a feed takes from the hub that owns it."""

    store: Store
    metrics: Metrics
    fanout: Fanout
    log: Any

    @property
    def settlements(self) -> RoundSettled: ...


def websocket_fanout(subs: dict[object, Subscriber], frame: Frame) -> None:
    """One frame to many WebSocket connections, written without awaiting any of them."""
    broadcast(subs.keys(), frame)  # type: ignore[arg-type]


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
    def __init__(self, hub: FeedHost, table_id: str, last_seq: int, epoch: str = "") -> None:
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
        port = sub.port
        for cached in self.recent:
            if cached.event["seq"] > seq:
                port.push_frame(cached.frame(port.encoding))
                self.hub.metrics.message_out("event")
        self.subscribers[port.encoding][port.connection] = sub
        return self.last_seq

    def is_subscribed(self, sub: Subscriber) -> bool:
        return (
            sub.port.connection in self.subscribers[sub.port.encoding]
            or sub in self.waiting
            or sub in self.pending
        )

    def unsubscribe(self, sub: Subscriber) -> None:
        self.subscribers[sub.port.encoding].pop(sub.port.connection, None)
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
        for sub, after in list(self.waiting.items()) if self.waiting else ():
            if after <= seq:
                del self.waiting[sub]
                if self._attach(sub, after) is None:
                    self._resync(sub)  # its place is no longer cached: never drop it silently
        if event.get("kind") in SETTLING_KINDS:
            self.hub.settlements.round_settled(self, event["round"])

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
            slow = [sub for sub in subs.values() if sub.port.over_buffer_limit()]
            for sub in slow:
                self.unsubscribe(sub)
                sub.port.drop_slow()

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
