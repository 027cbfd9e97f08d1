"""The Redis engine: the memory engine's semantics, shared by every node through one Redis.

Each check-then-write is one Lua script (server/store/lua/), so it is atomic on the server:
place_bet judges the window by Redis's clock and debits in the same step, and commit checks
the owner's fencing token and the state's version before it writes anything. Every key of
one table carries the hash tag `{t:<table>}` and every key of one player `{p:<player>}`;
docs/redis.md has the layout and what Redis Cluster would need on top.

Connection failures surface as StoreUnavailable after the client's own retries; the client
reconnects by itself, so the store works again once Redis is back. A script whose reply was
lost is retried: place_bet is idempotent by bet_id, and a retried commit that had already
applied answers StaleWrite, after which the owner reloads the state it wrote.
"""

from __future__ import annotations

import asyncio
import contextlib
from collections.abc import (
    AsyncIterator,
    Awaitable,
    Callable,
    Collection,
    Iterable,
    Iterator,
    Sequence,
)
from importlib import resources
from typing import Any, NoReturn

import hiredis
import structlog
from redis.asyncio import BlockingConnectionPool, Connection, Redis
from redis.asyncio.retry import Retry
from redis.backoff import ExponentialBackoff, NoBackoff
from redis.commands.core import AsyncScript
from redis.exceptions import ConnectionError as RedisConnectionError
from redis.exceptions import NoScriptError, RedisError, ResponseError
from redis.exceptions import TimeoutError as RedisTimeoutError

from server.core.bets import (
    Bet,
    BetTotals,
    Payout,
    Spot,
    SpotLimit,
    TableLimits,
    parse_spot,
    verify_bet,
)
from server.core.errors import BetRejected, RejectCode
from server.core.events import EventPayload
from server.core.recall import RoundSummary
from server.core.rules import TableRules
from server.core.table import Phase, TableState
from server.store.base import (
    DEFAULT_HISTORY_EVENTS,
    DEFAULT_HISTORY_ROUNDS,
    DEFAULT_MAX_BETS_PER_ROUND,
    BetReceipt,
    Event,
    Lease,
    Ledger,
    SettledNotice,
    Settlement,
    Snapshot,
    StaleWrite,
    StateUnreadable,
    Store,
    StoreDataError,
    StoreRefused,
    StoreUnavailable,
    new_epoch,
    too_many_bets,
)
from server.store.codec import (
    bet_from_bytes,
    packb,
    rules_from_dict,
    state_from_bytes,
    state_to_bytes,
    unpackb,
)
from server.store.recall import history_record, record_body
from server.store.redis_link import Call, CommandLink
from server.store.wallet import (
    DEFAULT_RECALL_ROUNDS,
    IDEMPOTENCY_KEYS_KEPT,
    MONEY_LIMIT,
    MOVEMENTS_KEPT,
    InsufficientFunds,
    LedgerLimit,
    Movement,
    check_movement,
)
from server.wire.envelope import template

__all__ = ["RedisStore"]

_log = structlog.get_logger("store")

_SCRIPTS = (
    "create_table",
    "ensure_player",
    "place_bet",
    "commit",
    "acquire_lease",
    "release_lease",
    "lease",
    "snapshot",
    "reset_epoch",
    "move_money",
    "keep_guests",
    "expire_guests",
)
BATCH_MAX = 256  # commands one write carries; more calls in the same tick take several
BET_BATCH_MAX = 64  # bets one place_bet script takes: Redis runs nothing else meanwhile
TABLE_KEYS_CACHED = 1024  # tables whose key names are kept made
FOLLOW_BLOCK_MS = 1000  # one XREAD BLOCK; follow loops, so this only bounds a read's wait
ROUND_BETS_PAGE = 1000  # bets one read of a round's list takes (and the node decodes at once)
EXPIRE_BATCH = 500  # guests one expire_guests script looks at: a short script, many if needed
KEEP_BATCH = 500  # guests one keep_guests script pushes back
NOTICE_POLL_S = 1.0  # one wait for a settled notice; the listener loops, checking its health
NOTICE_HEALTH_S = 10  # a listener with nothing to read PINGs this often, to notice a lost Redis


def _script_text(name: str) -> str:
    lua = resources.files("server.store").joinpath("lua")
    return lua.joinpath("lib.lua").read_text() + "\n" + lua.joinpath(f"{name}.lua").read_text()


# What Redis answers when a new connection's setup (the URL's database) is refused: redis-py
# raises it as a plain error reply of whatever call opened the connection.
_SETUP_REFUSALS = ("DB index is out of range", "invalid DB index", "SELECT is not allowed")


