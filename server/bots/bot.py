"""One bot: a WebSocket connection that joins a table, bets (players) or watches (spectators),
checks what it sees with a TableChecker and, for players, a Ledger, and reconnects with
`since` when it is dropped.
"""

from __future__ import annotations

import asyncio
import contextlib
import errno
import random
import re
import time
from collections import OrderedDict
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any
from urllib.parse import parse_qsl, urlencode, urlsplit, urlunsplit

from websockets.asyncio.client import ClientConnection, connect
from websockets.exceptions import ConnectionClosed, InvalidHandshake, InvalidStatus, InvalidURI
from websockets.typing import Subprotocol

from server.auth import Role, mint_token
from server.bots.checker import Problem, ProblemKind, TableChecker
from server.bots.ledger import Ledger
from server.bots.stats import RunStats
from server.bots.strategy import Strategy, StrategyName, limits_from_rules
from server.core.bets import Paytable
from server.core.coup import Coup
from server.wire.codec import Encoding, Undecodable, decode, encode

__all__ = ["Bot", "BotConfig", "Shared", "connect_failure_reason", "with_query"]

ACK_TIMEOUT_S = 10.0
TOKEN_TTL_S = 24 * 3600


@dataclass(frozen=True, slots=True)
class BotConfig:
    """What every bot of a run shares."""

    urls: tuple[str, ...]
    tables: tuple[str, ...] = ()  # empty: every table of the welcome
    encoding: Encoding = Encoding.MSGPACK
    strategy: StrategyName = StrategyName.FLAT
    unit: int = 1
    bets_per_round: int = 1
    rounds: int | None = None  # stop after this many complete rounds
    secret: str | None = None  # the site's token secret: each bot gets a token signed with it
    run_id: str = "run"
    seed: int | None = None
    connect_timeout: float = 60.0
    wallet: bool = False  # an operator's wallet: balances judged at the end (Ledger)


@dataclass(slots=True)
class Shared:
    """Per process: the counters, the handshake throttle, and what other bots saw."""

    config: BotConfig
    stats: RunStats
    handshakes: asyncio.Semaphore
    stop: asyncio.Event = field(default_factory=asyncio.Event)
    draining: bool = False  # no new bets: the run is ending
    results: OrderedDict[tuple[str, str | None, int], tuple[Any, ...]] = field(
        default_factory=OrderedDict
    )
    on_done: Callable[[], None] = lambda: None

    def agree(self, table: str, epoch: str | None, round_no: int, result: tuple[Any, ...]) -> bool:
        """Whether every bot in this process saw the same result for this round."""
        key = (table, epoch, round_no)
        seen = self.results.setdefault(key, result)
        while len(self.results) > 10_000:
            self.results.popitem(last=False)
        return seen == result


