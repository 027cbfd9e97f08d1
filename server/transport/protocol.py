"""The protocol handler of one connection, independent of the transport that carries it.

A `PlayerSession` knows who the connection is (the Identity admitted at the handshake) and its
rate limits; it takes decoded messages (`handle`), maps each to its unit and every failure to
an answer, and emits server messages, each built by a constructor of server/wire/shapes.py,
through its output `Port` (server/transport/port.py; server/transport/session.py is the
WebSocket port). The commands are answered by small units:

- bet: server/transport/betting.py (the bettor is registered with settlement delivery);
- entropy: server/transport/entropy.py (the committed shoe's players' entropy);
- join, leave and resync: server/transport/joins.py (snapshot, catch-up, the feed subscription);
- replay and history: server/transport/recall.py;
- settlements, by whichever path they come: server/transport/settlements.py.

A PlayerSession is the hub's Subscriber and settlement Recipient: the feed writes cached event
frames straight to its port.

Roles: a `player` has a wallet (created on first sight with the node's initial balance) and
bets; a `spectator` or an `operator` joins, watches, replays and recalls nothing: no wallet,
`welcome.balance` null, and every bet is answered `bet_rejected` with `NOT_A_PLAYER`.
"""

from __future__ import annotations

import asyncio
import itertools
import time
from collections.abc import Awaitable, Callable
from typing import Any

import structlog

