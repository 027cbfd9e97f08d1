"""One client connection: guest identity, command dispatch, and everything sent to it.

Every frame to the client goes through `push_frame`, a synchronous write (websockets'
`broadcast` to one connection), so direct answers and table events keep one order.

Frames are handled one at a time, and the handler yields to the event loop after each, so a
client flooding frames gets its turn like every other connection and cannot starve them; its
requests are also rate-limited per kind (see limits.py).
"""

from __future__ import annotations

import asyncio
import itertools
import secrets
from dataclasses import dataclass, field
from typing import Any

import structlog
from websockets.asyncio.server import ServerConnection, broadcast
from websockets.exceptions import ConnectionClosed

from server.core.errors import BetRejected, RejectCode
from server.core.roads import build_roads
from server.core.rules import TableRules
from server.metrics import Metrics
from server.store.base import Settlement, Store, StoreUnavailable
from server.transport.hub import Hub, TableFeed
from server.transport.limits import ConnectionLimits, Kind, RateLimits, Verdict
from server.wire.codec import Encoding, Frame, Undecodable, Unencodable, decode, encode
from server.wire.messages import (
    Bet,
    Command,
    ErrorCode,
    ErrorReply,
    Join,
    Leave,
    Ping,
    Replay,
    echo_ref,
    error_message,
    parse_command,
)

__all__ = ["Session", "SessionContext"]

_session_numbers = itertools.count(1)

# The rate bucket each command is charged to.
_KINDS: dict[type, Kind] = {
    Bet: Kind.BETS,
    Ping: Kind.PINGS,
    Join: Kind.JOINS,
    Leave: Kind.JOINS,
    Replay: Kind.REPLAYS,
}
FLOOD_CLOSE_CODE = 1008  # policy violation


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
    sessions: set[Session] = field(default_factory=set)
    # Failures (bugs) already logged with a traceback: later ones get one line each, so a
    # client repeating the frame that triggers a bug cannot fill the log.
    failures_logged: set[str] = field(default_factory=set)