@contextlib.contextmanager
def _reachable() -> Iterator[None]:
    """Turn the client's connection failures (after its retries) into StoreUnavailable, and
    a connection Redis refuses to set up (a database it does not have) into StoreRefused.

    Also gives back a cancel redis-py lost. It sends every command in asyncio.wait_for, which
    on Python 3.11 returns the result and drops a cancel that comes as the write completes
    (the request stays counted in Task.cancelling()). A task cancelled that way went on as
    if nothing had been asked: the hub's follower blocked in XREAD again, a table loop went
    on to own and play its table, and the node's stop, which waits for them, never ended."""
    try:
        yield
    except (RedisConnectionError, RedisTimeoutError) as exc:
        raise StoreUnavailable(f"redis is unreachable: {exc}") from exc
    except ResponseError as exc:
        if str(exc).startswith(_SETUP_REFUSALS):
            raise StoreRefused(f"redis refuses the database of --redis: {exc}") from exc
        raise
    task = asyncio.current_task()
    if task is not None and task.cancelling():
        raise asyncio.CancelledError


def _unknown_table(table_id: str) -> BetRejected:
    return BetRejected(RejectCode.UNKNOWN_TABLE, f"no table {table_id!r}")


def _round_arg(round_no: object) -> str:
    """The round as the script compares it: an int's digits, else '' (never equal).

    Mirrors verify_bet_window, which takes only a true int: 2.0 and True are WRONG_ROUND.
    """
    return str(round_no) if type(round_no) is int else ""


def _bytes(value: object) -> bytes:
    """A reply value of a client that decodes nothing (decode_responses is off)."""
    assert isinstance(value, bytes), value
    return value


def _entry_seq(entry_id: object) -> int:
    return int(_bytes(entry_id).split(b"-", 1)[0])


def _totals(pairs: Sequence[object]) -> BetTotals:
    """BetTotals from a totals hash's HGETALL pairs: spots, 'bets' and 'bettors'."""
    counts = {_bytes(pairs[i]).decode(): int(_bytes(pairs[i + 1])) for i in range(0, len(pairs), 2)}
    return BetTotals.of(counts, counts.get("bettors", 0), counts.get("bets", 0))


def _entry_event(fields: object) -> Event:
    assert isinstance(fields, dict), fields
    event_: Event = unpackb(fields[b"e"])
    return event_


class _Connection(Connection):
    """redis-py's connection, packing commands with hiredis's C packer: redis-py's asyncio
    client packs each argument in Python, ~20% of the node's CPU per bet in a pipeline."""

    def pack_command(self, *args: Any) -> list[bytes]:
        first = args[0]
        if (isinstance(first, str) and " " in first) or (
            isinstance(first, bytes) and b" " in first
        ):
            return super().pack_command(*args)  # "CLIENT SETINFO": redis-py splits it
        try:
            return [hiredis.pack_command(args)]
        except TypeError:  # a type hiredis does not pack: redis-py's encoder says why
            return super().pack_command(*args)

    def pack_commands(self, commands: Iterable[Iterable[Any]]) -> list[bytes]:
        return [b"".join(chunk for args in commands for chunk in self.pack_command(*args))]


class _Batcher:
    """Sends the commands callers issue within one turn of the event loop as one write, on
    one connection kept open (server/store/redis_link.py).

    Every bet is a script call; sent alone, redis-py's per-call work (a pooled connection, a
    timeout, a write and a read of its own) cost the node ~190 us a bet, and its pipeline
    ~100 us per execute whatever it carried. Calls made while the loop runs its ready
    callbacks (the sessions woken by one batch of frames) go out together on the next turn
    (BATCH_MAX a write); each caller still gets its own reply or error."""

    def __init__(self, redis: Redis) -> None:
        self.link = CommandLink(redis.connection_pool.make_connection)
        self._queued: list[Call] = []

    async def call(self, *args: Any) -> Any:
        return await self.submit(*args)

    def submit(self, *args: Any) -> asyncio.Future[Any]:
        """Queue a command in this turn's write now; its reply comes in the future."""
        loop = asyncio.get_running_loop()
        future: asyncio.Future[Any] = loop.create_future()
        if not self._queued:
            loop.call_soon(self._flush)
        self._queued.append((args, future))
        return future

    def _flush(self) -> None:
        queued, self._queued = self._queued, []
        for first in range(0, len(queued), BATCH_MAX):
            self.link.send(queued[first : first + BATCH_MAX])

    async def close(self) -> None:
        await self.link.close()