from server.auth import Admission, Identity
from server.core.errors import RejectCode
from server.store.base import StoreUnavailable
from server.transport import betting, entropy, joins, recall
from server.transport.context import SessionContext
from server.transport.limits import ConnectionLimits, Kind, Verdict
from server.transport.port import FLOOD_CLOSE_CODE, Port
from server.transport.wallet_bets import wallet_balance
from server.wire import shapes
from server.wire.messages import (
    Bet,
    Command,
    Entropy,
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

__all__ = ["PlayerSession", "keep_connected_guests"]

GUEST_REFRESH_FRACTION = 4  # a connected guest is seen again every quarter of its TTL

_session_numbers = itertools.count(1)

# The rate bucket each command is charged to; a command added without one shares the pings'.
_KINDS: dict[type, Kind] = {
    Bet: Kind.BETS,
    Entropy: Kind.BETS,
    Ping: Kind.PINGS,
    Join: Kind.JOINS,
    Leave: Kind.JOINS,
    Replay: Kind.REPLAYS,
    History: Kind.REPLAYS,
}


# The name each command is counted under in baccarat_messages_in (its message's type).
_NAMES: dict[type, str] = {kind: kind.__name__.lower() for kind in _KINDS}


class PlayerSession:
    """One connection's protocol: identity, rate limits, dispatch and error mapping.

    A node holds thousands of these, mostly idle spectators: the instance has slots, and
    what not every connection needs (its logger, the join lock, the settlements sent, the
    rate buckets) is made on first use and shared or dropped when it can be."""

    __slots__ = (
        "_kept",
        "_log",
        "ctx",
        "identity",
        "join_lock",
        "joined",
        "limits",
        "number",
        "player",
        "port",
        "settled",
        "token",
    )

    def __init__(self, port: Port, ctx: SessionContext, admission: Admission) -> None:
        self.port = port
        self.ctx = ctx
        self.identity: Identity = admission.identity
        # The wallet it plays with; None for a spectator or an operator. Asked on every
        # request and by the hub: the identity never changes, so once.
        self.player = self.identity.player if self.identity.may_bet else None
        self.token = admission.token  # a guest's renewed token, for welcome.token
        self.number = next(_session_numbers)
        self.joined: tuple[str, ...] = ()  # rarely more than one table: a tuple is smallest
        self.join_lock: joins.JoinLock | None = None  # while a join or a resync runs
        self.limits = ConnectionLimits(ctx.limits)
        self.settled: dict[tuple[str, int], None] | None = None  # see settlements.send_once
        self._kept = False  # counted in ctx.guests (a guest's connection, once started)
        self._log: Any = None

    @property
    def log(self) -> Any:
        """This connection's logger (conn, player), bound when it first logs."""
        if self._log is None:
            self._log = structlog.get_logger("session").bind(conn=self.number, player=self.player)
        return self._log

    @staticmethod
    def _now() -> float:
        return asyncio.get_running_loop().time()

    @property
    def role(self) -> str:
        return self.identity.role.value

    # --- the connection's life ---------------------------------------------------------
    async def start(self) -> None:
        """Open the player's wallet (players only) and say welcome. StoreUnavailable if the
        store cannot be reached: the transport closes the connection."""
        balance = None
        if self.player is not None:
            ttl = self.ctx.guest_ttl_ms if self.identity.guest else None
            wallet = self.ctx.wallet
            initial = self.ctx.initial_balance if wallet is None else 0  # the wallet's money
            balance = await self.ctx.store.ensure_player(self.player, initial, ttl)
            if wallet is not None:
                balance = await wallet_balance(wallet, self.player)
            if self.identity.guest:
                self.ctx.guests[self.player] += 1
                self._kept = True
        self.ctx.hub.settlements.register(self)
        self.port.send(
            shapes.welcome(
                self.identity.player,
                balance,
                self.ctx.tables,
                self.port.encoding.value,
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
        self.ctx.hub.settlements.unregister(self)
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
        try:
            command = parse_command(message)
        except ErrorReply as error:  # malformed: a refusal, like a request over its rate
            self.port.send(shapes.error(error.code, error.message, echo_ref(message)))
            return await self._refused(self.limits.refuse(self._now()))
        verdict = self.limits.check(_KINDS.get(type(command), Kind.PINGS), self._now())
        if verdict is not Verdict.ALLOWED:
            self._rate_limited(command, echo_ref(message))
            return await self._refused(verdict)
        try:
            await self._dispatch(command)
        except ErrorReply as error:
            self.port.send(shapes.error(error.code, error.message, echo_ref(message)))
        except StoreUnavailable:
            self.ctx.metrics.store_error("session")
            answer = "storage is unavailable; retry"
            self.port.send(shapes.error(ErrorCode.UNAVAILABLE, answer, echo_ref(message)))
        except Exception as error:  # a bug must not take the connection, the table or the node
            self._log_failure(error)
            answer = "the server could not handle this message"
            self.port.send(shapes.error(ErrorCode.INTERNAL, answer, echo_ref(message)))
        return True

    def _rate_limited(self, command: Command, ref: str | int | None) -> None:
        message = "too many requests of this kind; slow down"
        self.ctx.metrics.rate_limit_hit(_KINDS.get(type(command), Kind.PINGS).value)
        if isinstance(command, Bet):
            betting.reject(self, self.ctx, command, RejectCode.RATE_LIMITED, message)
        else:
            self.port.send(shapes.error(ErrorCode.RATE_LIMITED, message, ref))

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

    async def _bet(self, command: Bet) -> None:
        metrics = self.ctx.metrics
        started = time.perf_counter()
        try:
            if self.player is not None:
                await betting.place(self, self.ctx, self.player, command)
            else:
                message = f"only players bet; this connection's role is {self.role}"
                betting.reject(self, self.ctx, command, RejectCode.NOT_A_PLAYER, message)
        finally:
            metrics.bet_took(time.perf_counter() - started)

    async def _dispatch(self, command: Command) -> None:
        self.ctx.metrics.message_in(_NAMES[type(command)])
        if isinstance(command, Bet):
            await self._bet(command)
        elif isinstance(command, Entropy):
            await entropy.add(self, self.ctx, self.player, command)
        elif isinstance(command, Join):
            await joins.join(self, self.ctx, command)
        elif isinstance(command, Leave):
            joins.leave(self, self.ctx, command)
        elif isinstance(command, Replay):
            await recall.replay(self.port, self.ctx, command)
        elif isinstance(command, History):
            await recall.history(self.port, self.ctx, self.player, command)
        elif isinstance(command, Ping):
            ref = command.ref if isinstance(command.ref, str | int) else None
            self.port.send(shapes.pong(ref, await self.ctx.store.now_ms()))

    def resync(self, table_id: str) -> None:
        """The hub's Subscriber hook: the feed lost this session's place (see joins.resync)."""
        joins.resync(self, self.ctx, table_id)


async def keep_connected_guests(
    ctx: SessionContext, sleep: Callable[[float], Awaitable[None]]
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