class Session:
    def __init__(self, ws: ServerConnection, ctx: SessionContext) -> None:
        self.ws = ws
        self.ctx = ctx
        self.encoding = Encoding(ws.subprotocol) if ws.subprotocol else Encoding.MSGPACK
        self.player = "guest-" + secrets.token_hex(6)
        self.number = next(_session_numbers)
        self.joined: set[str] = set()
        self.dropped = False
        self._join_lock = asyncio.Lock()  # a join and a resync (see resync) never interleave
        self.limits = ConnectionLimits(ctx.limits, self._now())
        self.log = structlog.get_logger("session").bind(conn=self.number, player=self.player)

    @staticmethod
    def _now() -> float:
        return asyncio.get_running_loop().time()

    # --- the Subscriber protocol --------------------------------------------------------
    @property
    def connection(self) -> object:
        return self.ws

    def push_frame(self, frame: Frame) -> None:
        broadcast([self.ws], frame)

    def push(self, message: dict[str, Any]) -> None:
        if self.dropped:
            return
        if self.over_buffer_limit():  # asks (pings, replays) but never reads: drop it too
            self.ctx.hub.unsubscribe_everywhere(self)
            self.drop_slow()
            return
        try:
            self.push_frame(encode(message, self.encoding))
            self.ctx.metrics.message_out(message["type"])
        except Unencodable as error:  # a bug (client strings are checked at parsing)
            self.log.error("unsendable_message", type=message.get("type"), error=str(error))
            if message.get("type") != "error":
                self.push(
                    error_message(ErrorCode.INTERNAL, "the server could not encode its answer")
                )

    def over_buffer_limit(self) -> bool:
        transport = self.ws.transport
        return (
            transport is not None and transport.get_write_buffer_size() > self.ctx.max_buffer_bytes
        )

    def drop_slow(self) -> None:
        if self.dropped:
            return
        self.dropped = True  # stop serving frames it already sent: nobody will read answers
        self.ctx.metrics.slow_client_dropped()
        self.log.warning("slow_client_dropped")
        # Not ws.close(): its closing handshake first waits for the send buffer to drain,
        # which a stalled client never lets happen. Cut the connection; unsent data is dropped.
        self.ws.transport.abort()

    # --- the connection's life ----------------------------------------------------------
    async def serve(self) -> None:
        # One task per connection: every log line it causes names the connection.
        structlog.contextvars.bind_contextvars(conn=self.number, player=self.player)
        self.ctx.sessions.add(self)
        try:
            balance = await self.ctx.store.ensure_player(self.player, self.ctx.initial_balance)
            self.push(self._welcome(balance))
            async for frame in self.ws:
                if self.dropped or not await self._handle_frame(frame):
                    break
                # A queued frame is returned without a pause: yield, so a connection flooding
                # frames takes turns with the others instead of holding the loop.
                await asyncio.sleep(0)
        except ConnectionClosed:
            pass
        except StoreUnavailable:
            self.ctx.metrics.store_error("session")
            await self.ws.close(1011, "store unavailable; reconnect later")
        finally:
            self.joined.clear()  # a resync still under way must not subscribe it again
            self.ctx.hub.unsubscribe_everywhere(self)
            self.ctx.sessions.discard(self)

    def _welcome(self, balance: int) -> dict[str, Any]:
        tables = [
            {"id": table_id, **rules.to_dict()} for table_id, rules in self.ctx.tables.items()
        ]
        return {
            "type": "welcome",
            "player": self.player,
            "balance": balance,
            "tables": tables,
            "encoding": self.encoding.value,
            "node": self.ctx.node_id,
        }

    async def _handle_frame(self, frame: Frame) -> bool:
        try:
            message = decode(frame)
        except Undecodable as error:
            await self.ws.close(1003, str(error)[:120])
            return False
        ref = echo_ref(message)
        try:
            command = parse_command(message)
        except ErrorReply as error:  # malformed: a refusal, like a request over its rate
            self.push(error_message(error.code, error.message, ref))
            return await self._refused(self.limits.refuse(self._now()))
        # A command type added without a limit of its own shares the pings' bucket.
        verdict = self.limits.check(_KINDS.get(type(command), Kind.PINGS), self._now())
        if verdict is not Verdict.ALLOWED:
            self._rate_limited(command, ref)
            return await self._refused(verdict)
        try:
            await self._dispatch(command)
        except ErrorReply as error:
            self.push(error_message(error.code, error.message, ref))
        except StoreUnavailable:
            self.ctx.metrics.store_error("session")
            self.push(error_message(ErrorCode.UNAVAILABLE, "storage is unavailable; retry", ref))
        except Exception as error:  # a bug must not take the connection, the table or the node
            self._log_failure(error)
            self.push(
                error_message(ErrorCode.INTERNAL, "the server could not handle this message", ref)
            )
        return True

    def _rate_limited(self, command: Command, ref: object) -> None:
        message = "too many requests of this kind; slow down"
        self.ctx.metrics.rate_limit_hit(_KINDS.get(type(command), Kind.PINGS).value)
        if isinstance(command, Bet):
            self._reject(command, RejectCode.RATE_LIMITED, message)
        else:
            self.push(error_message(ErrorCode.RATE_LIMITED, message, ref))

    async def _refused(self, verdict: Verdict) -> bool:
        """After a refusal: go on, or close a connection that keeps flooding."""
        if verdict is not Verdict.FLOODING:
            return True
        self.log.warning("flooding_client_closed")
        await self.ws.close(FLOOD_CLOSE_CODE, "too many refused requests")
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
            with self.ctx.metrics.timing_bet():
                await self._bet(command)
        elif isinstance(command, Join):
            await self._join(command)
        elif isinstance(command, Leave):
            self._leave(command)
        elif isinstance(command, Replay):
            await self._replay(command)
        elif isinstance(command, Ping):
            self.push({"type": "pong", "ref": command.ref, "ts": await self.ctx.store.now_ms()})

    def _known_table(self, table_id: str) -> None:
        if table_id not in self.ctx.tables:
            raise ErrorReply(ErrorCode.UNKNOWN_TABLE, f"no table {table_id!r}")

    # --- commands -------------------------------------------------------------------------
    async def _bet(self, bet: Bet) -> None:
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
        self.push(receipt.to_message())  # first: the bet stands whatever happens below
        self.ctx.metrics.bet_answered("ACCEPTED")
        try:
            feed = await self.ctx.hub.feed(bet.table)
        except StoreUnavailable:
            self.log.warning("settlement_not_tracked", table=bet.table, round=receipt.round)
            return
        feed.bettors.setdefault(receipt.round, set()).add(self)

    def _reject(self, bet: Bet, code: RejectCode, message: str) -> None:
        self.ctx.metrics.bet_answered(code.value)
        self.push(
            {
                "type": "bet_rejected",
                "bet_id": bet.bet_id,
                "table": bet.table,
                "code": code.value,
                "message": message,
            }
        )

    async def _join(self, join: Join) -> None:
        async with self._join_lock:  # never interleaved with a resync of this session
            await self._join_unlocked(join)

    async def _join_unlocked(self, join: Join) -> None:
        self._known_table(join.table)
        feed = await self.ctx.hub.feed(join.table)
        was_live = feed.is_subscribed(self)
        resume = feed.last_seq  # everything up to here was already sent to a live subscriber
        feed.unsubscribe(self)
        try:
            await self._catch_up(join, feed)
        except Exception:
            if was_live:  # a failed re-join leaves the earlier subscription as it was
                feed.subscribe_after(self, resume)
            raise
        self.joined.add(join.table)

    async def _catch_up(self, join: Join, feed: TableFeed, recovered: bool | None = None) -> None:
        after, epoch, from_store = join.since, join.epoch, False
        if after is not None:
            last, current = await self.ctx.store.head(join.table)
            # A seq this table never reached (e.g. from before a memory server restarted), or
            # one of another history (the client's epoch is not the current one): nothing to
            # catch up from, so start over from a fresh state.
            if after > last or (epoch is not None and epoch != current):
                after, recovered = None, False
            epoch = current
        if after is None:
            after, epoch = await self._send_snapshot(join.table, recovered)
            from_store = True
        # The feed checks that `after` is a place in its own history (epoch; not behind it
        # when read from the store), so a snapshot is never followed by another history.
        while (live_from := feed.subscribe_after(self, after, epoch, from_store)) is None:
            missed = await self.ctx.store.events_after(join.table, after)
            if missed is None:  # no longer held: start again from a fresh snapshot
                after, epoch = await self._send_snapshot(join.table, recovered=False)
                continue
            for event in missed:
                self.push(event)
                after = event["seq"]
            from_store = True
        # Sent right after the catch-up and before any live event: from here the table's
        # events follow without a gap.
        self.push({"type": "joined", "table": join.table, "seq": live_from, "epoch": epoch})

    async def _send_snapshot(self, table_id: str, recovered: bool | None) -> tuple[int, str]:
        """Send a snapshot; return its seq and its history's epoch."""
        snap = await self.ctx.store.snapshot(table_id, self.player)
        if snap is None:
            raise ErrorReply(ErrorCode.UNKNOWN_TABLE, f"no table {table_id!r}")
        state = snap.state
        now = await self.ctx.store.now_ms()
        message: dict[str, Any] = {
            "type": "snapshot",
            "table": table_id,
            "seq": snap.seq,
            "epoch": snap.epoch,
            "phase": state.phase.value,
            "round": state.round,
            "closes_at": state.closes_at_ms,
            "time_left_ms": max(0, state.closes_at_ms - now) if state.phase == "betting" else 0,
            "cards": [
                {"hand": hand, "rank": card.rank, "suit": card.suit.value if card.suit else None}
                for hand, card in state.dealt_cards()
            ],
            "shoe": state.shoe_number,
            "last_hand": state.last_hand,
            "paused": state.paused,
            "results": state.results,
            "roads": build_roads(state.results).to_dict(),
            "bets": [
                {"bet_id": b.bet_id, "spot": b.spot.value, "amount": b.amount} for b in snap.bets
            ],
            "totals": snap.totals,  # everyone's stakes this round, per spot; never who
            "bettors": snap.bettors,
            "balance": await self.ctx.store.balance(self.player),
            "rules": snap.rules.to_dict(),
        }
        if recovered is not None:
            message["recovered"] = recovered
        self.push(message)
        return snap.seq, snap.epoch

    def _leave(self, leave: Leave) -> None:
        self._known_table(leave.table)
        feed = self.ctx.hub.feeds.get(leave.table)
        if feed is not None:
            feed.unsubscribe(self)
        self.joined.discard(leave.table)
        self.push({"type": "left", "table": leave.table})

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
        self.push(
            {
                "type": "replay",
                "table": replay.table,
                "round": replay.round,
                "events": page,
                "more": len(events) > len(page),
            }
        )

    def send_settlement(self, settlement: Settlement) -> None:
        self.push(settlement.to_message())

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
            await self.ws.close(1011, "could not resync the table; reconnect")

    async def _resync(self, table_id: str) -> None:
        async with self._join_lock:
            if table_id not in self.joined or self.dropped:
                return  # left the table, or the connection, meanwhile
            feed = await self.ctx.hub.feed(table_id)
            feed.unsubscribe(self)
            await self._catch_up(Join(table_id, None), feed, recovered=False)
            if table_id not in self.joined:  # the connection closed during the catch-up
                feed.unsubscribe(self)


def _failure_key(error: Exception) -> str:
    """The exception's type and the line that raised it: one traceback per distinct bug."""
    where = error.__traceback__
    while where is not None and where.tb_next is not None:
        where = where.tb_next
    place = f"{where.tb_frame.f_code.co_filename}:{where.tb_lineno}" if where else "?"
    return f"{type(error).__name__}@{place}"


def push_settlement(sub: object, settlement: object) -> None:
    """The hub's callback: deliver a settlement to a session that bet on this node."""
    assert isinstance(sub, Session)
    assert isinstance(settlement, Settlement)
    sub.send_settlement(settlement)


async def close_all(ctx: SessionContext, code: int, reason: str) -> None:
    await asyncio.gather(*(s.ws.close(code, reason) for s in ctx.sessions), return_exceptions=True)
