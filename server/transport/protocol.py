"""The protocol handler of one connection, independent of the transport that carries it.

A `PlayerSession` knows who the connection is (the Identity admitted at the handshake), the
tables it joined, its rate limits and every command. It takes decoded messages (`handle`) and
emits server messages, each built by a constructor of server/wire/shapes.py, through its
output `Port`; the port turns them into frames (server/transport/session.py is the WebSocket
port). The hub sees a PlayerSession as its Subscriber: cached event frames go straight to the
port.

Roles: a `player` has a wallet (created on first sight with the node's initial balance) and
bets; a `spectator` or an `operator` joins, watches, replays and recalls nothing: no wallet,
`welcome.balance` null, and every bet is answered `bet_rejected` with `NOT_A_PLAYER`.
"""

from __future__ import annotations

import asyncio
import contextlib
import itertools
import sys
import time
from collections import Counter
from collections.abc import AsyncIterator, Awaitable, Callable, Sequence
from dataclasses import dataclass, field
from typing import Any, Protocol

import structlog

from server.auth import Admission, AuthPolicy, Identity
from server.core.errors import BetRejected, RejectCode
from server.core.rules import TableRules
from server.metrics import Metrics
from server.store.base import Settlement, Store, StoreUnavailable
from server.transport.hub import SETTLING_KINDS, Hub, TableFeed
from server.transport.limits import ConnectionLimits, Kind, RateLimits, Verdict
from server.wire import shapes
from server.wire.codec import Encoding, Frame
from server.wire.messages import (
    HISTORY_MAX,
    Bet,
    Command,
    ErrorCode,
    ErrorReply,
    History,
    Join,
    Leave,
    Ping,
    Replay,
    echo_ref,
    parse_command,
)

__all__ = [
    "FLOOD_CLOSE_CODE",
    "STORE_CLOSE_CODE",
    "PlayerSession",
    "Port",
    "SessionContext",
    "keep_connected_guests",
]

FLOOD_CLOSE_CODE = 1008  # policy violation: keeps sending what is refused
STORE_CLOSE_CODE = 1011  # the store cannot be read: reconnect later
SETTLEMENTS_REMEMBERED = 256  # (table, round) pairs a session remembers having settled
GUEST_REFRESH_FRACTION = 4  # a connected guest is seen again every quarter of its TTL

_session_numbers = itertools.count(1)

# The rate bucket each command is charged to; a command added without one shares the pings'.
_KINDS: dict[type, Kind] = {
    Bet: Kind.BETS,
    Ping: Kind.PINGS,
    Join: Kind.JOINS,
    Leave: Kind.JOINS,
    Replay: Kind.REPLAYS,
    History: Kind.REPLAYS,
}


@dataclass(slots=True)
class SessionContext:
    """What every session on this node shares."""

    store: Store
    hub: Hub
    tables: dict[str, TableRules]
    node_id: str
    initial_balance: int = 1_000_000  # what a player seen for the first time starts with
    max_buffer_bytes: int = 1 << 20  # a client this far behind is dropped, not waited for
    limits: RateLimits = field(default_factory=RateLimits)
    max_replay_events: int = 500  # events in one replay answer; the client pages on
    metrics: Metrics = field(default_factory=Metrics)
    # Who may connect, and how long a guest's wallet lives after it was last seen.
    auth: AuthPolicy = field(default_factory=lambda: AuthPolicy.configure(None))
    max_connections_per_player: int = 0  # per node; 0: no cap
    sessions: set[Any] = field(default_factory=set)  # the transport's live sessions
    # The guests connected to this node, with their number of connections: each is kept
    # alive while it has one (keep_connected_guests), and its TTL runs from its last close.
    guests: Counter[str] = field(default_factory=Counter)
    # Failures (bugs) already logged with a traceback: later ones get one line each, so a
    # client repeating the frame that triggers a bug cannot fill the log.
    failures_logged: set[str] = field(default_factory=set)

    @property
    def guest_ttl_ms(self) -> int:
        return self.auth.guest_ttl_s * 1000


