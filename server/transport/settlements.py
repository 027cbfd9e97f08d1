"""Settlement delivery on one node: who gets a round's settlements, by which path, and once.

A settlement reaches a player's sessions on this node by three paths, all here:

1. **After the round's event.** A table's feed, once it published `round_settled` or
   `round_voided`, calls `round_settled`: the settlements of the sessions that bet through it
   (`bet_placed`) and of the players joined to the table are read, sliced, and delivered to
   every local session of each player (so after the event, in order).
2. **Settled notices.** Every other session hears of the round from the store's notices (one
   listener per node, `on_settled`): a player with a bet in the round and local sessions, none
   of them at that table here, gets it read and delivered too; a node with no session of a
   notified player does nothing.
3. **Resume.** A join whose catch-up sent settling events asks for the player's settlement of
   each of those rounds (`resume`): a bet placed before a drop shows up settled after the
   reconnect.

Two paths may bring the same settlement to one session (a feed and a resume, say): `send_once`
sends each (table, round) once per session. The sessions are this module's `Recipient`s: a
player, a port, and the memo of what it was sent.

With an operator's wallet the store's notices also say when the wallet acknowledged a credit
or a cancel (a BalanceNotice): each session of the player here gets `{"type": "balance"}`,
after the round's settlement when the credit belongs to one (`on_balance`).
"""

from __future__ import annotations

import asyncio
from collections import OrderedDict
from collections.abc import Callable, Collection, Sequence
from typing import Protocol

from server.runtime.slices import SLICE
from server.store.base import SettledNotice, Settlement, StoreUnavailable
from server.store.outbox import BalanceNotice
from server.transport.feed import FeedHost, Subscriber, TableFeed
from server.transport.port import Port
from server.transport.tasks import Tasks, table_task
from server.wire import shapes
from server.wire.messages import HISTORY_MAX

__all__ = ["Deliver", "Feeds", "Recipient", "Settlements", "send_once"]

SETTLEMENTS_REMEMBERED = 256  # (table, round) pairs a session remembers having been sent
# Rounds whose settlements a feed sent, remembered until their settled notice comes (it comes
# within milliseconds, or never: pub/sub is at most once), so that notice reads them no more.
SERVED_ROUNDS = 256
# Players whose settlement a node reads at once, at first: after each read the next takes as
# many as make about SLICE payouts, so one read decodes and delivers a slice of a big round.
SETTLEMENTS_FIRST_READ = 8
SETTLEMENTS_READ_MAX = 1000
NOTICES_PAUSE_S = 0.5  # the notice listener's pause after a store error, before it listens again
# Balances acknowledged before their round's settlement reached a session here, kept to send
# right after it (the oldest forgotten first).
BALANCES_KEPT = 1024


class Recipient(Subscriber, Protocol):
    """A session that may be sent settlements."""

    @property
    def port(self) -> Port: ...

    # The (table, round) pairs sent, oldest first; None until the first (most never get one).
    settled: dict[tuple[str, int], None] | None


Deliver = Callable[[Recipient, Settlement], None]


def send_once(sub: Recipient, settlement: Settlement) -> None:
    """One settlement, once per (table, round) on this connection: two paths may bring it."""
    key = (settlement.table, settlement.round)
    if sub.settled is None:
        sub.settled = {}
    elif key in sub.settled:
        return
    sub.settled[key] = None
    if len(sub.settled) > SETTLEMENTS_REMEMBERED:
        del sub.settled[next(iter(sub.settled))]
    sub.port.send(
        shapes.settlement(
            settlement.table, settlement.round, settlement.payouts, settlement.balance
        )
    )


class Feeds(FeedHost, Protocol):
    """The hub, as settlement delivery sees it: its feeds, started on demand."""

    feeds: dict[str, TableFeed]

    async def feed(self, table_id: str) -> TableFeed: ...