class Bot:
    def __init__(self, index: int, spectator: bool, shared: Shared) -> None:
        config = shared.config
        self.index = index
        self.spectator = spectator
        self.shared = shared
        self.stats = shared.stats
        self.url = config.urls[index % len(config.urls)]
        self.rng = random.Random(None if config.seed is None else config.seed * 1_000_003 + index)
        self.token = self._mint(config)
        self.ws: ClientConnection | None = None
        self.table: str | None = None
        self.checker: TableChecker | None = None
        self.ledger: Ledger | None = None
        self.strategy: Strategy | None = None
        self.paytable = Paytable()
        self.waiters: dict[str, asyncio.Future[None]] = {}
        self.sent_at: dict[str, float] = {}
        self.betting: asyncio.Task[None] | None = None
        self.bet_rounds: set[int] = set()
        self.opened = 0  # rounds this bot saw open: with --rounds, it bets in that many
        self.bet_seq = 0
        self.done = False
        self.gave_up = False  # the site runs none of the tables asked for, or refused this bot
        self.welcomed = False  # got a welcome at least once
        self.refused: str | None = None  # why the server refused this bot for good
        self.last_failure: str | None = None  # why its last handshake failed, since a welcome
        self.dropped_since_bet = False

    def _mint(self, config: BotConfig) -> str | None:
        """A token signed with the site's secret by the server's own code (server.auth)."""
        if not config.secret:
            return None
        role = Role.SPECTATOR if self.spectator else Role.PLAYER
        player = f"{'spec' if self.spectator else 'bot'}-{config.run_id}-{self.index}"
        return mint_token(
            config.secret, player, name=f"bot {self.index}", role=role, ttl_s=TOKEN_TTL_S
        )

    def _connect_url(self) -> str:
        params = {"role": "spectator"} if self.spectator else {}
        if self.token:
            params["token"] = self.token
        return with_query(self.url, **params) if params else self.url

    # --- the connection's life ----------------------------------------------------------
    async def run(self) -> None:
        backoff = 0.1
        while not self.shared.stop.is_set() and not self.gave_up:
            ws = await self._open()
            if ws is None:
                await self._pause(backoff)
                backoff = min(backoff * 2, 5.0)
                continue
            backoff = 0.1
            await self._serve(ws)
            if not self.shared.stop.is_set() and not self.gave_up:
                self.stats.disconnects += 1
                await self._pause(self.rng.uniform(0.05, 0.5))

    async def _pause(self, seconds: float) -> None:
        with contextlib.suppress(TimeoutError):
            await asyncio.wait_for(self.shared.stop.wait(), seconds)

    async def _open(self) -> ClientConnection | None:
        offered = [Subprotocol(self.shared.config.encoding.value)]
        try:
            async with self.shared.handshakes:
                if self.shared.stop.is_set():
                    return None
                return await connect(
                    self._connect_url(),
                    subprotocols=offered,
                    compression=None,
                    open_timeout=self.shared.config.connect_timeout,
                    max_size=None,  # a replay or a snapshot may be large; we trust the server
                    max_queue=None,  # never stop reading: that would only hide latency
                )
        except (OSError, InvalidHandshake, InvalidURI, TimeoutError) as error:
            reason = connect_failure_reason(error, self.shared.config.connect_timeout)
            self.stats.connect_failed(reason)
            self.last_failure = reason
            if _refused_for_good(error):
                # The same handshake would be refused again (a bad token, a wrong path): this
                # bot stops, and the run says why rather than retrying until its end.
                self.refused = reason
                self.gave_up = self.done = True
                self.shared.on_done()
            return None

    async def _serve(self, ws: ClientConnection) -> None:
        self.ws = ws
        welcomed = False
        try:
            async for frame in ws:
                received = time.time() * 1000.0
                try:
                    message = decode(frame)
                except Undecodable as error:
                    self._mismatches([f"undecodable frame from the server: {error}"])
                    continue
                if not isinstance(message, dict):
                    self._mismatches([f"a message that is not a map: {message!r}"[:200]])
                    continue
                if message.get("type") == "welcome":
                    welcomed = self.welcomed = True
                    self.last_failure = None
                    self.stats.connected += 1
                    self.stats.ever_connected += 1
                await self._handle(message, received)
        except ConnectionClosed:
            pass
        finally:
            self.ws = None
            if welcomed:
                self.stats.connected -= 1
            self._lost_answers()

    def _lost_answers(self) -> None:
        if self.betting is not None:
            self.betting.cancel()
            self.betting = None
        self.stats.bets_unanswered += len(self.waiters)
        for waiter in self.waiters.values():
            if not waiter.done():
                waiter.cancel()
        self.waiters.clear()
        self.sent_at.clear()
        self.dropped_since_bet = True

    async def close(self) -> None:
        if self.ws is not None:
            await self.ws.close()

    async def send(self, message: dict[str, Any]) -> None:
        if self.ws is not None:
            await self.ws.send(encode(message, self.shared.config.encoding))

    # --- messages -----------------------------------------------------------------------
    async def _handle(self, message: dict[str, Any], received_ms: float) -> None:
        kind = message.get("type")
        if kind == "event":
            self._event(message, received_ms)
        elif kind == "welcome":
            await self._welcome(message)
        elif kind == "snapshot" and self.checker is not None:
            self._report(self.checker.on_snapshot(message))
            if message.get("phase") == "betting":
                self._start_betting(message.get("round"), message.get("closes_at"), received_ms)
        elif kind == "joined" and self.checker is not None:
            self._report(self.checker.on_joined(message))
        elif kind == "bet_accepted":
            self._answered(message)
            self.stats.bets_accepted += 1
            if self.ledger is not None:
                self._mismatches(self.ledger.on_accepted(message))
        elif kind == "bet_rejected":
            self._answered(message)
            self.stats.bets_rejected[str(message.get("code"))] += 1
            if self.ledger is not None:
                self.ledger.on_rejected(message.get("bet_id"))
        elif kind == "settlement":
            self._settlement(message)
        elif kind == "balance" and self.ledger is not None:
            self.ledger.on_balance(message.get("balance"))
            self._check_done()

    async def _welcome(self, message: dict[str, Any]) -> None:
        if isinstance(message.get("token"), str) and not self.shared.config.secret:
            self.token = message["token"]  # demo mode: reconnect as the same guest
        if self.table is None:
            self._choose_table(message)
        if self.table is None:
            self.stats.no_table += 1
            self.gave_up = self.done = True
            self.shared.on_done()
            await self.close()
            return
        player, balance = str(message.get("player")), message.get("balance")
        wallet = self.shared.config.wallet
        if not self.spectator and wallet and balance is None:
            await self.close()  # the wallet did not answer at connect: come again
            return
        if not self.spectator and isinstance(balance, int):
            if self.ledger is None:
                self.ledger = Ledger(self.table, self.paytable, player, balance, wallet)
            else:
                self.ledger.reconnected(player, balance)
        assert self.checker is not None
        join: dict[str, Any] = {"type": "join", "table": self.table}
        if self.checker.last_seq is not None:
            join["since"] = self.checker.last_seq
            if self.checker.epoch is not None:
                join["epoch"] = self.checker.epoch
        self.checker.on_join_sent()
        await self.send(join)

    def _choose_table(self, welcome: dict[str, Any]) -> None:
        offered = {str(t.get("id")): t for t in welcome.get("tables", []) if isinstance(t, dict)}
        wanted = [t for t in self.shared.config.tables or tuple(offered) if t in offered]
        if not wanted:
            return
        self.table = wanted[self.index % len(wanted)]
        rules = offered[self.table]
        self.paytable = Paytable(
            banker_commission_bp=int(rules.get("banker_commission_bp", 500)),
            no_commission=bool(rules.get("no_commission", False)),
            tie_pays=int(rules.get("tie_pays", 8)),
            pair_pays=int(rules.get("pair_pays", 11)),
        )
        config = self.shared.config
        self.strategy = Strategy(
            config.strategy,
            limits_from_rules(rules),
            self.rng,
            unit=config.unit,
            bets_per_round=config.bets_per_round,
        )
        self.checker = TableChecker(self.table)

    def _event(self, event: dict[str, Any], received_ms: float) -> None:
        checker = self.checker
        if checker is None or event.get("table") != self.table:
            return
        if checker.live and isinstance(event.get("ts"), int):
            self.stats.event_seen(received_ms - event["ts"])
        checked, unchecked = checker.checked, checker.unchecked
        self._report(checker.on_event(event))
        self.stats.rounds_checked += checker.checked - checked
        self.stats.rounds_unchecked += checker.unchecked - unchecked
        kind, round_no = event.get("kind"), event.get("round", -1)
        if kind == "round_opened":
            self.opened += 1
            self._start_betting(round_no, event.get("closes_at"), received_ms)
        elif kind == "round_result" and checker.checked > checked:
            self._compare(checker, round_no)
        elif kind in ("round_settled", "round_voided"):
            self.stats.rounds_completed += 1
            if self.ledger is not None:
                self.ledger.on_round_ended(round_no)
            self._check_done()

    def _compare(self, checker: TableChecker, round_no: int) -> None:
        view = checker.view(round_no)
        if view is None or view.coup is None:
            return
        coup = view.coup
        result = (coup.winner.value, tuple(map(str, coup.player)), tuple(map(str, coup.banker)))
        if not self.shared.agree(checker.table, checker.epoch, round_no, result):
            detail = f"round {round_no}: bots in this process saw different cards"
            self._report([Problem(ProblemKind.MISMATCH, checker.table, detail)])

    def _answered(self, message: dict[str, Any]) -> None:
        bet_id = str(message.get("bet_id"))
        sent = self.sent_at.pop(bet_id, None)
        if sent is not None:
            self.stats.bet_ack_latency.add((time.perf_counter() - sent) * 1000.0)
        waiter = self.waiters.pop(bet_id, None)
        if waiter is not None and not waiter.done():
            waiter.set_result(None)

    def _settlement(self, message: dict[str, Any]) -> None:
        if self.ledger is None or message.get("table") != self.table:
            return
        self.stats.settlements += 1
        before = self.ledger.payouts_checked
        self._mismatches(self.ledger.on_settlement(message, self._outcome))
        self.stats.payouts_checked += self.ledger.payouts_checked - before
        if self.strategy is not None and isinstance(message.get("payouts"), list):
            payouts = [p for p in message["payouts"] if isinstance(p, dict)]
            staked = sum(int(p.get("amount", 0)) for p in payouts)
            self.strategy.settled(staked, sum(int(p.get("credit", 0)) for p in payouts))
        self._check_done()

    def _outcome(self, round_no: int) -> Coup | str | None:
        view = self.checker.view(round_no) if self.checker else None
        if view is None:
            return None
        return "voided" if view.voided else view.coup

    def _report(self, problems: list[Problem]) -> None:
        for problem in problems:
            self.stats.problem(problem)

    def _mismatches(self, details: list[str]) -> None:
        for detail in details:
            self.stats.problem(Problem(ProblemKind.MISMATCH, self.table or "", detail))

    # --- betting and the end ------------------------------------------------------------
    def _wants_to_bet(self, round_no: object) -> bool:
        rounds = self.shared.config.rounds
        return (
            not self.spectator
            and not self.shared.draining
            and isinstance(round_no, int)
            and round_no not in self.bet_rounds
            and (rounds is None or self.opened <= rounds)
            and (self.betting is None or self.betting.done())
        )

    def _start_betting(self, round_no: object, closes_at: object, now_ms: float) -> None:
        if not self._wants_to_bet(round_no) or not isinstance(closes_at, int):
            return
        left_s = (closes_at - now_ms) / 1000.0
        if left_s < 0.05:
            return
        assert isinstance(round_no, int)
        self.bet_rounds.add(round_no)
        if len(self.bet_rounds) > 64:
            self.bet_rounds.discard(min(self.bet_rounds))
        self.betting = asyncio.create_task(self._bet_round(round_no, left_s))

    async def _bet_round(self, round_no: int, left_s: float) -> None:
        """Spread the bots over the first part of the window, then bet one at a time."""
        assert self.strategy is not None and self.ledger is not None and self.table is not None
        await asyncio.sleep(self.rng.uniform(0.0, min(left_s * 0.3, 1.0)))
        for spot, amount in self.strategy.bets(self.ledger.balance):
            if self.ws is None or self.shared.draining:
                return
            self.bet_seq += 1
            bet_id = f"{self.shared.config.run_id}-{self.index}-{self.bet_seq}"  # never reused
            waiter = asyncio.get_running_loop().create_future()
            self.waiters[bet_id] = waiter
            self.ledger.on_sent(bet_id, round_no, spot.value, amount)
            self.stats.bets_sent += 1
            self.dropped_since_bet = False
            self.sent_at[bet_id] = time.perf_counter()
            bet = {"type": "bet", "table": self.table, "round": round_no, "bet_id": bet_id}
            await self.send({**bet, "spot": spot.value, "amount": amount})
            try:
                await asyncio.wait_for(waiter, ACK_TIMEOUT_S)
            except TimeoutError:
                # Stop betting this round; the ledger still waits for the answer, so a late
                # one is judged, and a bot that never gets it is not done before the grace.
                self.waiters.pop(bet_id, None)
                self.stats.bets_unanswered += 1  # within ACK_TIMEOUT_S
                return

    @property
    def lost(self) -> str | None:
        """Why this bot, which had connected, is not connected now and failed to come back."""
        if self.welcomed and self.ws is None and self.refused is None:
            return self.last_failure
        return None

    @property
    def outstanding(self) -> int:
        return self.ledger.outstanding if self.ledger is not None else 0

    def _check_done(self) -> None:
        rounds = self.shared.config.rounds
        if self.done or rounds is None or self.checker is None:
            return
        settled = self.ledger is None or self.ledger.wallet_settled()
        if self.checker.completed >= rounds and not self.outstanding and settled:
            self.done = True
            self.shared.on_done()

    def finish(self) -> None:
        """At the end of the run: settlements the stream said were due and never came."""
        if self.ledger is None or self.dropped_since_bet:
            return
        self._mismatches(self.ledger.wallet_problems())
        for round_no in self.ledger.missing_settlements():
            detail = f"round {round_no}: ended, but no settlement for this bot's bets"
            self._report([Problem(ProblemKind.MISMATCH, self.table or "", detail)])


