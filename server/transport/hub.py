"""Fan-out on one node: one follower per table, each event encoded once per encoding.

The hub keeps one TableFeed per table this node serves (server/transport/feed.py) and the
loops that fill it: a follower that reads the table's event history from the store (one
reader per table per node, however many clients) and a watchdog. Events reach a feed by three
paths: the commit hand-off (`Hub.offer`: what this node's own table loops just committed), the
follower (`Hub._follow`: everything else, read from the store), and joins waiting ahead
(`TableFeed.waiting`). Settlements go out through the hub's `settlements`
(server/transport/settlements.py); background work and its retries through its `tasks`.

A history can go backwards: a Redis restarted without its last writes, or a failover to a
lagging replica, holds fewer events than the feed has delivered, and the events after that
point are written again with other content. Each feed's watchdog notices (the store's seq
below the feed's, another epoch, an event at a seq already delivered that differs, a join
whose place the feed cannot vouch for) within about a second, gives the history a new epoch
(`Store.reset_epoch`) and asks every client of the table to resync: each gets a fresh
snapshot with `recovered: false` and goes on live from it. The same happens when the follower
had to skip events it could no longer read. No client is left silently behind.

Every pause of these loops is a sleep on the node's Clock (server/runtime/clock.py).
"""

from __future__ import annotations

import asyncio
from typing import Any

import structlog

from server.core.errors import BetRejected
from server.metrics import Metrics
from server.runtime.clock import Clock, SystemClock, sleep_or_wake
from server.store.base import Event, Store, StoreUnavailable
from server.transport.feed import (
    SLOW_CHECK_EVERY,
    SNAPSHOT_REUSE_S,
    Fanout,
    GapDetected,
    Subscriber,
    TableFeed,
    websocket_fanout,
)
from server.transport.settlements import Deliver, Settlements, send_once
from server.transport.shared_snapshot import SharedSnapshot
from server.transport.tasks import RETRY_DELAY_S, TASK_ATTEMPTS, Tasks, table_task

__all__ = ["SLOW_CHECK_EVERY", "SNAPSHOT_REUSE_S", "GapDetected", "Hub", "Subscriber", "TableFeed"]

CHECK_INTERVAL_S = 1.0  # how often a feed checks that the stored history did not go back
FOLLOWER_PAUSE_S = 0.5  # the follower's pause after a store error, before it reads again


class Hub:
    def __init__(
        self,
        store: Store,
        metrics: Metrics | None = None,
        *,
        clock: Clock | None = None,
        deliver: Deliver = send_once,
        fanout: Fanout = websocket_fanout,
        check_interval: float = CHECK_INTERVAL_S,
        attempts: int = TASK_ATTEMPTS,
        retry_delay: float = RETRY_DELAY_S,
    ) -> None:
        self.store = store
        self.metrics = metrics or Metrics()
        self.clock = clock or SystemClock()
        self.feeds: dict[str, TableFeed] = {}
        self.fanout = fanout
        self.check_interval = check_interval
        self.log: Any = structlog.get_logger("hub")
        self.tasks = Tasks(self.clock, self.log, attempts, retry_delay)
        self.settlements = Settlements(self, self.tasks, deliver)
        self._starting: dict[str, asyncio.Future[TableFeed]] = {}

    def subscriber_counts(self) -> dict[str, int]:
        """How many of this node's connections watch each table it follows."""
        return {table_id: feed.subscriber_count for table_id, feed in self.feeds.items()}

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
            feed.task = table_task(self._follow(feed))
            feed.watchdog = table_task(self._watch(feed))
            self.feeds[table_id] = feed
            future.set_result(feed)
            return feed
        except BaseException as error:
            future.set_exception(error)
            future.exception()  # mark retrieved: the caller gets it raised below
            raise
        finally:
            del self._starting[table_id]

    def unsubscribe_everywhere(self, sub: Subscriber) -> None:
        for feed in self.feeds.values():
            feed.unsubscribe(sub)

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
                await self.clock.sleep(FOLLOWER_PAUSE_S)
            except Exception:
                self.log.exception("follower_failed", table=feed.table_id)
                failed = True
                await self.clock.sleep(FOLLOWER_PAUSE_S)

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
            await sleep_or_wake(self.clock, feed.check_now, self.check_interval)
            feed.check_now.clear()
            try:
                await self._check(feed)
            except asyncio.CancelledError:
                raise
            except (StoreUnavailable, BetRejected) as error:  # the follower reports these
                self.log.debug("feed_check_failed", table=feed.table_id, error=str(error))
                await self.clock.sleep(self.tasks.retry_delay)
            except Exception:
                self.log.exception("feed_check_failed", table=feed.table_id)
                await self.clock.sleep(self.tasks.retry_delay)

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
        feed.task = table_task(self._follow(feed))

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

    async def close(self) -> None:
        tasks: list[asyncio.Task[Any]] = []
        reads: list[asyncio.Task[SharedSnapshot | None]] = []
        for feed in self.feeds.values():
            tasks += [task for task in (feed.task, feed.watchdog) if task is not None]
            if feed.sharing is not None:
                reads.append(feed.sharing[1])
        tasks += self.settlements.tasks_to_cancel()
        for task in [*tasks, *reads]:
            task.cancel()
        tasks += self.tasks.cancel()
        await asyncio.gather(*tasks, *reads, return_exceptions=True)