class Settlements:
    """The node's settlement delivery: its sessions of each player, the bettors of each round,
    the three paths and their dedupe (see the module's docstring)."""

    def __init__(self, hub: Feeds, tasks: Tasks, deliver: Deliver = send_once) -> None:
        self.hub = hub
        self.tasks = tasks
        # Delivers one settlement to one session; looked up at each delivery (tests count).
        self.deliver = deliver
        self.log = hub.log
        # Every live local session of each player, joined to a table or not: a settlement
        # goes to all of them (two tabs see the same wallet).
        self.players: dict[str, set[Recipient]] = {}
        # (table, round) -> the local sessions that bet in it, until the round's event.
        self.bettors: dict[tuple[str, int], set[Recipient]] = {}
        self._notices: asyncio.Task[None] | None = None  # the settled notices' listener
        self.notices_live = asyncio.Event()  # set while that listener is subscribed
        self._served: OrderedDict[tuple[str, int], set[str]] = OrderedDict()  # see _note_served
        self._deferred: OrderedDict[tuple[str, int], set[str]] = OrderedDict()  # see on_settled
        # (player, table, round) -> a balance to send after that settlement (see on_balance)
        self._balances: OrderedDict[tuple[str, str, int], int] = OrderedDict()

    # --- the players' sessions on this node ----------------------------------------------
    def register(self, sub: Recipient) -> None:
        """A session opened; a player's starts the notice listener (a node that only ever
        serves spectators never subscribes)."""
        if sub.player is not None:
            self.players.setdefault(sub.player, set()).add(sub)
            if self._notices is None:
                self._notices = table_task(self._follow_settled())

    def unregister(self, sub: Recipient) -> None:
        if sub.player is None:
            return
        sessions = self.players.get(sub.player)
        if sessions is not None:
            sessions.discard(sub)
            if not sessions:
                del self.players[sub.player]

    def sessions_of(self, player: str) -> set[Recipient]:
        return set(self.players.get(player, ()))

    async def bet_placed(self, sub: Recipient, table_id: str, round_no: int) -> None:
        """`sub` had a bet accepted in the round: it gets the round's settlement after the
        round's event, even if it leaves the table meanwhile. The table's feed is started if
        this node has none yet (it sees the event); if it cannot be, the notice or `history`
        still bring the settlement."""
        if table_id not in self.hub.feeds:
            try:
                await self.hub.feed(table_id)
            except StoreUnavailable:
                self.log.warning("settlement_not_tracked", table=table_id, round=round_no)
                return
        bettors = self.bettors.get((table_id, round_no))
        if bettors is None:
            bettors = self.bettors[table_id, round_no] = set()
        bettors.add(sub)

    # --- path 1: after the round's event -------------------------------------------------
    def round_settled(self, feed: TableFeed, round_no: int) -> None:
        """The feed published the round's settling event: every local player at this table
        gets its settlement, whoever placed the bet and wherever (another tab, another node,
        a connection since closed)."""
        table_id = feed.table_id
        bettors = self.bettors.pop((table_id, round_no), set())
        players = feed.joined_players() | self._deferred.pop((table_id, round_no), set())
        if bettors or players:
            served = players | {s.player for s in bettors if s.player is not None}
            self._note_served(table_id, round_no, served)
            self._spawn_delivery(table_id, round_no, bettors, players)

    def _note_served(self, table_id: str, round_no: int, players: set[str]) -> None:
        """A feed is sending these players' settlements of the round: its notice skips them."""
        self._served.setdefault((table_id, round_no), set()).update(players)
        while len(self._served) > SERVED_ROUNDS:
            self._served.popitem(last=False)

    # --- path 2: the settled notices -----------------------------------------------------
    async def _follow_settled(self) -> None:
        """Hear every round settled or voided on any node, for as long as the hub lives:
        after a store error (Redis restarted, failed over) subscribe again, with a log line.
        Notices sent meanwhile are lost; resume and `history` still give those settlements."""
        failures = 0
        while True:
            try:
                async with self.hub.store.settled_notices() as notices:
                    self.notices_live.set()
                    if failures:
                        self.log.info("settled_notices_resumed", failures=failures)
                        failures = 0
                    async for notice in notices:
                        if isinstance(notice, BalanceNotice):
                            self.on_balance(notice)
                        else:
                            self.on_settled(notice)
            except asyncio.CancelledError:
                raise
            except StoreUnavailable as error:
                self.log.warning("settled_notices_error", error=str(error))
                self.hub.metrics.store_error("hub")
            except Exception:
                self.log.exception("settled_notices_failed")
            self.notices_live.clear()
            failures += 1
            await self.tasks.clock.sleep(NOTICES_PAUSE_S)

    def on_settled(self, notice: SettledNotice) -> None:
        """Deliver a round's settlements to this node's sessions of the players paid, but
        for those a feed of the table here serves (it did already, or they are joined to it
        or bet through it, and theirs come after the round's event, in order). Only players
        with local sessions cost a store read, all of them in one."""
        served = self._served.pop((notice.table, notice.round), set())
        if not self.players:
            return
        feed = self.hub.feeds.get(notice.table)
        bettors = self.bettors.get((notice.table, notice.round), set())
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
            self._spawn_delivery(notice.table, notice.round, set(), wanted)

    def on_balance(self, notice: BalanceNotice) -> None:
        """The wallet acknowledged a credit or cancel of the player: its sessions here get
        the balance now, or, those not yet sent the settlement the credit belongs to, right
        after it (so a settlement's older balance never shows last)."""
        sessions = self.players.get(notice.player)
        if not sessions:
            return
        key = (notice.table, notice.round)
        message = shapes.balance(notice.balance)
        for sub in sessions:
            if notice.settled and (sub.settled is None or key not in sub.settled):
                self._balances[(notice.player, *key)] = notice.balance
                while len(self._balances) > BALANCES_KEPT:
                    self._balances.popitem(last=False)
            else:
                sub.port.send(message)

    def _delivered(self, sub: Recipient, settlement: Settlement) -> None:
        """Deliver a settlement, then the balance the wallet acknowledged after it, if any."""
        self.deliver(sub, settlement)
        if self._balances and sub.player is not None:
            later = self._balances.get((sub.player, settlement.table, settlement.round))
            if later is not None:
                sub.port.send(shapes.balance(later))

    # --- path 3: resume after a catch-up -------------------------------------------------
    async def resume(self, sub: Recipient, table_id: str, rounds: Sequence[int]) -> None:
        """After a catch-up that settled rounds: the player's settlement of each (a bet placed
        before a drop shows up settled after the reconnect). The last HISTORY_MAX rounds at
        most; older ones are in `history`. A store failure here loses nothing: history has it."""
        if sub.player is None or not rounds:
            return
        try:
            for round_no in list(dict.fromkeys(rounds))[-HISTORY_MAX:]:
                found = await self.hub.store.settlement(table_id, round_no, sub.player)
                if found is not None:
                    self._delivered(sub, found)
        except StoreUnavailable:
            self.hub.metrics.store_error("session")
            self.log.warning("resume_settlements_not_sent", table=table_id)

    # --- reading and delivering ----------------------------------------------------------
    def _spawn_delivery(
        self,
        table_id: str,
        round_no: int,
        bettors: set[Recipient],
        players: Collection[str] = (),
    ) -> None:
        self.tasks.spawn(
            "settlements",
            lambda: self.send_settlements(table_id, round_no, bettors, players),
            table=table_id,
            round=round_no,
        )

    async def send_settlements(
        self,
        table_id: str,
        round_no: int,
        bettors: set[Recipient],
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
        by_player: dict[str, set[Recipient]] = {}
        for sub in bettors:  # grouped once: a round's players are many, their sessions too
            if sub.player is not None:
                by_player.setdefault(sub.player, set()).add(sub)
        wanted = list(by_player.keys() | set(players))
        batch, first = SETTLEMENTS_FIRST_READ, 0
        while first < len(wanted):
            names = wanted[first : first + batch]
            first += len(names)
            found = await self.hub.store.settlements(table_id, round_no, names)
            payouts = 0
            for player, settlement in found.items():
                payouts += len(settlement.payouts)
                self._deliver_to_all(player, settlement, by_player.get(player, set()))
            batch = max(1, min(SETTLEMENTS_READ_MAX, len(names) * SLICE // max(payouts, 1)))
            await asyncio.sleep(0)  # a yield: the memory engine's read does not yield by itself

    def _deliver_to_all(self, player: str, settlement: Settlement, bettors: set[Recipient]) -> None:
        """To every live session of the player here, and to `bettors`, its sessions that bet."""
        targets = self.sessions_of(player) | bettors
        for sub in targets:
            try:
                self._delivered(sub, settlement)
            except Exception:
                self.log.exception(
                    "settlement_not_delivered",
                    table=settlement.table,
                    round=settlement.round,
                    player=player,
                )

    def tasks_to_cancel(self) -> list[asyncio.Task[None]]:
        """The notice listener, if it was started (the hub cancels it when it closes)."""
        return [self._notices] if self._notices is not None else []