class _BetBatches:
    """Gathers the bets placed on each table within one turn of the event loop into one
    place_bet script call (at most BET_BATCH_MAX bets each).

    One script call per bet cost Redis the call's own overhead and a read of the table's
    state, the clock and the spot's limits for every bet, and the node redis-py's per-command
    work; a batch pays them once. Each caller still gets its own reply: the script judges
    every bet on its own, so a bet it cannot place (a damaged key: StoreDataError) leaves the
    others' answers alone. Only a call that fails as a whole (Redis unreachable) fails every
    bet in it (place_bet is idempotent by bet_id, so a caller may retry)."""

    def __init__(self, submit: Callable[[str, list[str], list[str]], Awaitable[Any]]) -> None:
        self._submit = submit  # queues the batch's script call at once; awaited for its reply
        self._queued: dict[str, list[tuple[list[str], list[str], asyncio.Future[Any]]]] = {}
        self._tasks: set[asyncio.Task[None]] = set()

    async def place(self, table_id: str, keys: list[str], args: list[str]) -> Any:
        loop = asyncio.get_running_loop()
        future: asyncio.Future[Any] = loop.create_future()
        queued = self._queued.get(table_id)
        if queued is None:
            queued = self._queued[table_id] = []
            loop.call_soon(self._flush, table_id)
        queued.append((keys, args, future))
        return await future

    def _flush(self, table_id: str) -> None:
        queued = self._queued.pop(table_id)
        for first in range(0, len(queued), BET_BATCH_MAX):
            batch = queued[first : first + BET_BATCH_MAX]
            keys = [key for bet_keys, _, _ in batch for key in bet_keys]
            args = [arg for _, bet_args, _ in batch for arg in bet_args]
            # Submitted now, so the batch joins the pipeline of this turn's other calls.
            task = asyncio.create_task(self._answer(self._submit(table_id, keys, args), batch))
            self._tasks.add(task)
            task.add_done_callback(self._tasks.discard)

    @staticmethod
    async def _answer(
        sent: Awaitable[Any], batch: list[tuple[list[str], list[str], asyncio.Future[Any]]]
    ) -> None:
        try:
            replies = await sent
            if not isinstance(replies, list) or len(replies) != len(batch):
                raise RedisError(f"place_bet answered {replies!r} to {len(batch)} bets")
        except BaseException as error:  # every caller hears it; a cancel ends the batch too
            for _, _, future in batch:
                if not future.done():
                    future.set_exception(error)
            if not isinstance(error, Exception):
                raise
            return
        for (_, _, future), reply in zip(batch, replies, strict=True):
            if not future.done():  # else its caller was cancelled: the reply is dropped
                future.set_result(reply)

    async def close(self) -> None:
        for task in list(self._tasks):
            task.cancel()
        await asyncio.gather(*self._tasks, return_exceptions=True)


class _TableKeys:
    """One table's keys; all share the hash tag {t:<table>} so they sit in one slot."""

    __slots__ = ("lease", "prefix", "rounds", "state", "stream")

    def __init__(self, key_prefix: str, table_id: str) -> None:
        self.prefix = f"{key_prefix}:{{t:{table_id}}}:"
        self.state = self.prefix + "state"
        self.stream = self.prefix + "stream"
        self.rounds = self.prefix + "rounds"
        self.lease = self.prefix + "lease"

    def per_round(self, kind: str, round_no: int) -> str:
        return f"{self.prefix}{kind}:{round_no}"