def with_query(url: str, **params: str) -> str:
    """The URL with these query parameters set (others kept)."""
    parts = urlsplit(url)
    query = dict(parse_qsl(parts.query))
    query.update(params)
    return urlunsplit(parts._replace(query=urlencode(query)))


_ERRNO = re.compile(r"\[Errno (-?\d+)\]")
MAX_REASON_CHARS = 200


def connect_failure_reason(error: BaseException, timeout: float) -> str:
    """One line saying why a handshake failed, in the server's words when it answered:
    "HTTP 401 token lacks the 'iat' claim", "connection refused", ..."""
    if isinstance(error, InvalidStatus):
        response = error.response
        body = response.body.decode("utf-8", "replace").strip() if response.body else ""
        said = " ".join(body.split()) or response.reason_phrase
        return f"HTTP {response.status_code} {said}"[:MAX_REASON_CHARS]
    if isinstance(error, TimeoutError):
        return f"no handshake within {timeout:g} s"
    if isinstance(error, OSError):
        # asyncio joins the errors of every address tried ("Multiple exceptions: ...").
        codes = {int(code) for code in _ERRNO.findall(str(error))}
        if isinstance(error, ConnectionRefusedError) or codes == {errno.ECONNREFUSED}:
            return "connection refused"
        return (error.strerror or str(error) or type(error).__name__)[:MAX_REASON_CHARS]
    return (str(error) or type(error).__name__)[:MAX_REASON_CHARS]


def _refused_for_good(error: BaseException) -> bool:
    """A 4xx answer other than 408 and 429 (busy: try again), or a URL that cannot work."""
    if isinstance(error, InvalidURI):
        return True
    if isinstance(error, InvalidStatus):
        status = error.response.status_code
        return 400 <= status < 500 and status not in (408, 429)
    return False