class Port(Protocol):
    """Where a PlayerSession's output goes: the transport of its connection."""

    encoding: Encoding

    @property
    def connection(self) -> object: ...

    @property
    def dropped(self) -> bool: ...

    def send(self, message: shapes.ServerMessage) -> None:
        """Encode and write one message now (dropping a client too far behind)."""

    def push_frame(self, frame: Frame) -> None: ...

    def over_buffer_limit(self) -> bool: ...

    def drop_slow(self) -> None: ...

    async def close(self, code: int, reason: str) -> None: ...


class PlayerSession:
    """One connection's protocol: identity, joins, rate limits and the commands.

    A node holds thousands of these, mostly idle spectators: the instance has slots, and
    what not every connection needs (its logger, the join lock, the settlements sent, the
    rate buckets) is made on first use and shared or dropped when it can be."""

    __slots__ = (
        "_join_lock",
        "_kept",
        "_lock_users",
        "_log",
        "_player",
        "_settled",
        "ctx",
        "identity",
        "joined",
        "limits",
        "number",
        "port",
        "token",
    )

    def __init__(self, port: Port, ctx: SessionContext, admission: Admission) -> None:
        self.port = port
        self.ctx = ctx
        self.identity: Identity = admission.identity
        # Asked on every request and by the hub: the identity never changes, so once.
        self._player = self.identity.player if self.identity.may_bet else None
        self.token = admission.token  # a guest's renewed token, for welcome.token
        self.number = next(_session_numbers)
        self.joined: tuple[str, ...] = ()  # rarely more than one table: a tuple is smallest
        # A join and a resync (see resync) never interleave; the lock exists while in use.
        self._join_lock: asyncio.Lock | None = None
        self._lock_users = 0
        self.limits = ConnectionLimits(ctx.limits)
        self._settled: dict[tuple[str, int], None] | None = None  # sent, oldest first
        self._kept = False  # counted in ctx.guests (a guest's connection, once started)
        self._log: Any = None

    @property
    def log(self) -> Any:
        """This connection's logger (conn, player), bound when it first logs."""
        if self._log is None:
            self._log = structlog.get_logger("session").bind(conn=self.number, player=self.player)
        return self._log

    @contextlib.asynccontextmanager
    async def _exclusive(self) -> AsyncIterator[None]:
        """Hold the join lock; it is dropped again once nobody holds or awaits it."""
        if self._join_lock is None:
            self._join_lock = asyncio.Lock()
        lock = self._join_lock
        self._lock_users += 1
        try:
            async with lock:
                yield
        finally:
            self._lock_users -= 1
            if not self._lock_users:
                self._join_lock = None

    @staticmethod
    def _now() -> float:
        return asyncio.get_running_loop().time()

    @property
    def role(self) -> str:
        return self.identity.role.value

    @property
    def may_bet(self) -> bool:
        return self.identity.may_bet

    # --- the hub's Subscriber protocol ---------------------------------------------------
    @property
    def player(self) -> str | None:
        """The wallet this connection plays with; None for a spectator or an operator."""
        return self._player

    @property
    def encoding(self) -> Encoding:
        return self.port.encoding

    @property
    def connection(self) -> object:
        return self.port.connection

    @property
    def dropped(self) -> bool:
        return self.port.dropped

    def push_frame(self, frame: Frame) -> None:
        self.port.push_frame(frame)

    def over_buffer_limit(self) -> bool:
        return self.port.over_buffer_limit()

    def drop_slow(self) -> None:
        self.port.drop_slow()

    def send(self, message: shapes.ServerMessage) -> None:
        self.port.send(message)

    # --- the connection's life ---------------------------------------------------------
    async def start(self) -> None:
        """Open the player's wallet (players only) and say welcome. StoreUnavailable if the
        store cannot be reached: the transport closes the connection."""
        balance = None
        if self.player is not None:
            ttl = self.ctx.guest_ttl_ms if self.identity.guest else None
            balance = await self.ctx.store.ensure_player(self.player, self.ctx.initial_balance, ttl)
            if self.identity.guest:
                self.ctx.guests[self.player] += 1
                self._kept = True
        self.ctx.hub.register(self)
        self.send(
            shapes.welcome(
                self.identity.player,
                balance,
                self.ctx.tables,
                self.encoding.value,
                self.ctx.node_id,
                self.identity.role.value,
                self.token,
                name=self.identity.name if self.identity.player is not None else None,
            )
        )

    async def stop(self) -> None:
        """The connection is gone: leave every table and the player's sessions. A guest's
        last connection on this node is its last sighting here: its TTL runs from now."""
        self.joined = ()  # a resync still under way must not subscribe it again
        self.ctx.hub.unsubscribe_everywhere(self)
        self.ctx.hub.unregister(self)
        if not self._kept or self.player is None:
            return
        self._kept = False
        self.ctx.guests[self.player] -= 1
        if self.ctx.guests[self.player] > 0:
            return
        del self.ctx.guests[self.player]
        try:
            await self.ctx.store.keep_guests([self.player])
        except StoreUnavailable as error:  # it expires from its last refresh instead, at most
            self.log.warning("guest_keep_failed", error=str(error))  # a quarter TTL earlier

    async def handle(self, message: object) -> bool:
        """One decoded message; False when the connection is to be closed (already asked)."""
        ref = echo_ref(message)
        try:
            command = parse_command(message)
        except ErrorReply as error:  # malformed: a refusal, like a request over its rate
            self.send(shapes.error(error.code, error.message, ref))
            return await self._refused(self.limits.refuse(self._now()))
        verdict = self.limits.check(_KINDS.get(type(command), Kind.PINGS), self._now())
        if verdict is not Verdict.ALLOWED:
            self._rate_limited(command, ref)
            return await self._refused(verdict)
        try:
            await self._dispatch(command)
        except ErrorReply as error:
            self.send(shapes.error(error.code, error.message, ref))
        except StoreUnavailable:
            self.ctx.metrics.store_error("session")
            self.send(shapes.error(ErrorCode.UNAVAILABLE, "storage is unavailable; retry", ref))
        except Exception as error:  # a bug must not take the connection, the table or the node
            self._log_failure(error)
            self.send(
                shapes.error(ErrorCode.INTERNAL, "the server could not handle this message", ref)
            )
        return True

    def _rate_limited(self, command: Command, ref: str | int | None) -> None:
        message = "too many requests of this kind; slow down"
        self.ctx.metrics.rate_limit_hit(_KINDS.get(type(command), Kind.PINGS).value)
        if isinstance(command, Bet):
            self._reject(command, RejectCode.RATE_LIMITED, message)
        else:
            self.send(shapes.error(ErrorCode.RATE_LIMITED, message, ref))

    async def _refused(self, verdict: Verdict) -> bool:
        """After a refusal: go on, or close a connection that keeps flooding."""
        if verdict is not Verdict.FLOODING:
            return True
        self.log.warning("flooding_client_closed")
        await self.port.close(FLOOD_CLOSE_CODE, "too many refused requests")
        return False

    def _log_failure(self, error: Exception) -> None:
        key = _failure_key(error)
        if key in self.ctx.failures_logged:
            self.log.error("command_failed", error=repr(error)[:200], repeated=True)
            return
        self.ctx.failures_logged.add(key)
        self.log.error("command_failed", exc_info=error)

    async def _dispatch(self, command: Command) -> None:
        self.ctx.metrics.message_in(type(command).__name__.lower())
        if isinstance(command, Bet):
            started = time.perf_counter()
            try:
                await self._bet(command)
            finally:
                self.ctx.metrics.bet_took(time.perf_counter() - started)
        elif isinstance(command, Join):
            await self._join(command)
        elif isinstance(command, Leave):
            self._leave(command)
        elif isinstance(command, Replay):
            await self._replay(command)
        elif isinstance(command, History):
            await self._history(command)
        elif isinstance(command, Ping):
            ref = command.ref if isinstance(command.ref, str | int) else None
            self.send(shapes.pong(ref, await self.ctx.store.now_ms()))

    def _known_table(self, table_id: str) -> None:
        if table_id not in self.ctx.tables:
            raise ErrorReply(ErrorCode.UNKNOWN_TABLE, f"no table {table_id!r}")

    # --- commands -------------------------------------------------------------------------
    async def _bet(self, bet: Bet) -> None:
        if self.player is None:
            message = f"only players bet; this connection's role is {self.role}"
            self._reject(bet, RejectCode.NOT_A_PLAYER, message)
            return
        try:
            self._known_table(bet.table)
            receipt = await self.ctx.store.place_bet(
                bet.table, self.player, bet.round, bet.bet_id, bet.spot, bet.amount
            )
        except ErrorReply as error:
            self._reject(bet, RejectCode.UNKNOWN_TABLE, error.message)
            return
        except BetRejected as rejected:
            self._reject(bet, rejected.code, rejected.message)
            return
        except StoreUnavailable:
            self.ctx.metrics.store_error("session")
            self._reject(bet, RejectCode.UNAVAILABLE, "storage is unavailable; retry later")
            return
        # First: the bet stands whatever happens below.
        self.send(
            shapes.bet_accepted(
                receipt.table,
                receipt.round,
                receipt.bet_id,
                receipt.spot,
                receipt.amount,
                receipt.balance,
            )
        )
        self.ctx.metrics.bet_answered("ACCEPTED")
        feed = self.ctx.hub.feeds.get(bet.table)  # started by now, but for the first bets
        if feed is None:
            try:
                feed = await self.ctx.hub.feed(bet.table)
            except StoreUnavailable:
                self.log.warning("settlement_not_tracked", table=bet.table, round=receipt.round)
                return
        bettors = feed.bettors.get(receipt.round)
        if bettors is None:
            bettors = feed.bettors[receipt.round] = set()
        bettors.add(self)

    def _reject(self, bet: Bet, code: RejectCode, message: str) -> None:
        self.ctx.metrics.bet_answered(code.value)
        self.send(shapes.bet_rejected(bet.bet_id, bet.table, code.value, message))

    async def _join(self, join: Join) -> None:
        async with self._exclusive():  # never interleaved with a resync of this session
            settled = await self._join_unlocked(join)
        await self._resume(join.table, settled)

    async def _join_unlocked(self, join: Join) -> list[int]:
        self._known_table(join.table)
        feed = await self.ctx.hub.feed(join.table)
        was_live = feed.is_subscribed(self)
        resume = feed.last_seq  # everything up to here was already sent to a live subscriber
        feed.unsubscribe(self)
        try:
            settled = await self._catch_up(join, feed)
        except Exception:
            if was_live:  # a failed re-join leaves the earlier subscription as it was
                feed.subscribe_after(self, resume)
            raise
        if join.table not in self.joined:
            self.joined += (sys.intern(join.table),)  # not the message's copy of the id
        return settled

    async def _catch_up(
        self, join: Join, feed: TableFeed, recovered: bool | None = None
    ) -> list[int]:
        """Snapshot or missed events, then `joined`; returns the rounds settled or voided by
        the events sent (the player's settlements of those follow: see _resume)."""
        after, epoch, from_store = join.since, join.epoch, False
        settled: list[int] = []
        if after is not None:
            last, current = await self.ctx.store.head(join.table)
            # A seq this table never reached (e.g. from before a memory server restarted), or
            # one of another history (the client's epoch is not the current one): nothing to
            # catch up from, so start over from a fresh state.
            if after > last or (epoch is not None and epoch != current):
                after, recovered = None, False
            epoch = current
        if after is None:
            after, epoch, from_store = await self._send_snapshot(feed, recovered)
        # The feed checks that `after` is a place in its own history (epoch; not behind it
        # when read from the store), so a snapshot is never followed by another history.
        while (live_from := feed.subscribe_after(self, after, epoch, from_store)) is None:
            missed = await self.ctx.store.events_after(join.table, after)
            if missed is None:  # no longer held: start again from a fresh snapshot
                after, epoch, from_store = await self._send_snapshot(feed, recovered=False)
                settled.clear()
                continue
            for event in missed:
                self.send(event)
                if event.get("kind") in SETTLING_KINDS:
                    settled.append(event["round"])
                after = event["seq"]
            from_store = True
        settled += feed.settled_rounds(after, live_from)
        assert epoch is not None  # the store's, or the snapshot's
        # Sent right after the catch-up and before any live event: from here the table's
        # events follow without a gap.
        self.send(shapes.joined(join.table, live_from, epoch))
        return settled

    async def _resume(self, table_id: str, rounds: Sequence[int]) -> None:
        """After a catch-up that settled rounds: the player's settlement of each (a bet placed
        before a drop shows up settled after the reconnect). The last HISTORY_MAX rounds at
        most; older ones are in `history`. A store failure here loses nothing: history has it."""
        if self.player is None or not rounds:
            return
        try:
            for round_no in list(dict.fromkeys(rounds))[-HISTORY_MAX:]:
                found = await self.ctx.store.settlement(table_id, round_no, self.player)
                if found is not None:
                    self.send_settlement(found)
        except StoreUnavailable:
            self.ctx.metrics.store_error("session")
            self.log.warning("resume_settlements_not_sent", table=table_id)

    async def _send_snapshot(
        self, feed: TableFeed, recovered: bool | None
    ) -> tuple[int, str, bool]:
        """Send a snapshot of the feed's table; return its seq, its history's epoch and
        whether it is a fresh store read the feed must check (`from_store`). A spectator's is
        the one spectators share (a few store reads for a burst of joins); a player's is
        read for it: its bets and balance are its own."""
        table_id = feed.table_id
        if self.player is None:
            shared = await feed.spectator_snapshot()
            if shared is None:
                raise ErrorReply(ErrorCode.UNKNOWN_TABLE, f"no table {table_id!r}")
            self.send(shared.message(recovered))
            return shared.seq, shared.epoch, not shared.vouched
        snap = await self.ctx.store.snapshot(table_id, self.player)
        if snap is None:
            raise ErrorReply(ErrorCode.UNKNOWN_TABLE, f"no table {table_id!r}")
        now = await self.ctx.store.now_ms()
        balance = await self.ctx.store.balance(self.player)
        self.send(
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

    def _leave(self, leave: Leave) -> None:
        self._known_table(leave.table)
        feed = self.ctx.hub.feeds.get(leave.table)
        if feed is not None:
            feed.unsubscribe(self)
        self.joined = tuple(t for t in self.joined if t != leave.table)
        self.send(shapes.left(leave.table))

    async def _replay(self, replay: Replay) -> None:
        self._known_table(replay.table)
        events = await self.ctx.store.round_events(replay.table, replay.round)
        if events is None:
            raise ErrorReply(ErrorCode.NOT_HELD, f"round {replay.round} is not held for replay")
        if replay.after is not None:
            events = [e for e in events if e["seq"] > replay.after]
        # One answer is bounded whatever the round holds; `more` says to ask again with
        # `after` set to the last seq received.
        page = events[: self.ctx.max_replay_events]
        self.send(
            shapes.replay(
                replay.table,
                replay.round,
                page,
                more=len(events) > len(page),
            )
        )

    async def _history(self, command: History) -> None:
        """Game recall: the player's last rounds, newest first. A spectator or an operator has
        no rounds of its own: an empty list."""
        if command.table is not None:
            self._known_table(command.table)
        records: list[dict[str, Any]] = []
        if self.player is not None:
            records = await self.ctx.store.history(self.player, command.table, command.limit)
        self.send(shapes.history([shapes.recalled_round(record) for record in records]))

    def send_settlement(self, settlement: Settlement) -> None:
        """One settlement, once per (table, round) on this connection: the hub and a resume
        may both bring it."""
        key = (settlement.table, settlement.round)
        if self._settled is None:
            self._settled = {}
        elif key in self._settled:
            return
        self._settled[key] = None
        if len(self._settled) > SETTLEMENTS_REMEMBERED:
            del self._settled[next(iter(self._settled))]
        self.send(
            shapes.settlement(
                settlement.table, settlement.round, settlement.payouts, settlement.balance
            )
        )

    # --- resync: the hub lost this session's place in a table's history --------------------
    def resync(self, table_id: str) -> None:
        """The Subscriber hook. The table's history went back (a Redis that lost writes) or
        its feed skipped events: this session is no longer subscribed. It gets a fresh
        snapshot (`recovered: false`, the new epoch), then `joined` and the live events, as
        a join would. If the store cannot be read meanwhile, the connection is closed (1011)
        rather than left silently unsubscribed."""
        if not self.dropped:
            self.ctx.hub.spawn("resync", lambda: self._resync_or_close(table_id), 1, table=table_id)

    async def _resync_or_close(self, table_id: str) -> None:
        hub = self.ctx.hub
        if not await hub.retrying("resync", lambda: self._resync(table_id), table=table_id):
            await self.port.close(STORE_CLOSE_CODE, "could not resync the table; reconnect")

    async def _resync(self, table_id: str) -> None:
        async with self._exclusive():
            if table_id not in self.joined or self.dropped:
                return  # left the table, or the connection, meanwhile
            feed = await self.ctx.hub.feed(table_id)
            feed.unsubscribe(self)
            await self._catch_up(Join(table_id, None), feed, recovered=False)
            if table_id not in self.joined:  # the connection closed during the catch-up
                feed.unsubscribe(self)


async def keep_connected_guests(
    ctx: SessionContext, sleep: Callable[[float], Awaitable[None]] = asyncio.sleep
) -> None:
    """A live connection keeps its guest, whatever it sends: a guest who only watches sends
    nothing (websockets answers its keepalive pings below this layer), yet its wallet must
    not be swept while it is connected. Every quarter of the TTL the guests connected to this
    node are seen again, in one store call; a guest's last close is seen by its session
    (PlayerSession.stop). If this node dies, its guests expire a TTL after its last refresh."""
    log = structlog.get_logger("session")
    while True:
        await sleep(ctx.guest_ttl_ms / 1000 / GUEST_REFRESH_FRACTION)
        if not ctx.guests:
            continue
        try:
            await ctx.store.keep_guests(list(ctx.guests))
        except StoreUnavailable as error:  # tried again at the next refresh
            log.warning("guest_keep_failed", guests=len(ctx.guests), error=str(error))
        except Exception:  # a bug must not end the refreshes for good
            log.exception("guest_keep_failed", guests=len(ctx.guests))


def _failure_key(error: Exception) -> str:
    """The exception's type and the line that raised it: one traceback per distinct bug."""
    where = error.__traceback__
    while where is not None and where.tb_next is not None:
        where = where.tb_next
    place = f"{where.tb_frame.f_code.co_filename}:{where.tb_lineno}" if where else "?"
    return f"{type(error).__name__}@{place}"


def push_settlement(sub: object, settlement: object) -> None:
    """The hub's callback: deliver a settlement to a session of its player on this node."""
    assert isinstance(sub, PlayerSession)
    assert isinstance(settlement, Settlement)
    sub.send_settlement(settlement)