class RedisStore(Store):
    def __init__(
        self,
        url: str,
        *,
        history_events: int = DEFAULT_HISTORY_EVENTS,
        history_rounds: int = DEFAULT_HISTORY_ROUNDS,
        recall_rounds: int = DEFAULT_RECALL_ROUNDS,
        max_bets_per_round: int = DEFAULT_MAX_BETS_PER_ROUND,
        key_prefix: str = "bac",
        timeout_s: float = 5.0,
        retries: int = 3,
        max_connections: int = 64,
    ) -> None:
        self._url = url
        self._history = (max(history_events, 1), max(history_rounds, 1))
        self._recall_rounds = max(recall_rounds, 1)
        self._max_bets = max(max_bets_per_round, 1)
        self._prefix = key_prefix
        # Keys every bet names, made once instead of per call.
        self._ledger_key = f"{key_prefix}:ledger"
        # The guests' expiries (zset, by the store's clock) and their TTLs (hash).
        self._guest_keys = (f"{key_prefix}:guests", f"{key_prefix}:guest_ttl")
        self._tables: dict[str, _TableKeys] = {}
        self._timeout_s = timeout_s
        self._retries = retries
        self._max_connections = max_connections
        self._redis = self._shared_client()
        self._scripts: dict[str, AsyncScript] = {
            name: self._redis.register_script(_script_text(name)) for name in _SCRIPTS
        }
        self._batcher = _Batcher(self._redis)
        self._bets = _BetBatches(self._submit_bets)
        self._rules_cache: dict[bytes, TableRules] = {}

    @classmethod
    def from_url(
        cls,
        url: str,
        *,
        history_events: int = DEFAULT_HISTORY_EVENTS,
        history_rounds: int = DEFAULT_HISTORY_ROUNDS,
        recall_rounds: int = DEFAULT_RECALL_ROUNDS,
        max_bets_per_round: int = DEFAULT_MAX_BETS_PER_ROUND,
        key_prefix: str = "bac",
    ) -> RedisStore:
        return cls(
            url,
            history_events=history_events,
            history_rounds=history_rounds,
            recall_rounds=recall_rounds,
            max_bets_per_round=max_bets_per_round,
            key_prefix=key_prefix,
        )

    @property
    def key_prefix(self) -> str:
        """The prefix of every key this store uses (tests and operators inspect them)."""
        return self._prefix

    def _options(self) -> dict[str, Any]:
        return {
            "socket_connect_timeout": self._timeout_s,
            "socket_timeout": self._timeout_s,
            # Reconnects on its own: a few quick retries, then the caller sees StoreUnavailable.
            "retry": Retry(ExponentialBackoff(cap=0.5, base=0.02), self._retries),
        }

    def _shared_client(self) -> Redis:
        """The client of every call but follow: a bounded pool that queues callers when full
        (the default pool refuses the 101st concurrent call outright)."""
        pool = BlockingConnectionPool.from_url(
            self._url,
            connection_class=_Connection,  # only for redis://; the URL's scheme picks others
            max_connections=self._max_connections,
            timeout=self._timeout_s,
            **self._options(),
        )
        return Redis.from_pool(pool)

    def _follow_client(self) -> Redis:
        """One connection for one follower: XREAD BLOCK holds it for up to FOLLOW_BLOCK_MS."""
        options = self._options()
        options["socket_timeout"] = self._timeout_s + FOLLOW_BLOCK_MS / 1000
        client: Redis = Redis.from_url(self._url, single_connection_client=True, **options)
        return client

    def _table_keys(self, table_id: str) -> _TableKeys:
        keys = self._tables.get(table_id)
        if keys is None:
            if len(self._tables) >= TABLE_KEYS_CACHED:  # ids from callers: keep it bounded
                self._tables.clear()
            keys = self._tables[table_id] = _TableKeys(self._prefix, table_id)
        return keys

    def _player_key(self, player: str, kind: str) -> str:
        return f"{self._prefix}:{{p:{player}}}:{kind}"

    async def _run(self, name: str, keys: Sequence[str], args: Sequence[object]) -> Any:
        return await self._submit_script(name, keys, args)

    def _submit_script(
        self, name: str, keys: Sequence[str], args: Sequence[object]
    ) -> Awaitable[Any]:
        """Queue a script call in this turn's pipeline now; await what this returns for its
        reply."""
        script = self._scripts[name]
        sent = self._batcher.submit("EVALSHA", script.sha, len(keys), *keys, *args)
        return self._script_reply(script, sent, keys, args)

    @staticmethod
    async def _script_reply(
        script: AsyncScript,
        sent: asyncio.Future[Any],
        keys: Sequence[str],
        args: Sequence[object],
    ) -> Any:
        with _reachable():
            try:
                return await sent
            except NoScriptError:  # not loaded yet, or Redis restarted: load it and go on
                return await script(keys=keys, args=args)  # type: ignore[arg-type]

    async def _call(self, *args: Any) -> Any:
        """One command, in the next pipeline (see _Batcher)."""
        with _reachable():
            return await self._batcher.call(*args)

    async def _require_table(self, table_id: str) -> None:
        with _reachable():
            exists = await self._redis.exists(self._table_keys(table_id).state)
        if not exists:
            raise _unknown_table(table_id)

    # --- tables -------------------------------------------------------------------------
    async def create_table(self, table_id: str, rules: TableRules) -> None:
        keys = self._table_keys(table_id)
        state = TableState(table_id)
        args: list[object] = [table_id, state_to_bytes(state), packb(rules.to_dict())]
        args += [state.phase.value, state.round, state.closes_at_ms, state.version]
        for spot, limit in rules.limits.spots.items():
            args += [spot.value, limit.minimum, limit.maximum]
        args.append(new_epoch())  # used only if the table is new (or has no epoch yet)
        await self._run("create_table", [keys.state, f"{self._prefix}:tables"], args)

    async def table_ids(self) -> list[str]:
        with _reachable():
            ids = await self._redis.lrange(f"{self._prefix}:tables", 0, -1)
        return [_bytes(raw).decode() for raw in ids]

    async def rules(self, table_id: str) -> TableRules | None:
        with _reachable():
            raw = await self._redis.hget(self._table_keys(table_id).state, "rules")
        return rules_from_dict(unpackb(_bytes(raw))) if raw is not None else None

    async def load_state(self, table_id: str) -> TableState | None:
        raw = await self._call("HGET", self._table_keys(table_id).state, "blob")
        return state_from_bytes(_bytes(raw)) if raw is not None else None

    def _rules_of(self, raw: bytes) -> TableRules:
        """The rules from their stored bytes; a table's rules seldom change, and every join
        reads them, so the last ones decoded per form are kept."""
        rules = self._rules_cache.get(raw)
        if rules is None:
            if len(self._rules_cache) >= 64:
                self._rules_cache.clear()
            rules = self._rules_cache[raw] = rules_from_dict(unpackb(raw))
        return rules

    async def load_header(self, table_id: str) -> TableState | None:
        fields = ("phase", "round", "version", "closes_at_ms", "shoe")
        with _reachable():
            raw: list[Any] = await self._redis.hmget(self._table_keys(table_id).state, fields)
        if raw[0] is None:
            return None
        try:
            phase, (round_no, version, closes_at_ms, shoe) = Phase(raw[0].decode()), raw[1:]
            return TableState(
                table_id,
                phase=phase,
                round=int(round_no),
                version=int(version),
                closes_at_ms=int(closes_at_ms),
                shoe_number=int(shoe or 0),  # written since format 1; 0 before
            )
        except (ValueError, TypeError) as error:
            raise StateUnreadable(f"the table's state fields cannot be read: {error!r}") from error

    async def snapshot(self, table_id: str, player: str | None) -> Snapshot | None:
        keys = self._table_keys(table_id)
        asking = ["1", player] if player is not None else ["0"]
        reply = await self._run("snapshot", [keys.state], [keys.prefix, *asking])
        if reply is None:
            return None
        blob, seq, rules, raw_bets, raw_totals, epoch = reply
        bets = [bet_from_bytes(raw) for raw in raw_bets]  # the player's own, in order
        totals = _totals(raw_totals)
        state = state_from_bytes(blob)
        rules_ = self._rules_of(rules)
        return Snapshot(
            state, int(seq), rules_, bets, totals.totals, totals.bettors, epoch=epoch.decode()
        )

    # --- players and bets ---------------------------------------------------------------
    async def ensure_player(
        self, player: str, initial_balance: int, guest_ttl_ms: int | None = None
    ) -> int:
        keys = [self._player_key(player, "balance"), self._ledger_key, *self._guest_keys]
        ttl = "" if guest_ttl_ms is None else max(int(guest_ttl_ms), 0)
        reply = await self._run("ensure_player", keys, [initial_balance, ttl, player])
        if isinstance(reply, list):
            _refused_write(reply)
        return int(reply)

    async def move_money(self, player: str, amount: int, idempotency_key: str) -> Movement:
        amount = check_movement(amount, idempotency_key)
        keys = [
            *(self._player_key(player, kind) for kind in ("balance", "movements", "moves")),
            self._player_key(player, "move_keys"),
            self._ledger_key,
        ]
        args = [player, amount, idempotency_key, MOVEMENTS_KEPT, IDEMPOTENCY_KEYS_KEPT]
        reply = await self._run("move_money", keys, [*args, MONEY_LIMIT])
        code = reply[0].decode()
        if code == "FUNDS":
            raise InsufficientFunds(player, int(reply[1]), -amount)
        if code == "LIMIT":
            raise ValueError(f"a balance of {int(reply[1])} + {amount} would pass 2**53")
        if code != "OK":
            _refused_write(reply)
        return Movement(*unpackb(reply[1]))

    async def movements(self, player: str, limit: int = MOVEMENTS_KEPT) -> list[Movement]:
        if limit <= 0:
            return []
        with _reachable():
            raw = await self._redis.lrange(self._player_key(player, "movements"), 0, limit - 1)
        return [Movement(*unpackb(_bytes(item))) for item in raw]

    async def keep_guests(self, players: Collection[str]) -> None:
        names = list(players)
        for first in range(0, len(names), KEEP_BATCH):  # short scripts, sent together
            batch = names[first : first + KEEP_BATCH]
            await self._run("keep_guests", list(self._guest_keys), batch)

    async def expire_guests(self, now_ms: int | None = None) -> int:
        now = await self.now_ms() if now_ms is None else now_ms
        keys = [*self._guest_keys, self._ledger_key]
        removed = offset = 0
        while True:  # a batch per script, so no one script holds Redis long
            gone, looked_at, skipped = await self._run(
                "expire_guests", keys, [now, offset, EXPIRE_BATCH, self._prefix]
            )
            removed, offset = removed + gone, offset + skipped  # skip those with bets in play
            if looked_at < EXPIRE_BATCH:
                return int(removed)

    async def history(
        self, player: str, table_id: str | None = None, limit: int = 20
    ) -> list[dict[str, Any]]:
        if limit <= 0:
            return []
        # Filtering by table reads every record kept (at most recall_rounds, small).
        last = limit - 1 if table_id is None else -1
        with _reachable():
            raw = await self._redis.lrange(self._player_key(player, "history"), 0, last)
        records = []
        for item in raw:
            time_ms, balance_after, body = unpackb(_bytes(item))
            if table_id is None or body["table"] == table_id:
                records.append(history_record(body, time_ms, balance_after))
        return records[:limit]

    async def balance(self, player: str) -> int | None:
        raw = await self._call("GET", self._player_key(player, "balance"))
        return int(raw) if raw is not None else None

    async def place_bet(
        self,
        table_id: str,
        player: str,
        round_no: object,
        bet_id: str,
        spot: object,
        amount: object,
    ) -> BetReceipt:
        try:
            spot_: Spot | None = parse_spot(spot)
        except BetRejected:
            spot_ = None  # refused by the script, after the window checks, like the core
        amount_arg = str(amount) if type(amount) is int and amount > 0 else ""
        reply = await self._bets.place(
            table_id,
            [self._player_key(player, "balance"), self._player_key(player, "in_play")],
            [player, bet_id, _round_arg(round_no), spot_.value if spot_ else "", amount_arg],
        )
        if reply[0] != b"OK":
            self._refuse(table_id, reply, round_no, spot, amount)
        return BetReceipt(*unpackb(reply[1]))

    def _submit_bets(self, table_id: str, keys: list[str], args: list[str]) -> Awaitable[Any]:
        """One place_bet script for a batch of bets on one table (see _BetBatches)."""
        table = self._table_keys(table_id)
        return self._submit_script(
            "place_bet",
            [table.state, table.rounds, self._ledger_key, *self._guest_keys, *keys],
            [table_id, table.prefix, self._history[1], self._max_bets, *args],
        )

    @staticmethod
    def _refuse(
        table_id: str, reply: list[Any], round_no: object, spot: object, amount: object
    ) -> NoReturn:
        """Raise the BetRejected the memory engine would, from the script's refusal."""
        code = reply[0].decode()
        if code == "BROKEN":
            raise StoreDataError(f"bet not placed, nothing written: {reply[1].decode()}")
        if code == "UNKNOWN_TABLE":
            raise _unknown_table(table_id)
        if code == "CLOSED":
            raise BetRejected(RejectCode.BETTING_CLOSED, "betting is closed for this round")
        if code == "ROUND":
            current = int(reply[1])
            raise BetRejected(
                RejectCode.WRONG_ROUND, f"round {round_no!r} is not open; {current} is"
            )
        spot_ = parse_spot(spot)  # raises UNKNOWN_SPOT for code SPOT
        if code == "TOO_MANY":
            raise too_many_bets(int(reply[1]))
        # MONEY: the core names the rule that failed, from the values the script saw.
        low, high, on_spot, balance = reply[1:5]
        spots = {spot_: SpotLimit(int(low), int(high))} if low else {}
        verify_bet(TableLimits(spots), spot_, amount, int(on_spot), int(balance))
        raise AssertionError(f"place_bet script refused ({code}) a bet the core accepts")

    async def round_bets(self, table_id: str, round_no: int) -> list[Bet]:
        # Read and decoded a page at a time: the node's loop runs other work between pages
        # instead of decoding a round of 40,000 bets in one go (~100 ms). The list only ever
        # grows at its end, so the pages make one consistent prefix.
        key = self._table_keys(table_id).per_round("bets", round_no)
        bets: list[Bet] = []
        while True:
            with _reachable():
                raw = await self._redis.lrange(key, len(bets), len(bets) + ROUND_BETS_PAGE - 1)
            bets += [bet_from_bytes(_bytes(item)) for item in raw]
            if len(raw) < ROUND_BETS_PAGE:
                break
        if not bets:
            await self._require_table(table_id)
        return bets

    async def bet_totals(self, table_id: str, round_no: int) -> BetTotals:
        with _reachable():
            raw = await self._redis.hgetall(
                self._table_keys(table_id).per_round("totals", round_no)
            )
        if not raw:
            await self._require_table(table_id)
            return BetTotals()
        return _totals([item for pair in raw.items() for item in pair])

    # --- the owner's transitions ----------------------------------------------------------
    async def commit(
        self,
        table_id: str,
        fence: int,
        expected_version: int,
        state: TableState,
        events: list[EventPayload],
        payouts: list[Payout] | None = None,
        summary: RoundSummary | None = None,
    ) -> list[Event]:
        keys = self._table_keys(table_id)
        args: list[object] = [table_id, keys.prefix, *self._history, fence, expected_version]
        args += [state_to_bytes(state), state.phase.value, state.round, state.closes_at_ms]
        args += [state.version, state.shoe_number, self._recall_rounds, len(events)]
        for payload in events:
            args += template(table_id, state.round, payload)
        players = []
        for player, mine in _by_player(payouts or []).items():
            credit, staked = sum(p.credit for p in mine), sum(p.amount for p in mine)
            args += [player, credit, -staked, staked - credit, packb([p.to_dict() for p in mine])]
            args.append(packb(record_body(table_id, state.round, mine, summary)))
            players += [self._player_key(player, kind) for kind in ("balance", "in_play")]
            players.append(self._player_key(player, "history"))
        args.append(self._settled_channel)  # a paying commit publishes its notice there
        script_keys = [keys.state, keys.stream, keys.rounds, self._ledger_key, *players]
        reply = await self._run("commit", script_keys, args)
        code = reply[0].decode()
        if code == "UNKNOWN_TABLE":
            raise _unknown_table(table_id)
        if code == "FENCE":
            raise StaleWrite(f"fencing token {fence} is not the lease holder's")
        if code == "VERSION":
            raise StaleWrite(f"version {expected_version} is stale; at {int(reply[1])}")
        if code == "BROKEN":
            raise StoreDataError(f"commit not written, nothing was: {reply[1].decode()}")
        return [unpackb(raw) for raw in reply[1:]]

    async def settlement(self, table_id: str, round_no: int, player: str) -> Settlement | None:
        key = self._table_keys(table_id).per_round("settle", round_no)
        with _reachable():
            raw = await self._redis.hget(key, player)
        if raw is None:
            await self._require_table(table_id)
            return None
        payouts, balance = unpackb(_bytes(raw))
        return Settlement(table_id, round_no, payouts, balance)

    async def settlements(
        self, table_id: str, round_no: int, players: Collection[str]
    ) -> dict[str, Settlement]:
        names = list(dict.fromkeys(players))
        if not names:
            await self._require_table(table_id)
            return {}
        key = self._table_keys(table_id).per_round("settle", round_no)
        with _reachable():
            raws = await self._redis.hmget(key, names)  # one round trip for every bettor
        found: dict[str, Settlement] = {}
        for player, raw in zip(names, raws, strict=True):
            if raw is not None:
                payouts, balance = unpackb(_bytes(raw))
                found[player] = Settlement(table_id, round_no, payouts, balance)
        if not found:
            await self._require_table(table_id)
        return found

    # --- settled notices (commit.lua publishes them) --------------------------------------
    @property
    def _settled_channel(self) -> str:
        return f"{self._prefix}:settled"

    @contextlib.asynccontextmanager
    async def settled_notices(self) -> AsyncIterator[AsyncIterator[SettledNotice]]:
        # A connection of its own, which fails at once instead of reconnecting quietly: a
        # subscription lost while Redis was away must be seen (and entered again) by the caller.
        options = self._options()
        options["retry"] = Retry(NoBackoff(), 0)
        options["socket_timeout"] = self._timeout_s + NOTICE_POLL_S
        options["health_check_interval"] = NOTICE_HEALTH_S
        client: Redis = Redis.from_url(self._url, **options)
        pubsub: Any = client.pubsub()
        try:
            await self._subscribe(pubsub)
            yield self._notices(pubsub)
        finally:
            with contextlib.suppress(Exception):  # a connection already lost is gone anyway
                await pubsub.aclose()
            await client.aclose()

    async def _subscribe(self, pubsub: Any) -> None:
        """Subscribe, and wait until Redis confirms: the subscription is live from then on."""
        try:
            with _reachable():
                await pubsub.subscribe(self._settled_channel)
                async with asyncio.timeout(self._timeout_s):
                    while await pubsub.get_message(timeout=NOTICE_POLL_S) is None:
                        pass
        except TimeoutError as exc:
            raise StoreUnavailable("redis did not confirm the subscription") from exc

    @staticmethod
    async def _notices(pubsub: Any) -> AsyncIterator[SettledNotice]:
        while True:
            with _reachable():
                message = await pubsub.get_message(
                    ignore_subscribe_messages=True, timeout=NOTICE_POLL_S
                )
            if message is None or message["type"] != "message":
                continue
            notice = _notice_of(message["data"])
            if notice is None:  # not ours (anyone may PUBLISH): skipped, the listener goes on
                _log.warning("settled_notice_malformed", size=len(message["data"]))
                continue
            yield notice

    # --- events ---------------------------------------------------------------------------
    async def last_seq(self, table_id: str) -> int:
        with _reachable():
            raw = await self._redis.hget(self._table_keys(table_id).state, "seq")
        if raw is None:
            raise _unknown_table(table_id)
        return int(raw)

    async def epoch(self, table_id: str) -> str:
        return (await self.head(table_id))[1]

    async def head(self, table_id: str) -> tuple[int, str]:
        seq, epoch = await self._call("HMGET", self._table_keys(table_id).state, "seq", "epoch")
        if seq is None:
            raise _unknown_table(table_id)
        return int(seq), _bytes(epoch).decode() if epoch is not None else ""

    async def reset_epoch(self, table_id: str, seen: str) -> str:
        reply = await self._run(
            "reset_epoch", [self._table_keys(table_id).state], [seen, new_epoch()]
        )
        if reply is None:
            raise _unknown_table(table_id)
        return _bytes(reply).decode()

    async def events_after(self, table_id: str, seq: int, limit: int = 1000) -> list[Event] | None:
        if seq < 0:
            await self._require_table(table_id)
            return None
        stream = self._table_keys(table_id).stream
        with _reachable():
            entries = await self._redis.xrange(stream, f"{seq + 1}-0", "+", count=max(limit, 1))
        if not entries:
            await self._require_table(table_id)
            return []
        if _entry_seq(entries[0][0]) != seq + 1:
            return None  # trimmed: the stream no longer starts right after `seq`
        return [_entry_event(fields) for _, fields in entries[: max(limit, 0)]]

    async def round_events(self, table_id: str, round_no: int) -> list[Event] | None:
        key = self._table_keys(table_id).per_round("round", round_no)
        with _reachable():
            raw = await self._redis.lrange(key, 0, -1)
        if not raw:
            await self._require_table(table_id)
            return None
        return [unpackb(_bytes(item)) for item in raw]

    async def follow(self, table_id: str, after_seq: int) -> AsyncIterator[Event]:
        await self._require_table(table_id)
        if after_seq < 0:
            raise LookupError(f"events after {after_seq} are no longer held")
        stream = self._table_keys(table_id).stream
        client = self._follow_client()  # a blocking read must not hold a shared connection
        try:
            while True:
                with _reachable():
                    reply: Any = await client.xread(
                        {stream: f"{after_seq}-0"}, count=1000, block=FOLLOW_BLOCK_MS
                    )
                for _stream, entries in reply or []:
                    for entry_id, fields in entries:
                        if _entry_seq(entry_id) != after_seq + 1:
                            raise LookupError(f"events after {after_seq} are no longer held")
                        yield _entry_event(fields)
                        after_seq += 1
        finally:
            await client.aclose()

    # --- ownership --------------------------------------------------------------------------
    async def acquire_lease(self, table_id: str, node: str, ttl_ms: int) -> Lease | None:
        keys = self._table_keys(table_id)
        reply = await self._run("acquire_lease", [keys.state, keys.lease], [node, max(ttl_ms, 1)])
        code = reply[0].decode()
        if code == "UNKNOWN_TABLE":
            raise _unknown_table(table_id)
        if code == "HELD":
            return None
        return Lease(table_id, node, int(reply[1]), int(reply[2]))

    async def release_lease(self, table_id: str, node: str, token: int) -> None:
        keys = self._table_keys(table_id)
        reply = await self._run("release_lease", [keys.state, keys.lease], [node, token])
        if reply[0] == b"UNKNOWN_TABLE":
            raise _unknown_table(table_id)

    async def lease(self, table_id: str) -> Lease | None:
        keys = self._table_keys(table_id)
        reply = await self._run("lease", [keys.state, keys.lease], [])
        code = reply[0].decode()
        if code == "UNKNOWN_TABLE":
            raise _unknown_table(table_id)
        if code == "NONE":
            return None
        return Lease(table_id, reply[1].decode(), int(reply[2]), int(reply[3]))

    # --- operator controls ----------------------------------------------------------------
    def _paused_key(self, table_id: str) -> str:
        return self._table_keys(table_id).prefix + "paused"

    async def set_paused(self, table_id: str, paused: bool) -> bool:
        key = self._paused_key(table_id)
        with _reachable():
            if paused:
                return bool(await self._redis.set(key, b"1", nx=True))
            return bool(await self._redis.delete(key))

    async def paused(self, table_id: str) -> bool:
        with _reachable():
            return bool(await self._redis.exists(self._paused_key(table_id)))

    # --- housekeeping ---------------------------------------------------------------------
    async def now_ms(self) -> int:
        seconds, micros = await self._call("TIME")
        return int(seconds) * 1000 + int(micros) // 1000

    async def ledger(self) -> Ledger:
        fields = ("issued", "balances", "in_play", "house", "operator_in", "operator_out")
        with _reachable():
            raw = await self._redis.hmget(self._ledger_key, [*fields, "expired"])
        return Ledger(*(int(value or 0) for value in raw))

    async def close(self) -> None:
        await self._bets.close()
        await self._batcher.close()
        await self._redis.aclose()


def _refused_write(reply: list[Any]) -> NoReturn:
    """Raise what a money script's {'LEDGER', counter} or {'BROKEN', reason} means."""
    code, detail = reply[0].decode(), reply[1].decode()
    if code == "LEDGER":
        raise LedgerLimit(detail)
    raise StoreDataError(f"nothing written: {detail}")


def _by_player(payouts: list[Payout]) -> dict[str, list[Payout]]:
    grouped: dict[str, list[Payout]] = {}
    for payout in payouts:
        grouped.setdefault(payout.player, []).append(payout)
    return grouped


def _notice_of(data: bytes) -> SettledNotice | None:
    """The notice a commit script published ([table, round, [player, ...]]), or None."""
    try:
        table_id, round_no, players = unpackb(data)
    except Exception:  # any bytes at all may arrive on a pub/sub channel
        return None
    if (
        not isinstance(table_id, str)
        or type(round_no) is not int
        or not isinstance(players, list)
        or not all(isinstance(player, str) for player in players)
    ):
        return None
    return SettledNotice(table_id, round_no, tuple(players))
