"""Fan-out on one node: one follower per table, each event encoded once per encoding.

A TableFeed follows its table's event history from the store (one reader per table per node,
however many clients) and hands the same encoded bytes to every subscriber with websockets'
`broadcast`. It keeps the most recent events encoded, so a client joining or reconnecting is
caught up synchronously and then subscribed, with no await in between: no gap, no duplicate.
"""

from __future__ import annotations

import asyncio
from collections import deque
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Protocol

import structlog
from websockets.asyncio.server import broadcast

from server.metrics import Metrics
from server.store.base import Event, Store
from server.wire.codec import Encoding, Frame, encode

__all__ = ["GapDetected", "Hub", "Subscriber", "TableFeed"]

RECENT_EVENTS = 4096  # encoded events kept per table for catch-up without a store read


class GapDetected(Exception):
    """An event arrived whose seq is not the next one: the missing ones must come first."""


class Subscriber(Protocol):
    """What the hub needs of a client session."""

    encoding: Encoding
    player: str

    @property
    def connection(self) -> object: ...

    def push_frame(self, frame: Frame) -> None: ...

    def over_buffer_limit(self) -> bool: ...

    def drop_slow(self) -> None: ...


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
    def __init__(self, hub: Hub, table_id: str, last_seq: int) -> None:
        self.hub = hub
        self.table_id = table_id
        self.last_seq = last_seq
        self.recent: deque[_Cached] = deque(maxlen=RECENT_EVENTS)
        self.subscribers: dict[Encoding, dict[object, Subscriber]] = {e: {} for e in Encoding}
        self.waiting: dict[Subscriber, int] = {}  # joined ahead of this feed: seq to wait for
        self.bettors: dict[int, set[Subscriber]] = {}  # round -> local sessions that bet in it
        self.task: asyncio.Task[None] | None = None
        self.delivered = 0

    @property
    def subscriber_count(self) -> int:
        return sum(len(subs) for subs in self.subscribers.values())

    def can_serve_after(self, seq: int) -> bool:
        first = self.recent[0].event["seq"] if self.recent else self.last_seq + 1
        return first - 1 <= seq <= self.last_seq

    def subscribe_after(self, sub: Subscriber, seq: int) -> int | None:
        """Send the cached events after `seq` and subscribe, atomically; return the last seq
        sent. None if the cache does not reach back to `seq` (the caller reads the store)."""
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
        return sub.connection in self.subscribers[sub.encoding] or sub in self.waiting

    def unsubscribe(self, sub: Subscriber) -> None:
        self.subscribers[sub.encoding].pop(sub.connection, None)
        self.waiting.pop(sub, None)

    def publish(self, event: Event) -> None:
        seq = event["seq"]
        if seq <= self.last_seq:
            return  # already delivered (a follower restart can repeat)
        if seq != self.last_seq + 1:
            raise GapDetected(f"{self.table_id}: expected seq {self.last_seq + 1}, got {seq}")
        cached = _Cached(event)
        self.recent.append(cached)
        self.last_seq = seq
        for encoding, subs in self.subscribers.items():
            if subs:
                self._broadcast(subs, cached.frame(encoding))
        self.hub.metrics.event_written(event["ts"], self.subscriber_count)
        for sub, after in list(self.waiting.items()):
            if after <= seq:
                del self.waiting[sub]
                self.subscribe_after(sub, after)
        if event.get("kind") in ("round_settled", "round_voided"):
            bettors = self.bettors.pop(event["round"], set())
            if bettors:
                self.hub.spawn(self.hub.send_settlements(self.table_id, event["round"], bettors))

    def _broadcast(self, subs: dict[object, Subscriber], frame: Frame) -> None:
        slow = [sub for sub in subs.values() if sub.over_buffer_limit()]
        for sub in slow:
            self.unsubscribe(sub)
            sub.drop_slow()
        broadcast(subs.keys(), frame)  # type: ignore[arg-type]
        self.delivered += len(subs)


class Hub:
    def __init__(
        self,
        store: Store,
        send_settlement: Callable[[Subscriber, object], None],
        metrics: Metrics | None = None,
    ):
        self.store = store
        self.metrics = metrics or Metrics()
        self.feeds: dict[str, TableFeed] = {}
        self._send_settlement = send_settlement
        self._tasks: set[asyncio.Task[None]] = set()
        self._starting: dict[str, asyncio.Future[TableFeed]] = {}
        self.log = structlog.get_logger("hub")

    async def feed(self, table_id: str) -> TableFeed:
        """The table's feed, starting its follower on first use."""
        feed = self.feeds.get(table_id)
        if feed is not None:
            return feed
        if table_id in self._starting:
            return await self._starting[table_id]
        future: asyncio.Future[TableFeed] = asyncio.get_running_loop().create_future()
        self._starting[table_id] = future
        try:
            feed = TableFeed(self, table_id, await self.store.last_seq(table_id))
            feed.task = asyncio.create_task(self._follow(feed))
            self.feeds[table_id] = feed
            future.set_result(feed)
            return feed
        except BaseException as error:
            future.set_exception(error)
            future.exception()  # mark retrieved: the caller gets it raised below
            raise
        finally:
            del self._starting[table_id]

    async def _follow(self, feed: TableFeed) -> None:
        """Follow the table's history forever, resuming after errors from the last seq seen."""
        while True:
            try:
                async for event in self.store.follow(feed.table_id, feed.last_seq):
                    feed.publish(event)
            except asyncio.CancelledError:
                raise
            except GapDetected as gap:
                # Fill from the stored history: the next pass resumes after the last seq
                # actually delivered, so the missing events come first.
                self.log.warning("follower_gap", table=feed.table_id, gap=str(gap))
            except LookupError:
                # Fell behind what the store holds: skip to now; clients see the jump in seq
                # and rejoin with `since`, getting a snapshot.
                self.log.warning("follower_behind", table=feed.table_id)
                feed.last_seq = await self.store.last_seq(feed.table_id)
                feed.recent.clear()
            except Exception as error:
                self.log.warning("follower_error", table=feed.table_id, error=str(error))
                self.metrics.store_error("hub")
                await asyncio.sleep(0.5)

    def offer(self, table_id: str, events: list[Event]) -> None:
        """Events this node just committed: deliver them now if they are next in line;
        otherwise the follower delivers them in order."""
        feed = self.feeds.get(table_id)
        if feed is not None and events and events[0]["seq"] == feed.last_seq + 1:
            for event in events:
                feed.publish(event)

    def spawn(self, coro: object) -> None:
        task = asyncio.ensure_future(coro)  # type: ignore[call-overload]
        self._tasks.add(task)
        task.add_done_callback(self._tasks.discard)

    async def send_settlements(
        self, table_id: str, round_no: int, bettors: set[Subscriber]
    ) -> None:
        for sub in bettors:
            settlement = await self.store.settlement(table_id, round_no, sub.player)
            if settlement is not None:
                self._send_settlement(sub, settlement)

    def unsubscribe_everywhere(self, sub: Subscriber) -> None:
        for feed in self.feeds.values():
            feed.unsubscribe(sub)

    async def close(self) -> None:
        for feed in self.feeds.values():
            if feed.task is not None:
                feed.task.cancel()
        for task in list(self._tasks):
            task.cancel()
        tasks = [f.task for f in self.feeds.values() if f.task] + list(self._tasks)
        await asyncio.gather(*tasks, return_exceptions=True)
