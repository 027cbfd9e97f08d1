"""One client connection: guest identity, command dispatch, and everything sent to it.

Every frame to the client goes through `push_frame`, a synchronous write (websockets'
`broadcast` to one connection), so direct answers and table events keep one order.
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
from server.wire.codec import Encoding, Frame, Undecodable, decode, encode
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


@dataclass(slots=True)
class SessionContext:
    """What every session on this node shares."""

    store: Store
    hub: Hub
    tables: dict[str, TableRules]
    node_id: str
    demo_balance: int = 1_000_000
    max_buffer_bytes: int = 1 << 20  # a client this far behind is dropped, not waited for
    metrics: Metrics = field(default_factory=Metrics)
    sessions: set[Session] = field(default_factory=set)


class Session:
    def __init__(self, ws: ServerConnection, ctx: SessionContext) -> None:
        self.ws = ws
        self.ctx = ctx
        self.encoding = Encoding(ws.subprotocol) if ws.subprotocol else Encoding.MSGPACK
        self.player = "guest-" + secrets.token_hex(6)
        self.number = next(_session_numbers)
        self.joined: set[str] = set()
        self.dropped = False
        self.log = structlog.get_logger("session").bind(conn=self.number, player=self.player)

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
        self.ctx.metrics.message_out(message["type"])
        self.push_frame(encode(message, self.encoding))

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
            balance = await self.ctx.store.ensure_player(self.player, self.ctx.demo_balance)
            self.push(self._welcome(balance))
            async for frame in self.ws:
                if self.dropped or not await self._handle_frame(frame):
                    break
        except ConnectionClosed:
            pass
        except StoreUnavailable:
            self.ctx.metrics.store_error("session")
            await self.ws.close(1011, "store unavailable; reconnect later")
        finally:
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
            await self._dispatch(parse_command(message))
        except ErrorReply as error:
            self.push(error_message(error.code, error.message, ref))
        except StoreUnavailable:
            self.ctx.metrics.store_error("session")
            self.push(error_message(ErrorCode.UNAVAILABLE, "storage is unavailable; retry", ref))
        except Exception:  # a bug must not take the connection, the table or the node down
            self.log.exception("command_failed")
            self.push(
                error_message(ErrorCode.INTERNAL, "the server could not handle this message", ref)
            )
        return True

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

    async def _catch_up(self, join: Join, feed: TableFeed) -> None:
        after = join.since
        if after is None:
            after = await self._send_snapshot(join.table, recovered=None)
        elif after > await self.ctx.store.last_seq(join.table):
            # A seq this table never reached (e.g. from before a memory server restarted):
            # nothing to catch up from, so start over from a fresh state.
            after = await self._send_snapshot(join.table, recovered=False)
        while (live_from := feed.subscribe_after(self, after)) is None:
            missed = await self.ctx.store.events_after(join.table, after)
            if missed is None:  # no longer held: start again from a fresh snapshot
                after = await self._send_snapshot(join.table, recovered=False)
                continue
            for event in missed:
                self.push(event)
                after = event["seq"]
        # Sent right after the catch-up and before any live event: from here the table's
        # events follow without a gap.
        self.push({"type": "joined", "table": join.table, "seq": live_from})

    async def _send_snapshot(self, table_id: str, recovered: bool | None) -> int:
        snap = await self.ctx.store.snapshot(table_id, self.player)
        if snap is None:
            raise ErrorReply(ErrorCode.UNKNOWN_TABLE, f"no table {table_id!r}")
        state = snap.state
        now = await self.ctx.store.now_ms()
        message: dict[str, Any] = {
            "type": "snapshot",
            "table": table_id,
            "seq": snap.seq,
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
            "results": state.results,
            "roads": build_roads(state.results).to_dict(),
            "bets": [
                {"bet_id": b.bet_id, "spot": b.spot.value, "amount": b.amount} for b in snap.bets
            ],
            "balance": await self.ctx.store.balance(self.player),
            "rules": snap.rules.to_dict(),
        }
        if recovered is not None:
            message["recovered"] = recovered
        self.push(message)
        return snap.seq

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
        self.push(
            {"type": "replay", "table": replay.table, "round": replay.round, "events": events}
        )

    def send_settlement(self, settlement: Settlement) -> None:
        self.push(settlement.to_message())


def push_settlement(sub: object, settlement: object) -> None:
    """The hub's callback: deliver a settlement to a session that bet on this node."""
    assert isinstance(sub, Session)
    assert isinstance(settlement, Settlement)
    sub.send_settlement(settlement)


async def close_all(ctx: SessionContext, code: int, reason: str) -> None:
    await asyncio.gather(*(s.ws.close(code, reason) for s in ctx.sessions), return_exceptions=True)
