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

This module holds the engine's tables, bets, commits, settlements and leases; the rest is in
parts RedisStore inherits (server/store/redis_base.py lists them) and in helpers: the key
layout (redis_keys.py), the scripts (redis_scripts.py), the command and bet batching
(redis_link.py, redis_bets.py), the connection and its errors (redis_client.py) and the
reading of replies (redis_replies.py).
"""

from __future__ import annotations

import asyncio
from collections.abc import Awaitable, Collection
from typing import Any

from server.core.bets import Bet, BetTotals, Payout, payouts_by_player
from server.core.events import EventPayload
from server.core.recall import RoundSummary
from server.core.rules import TableRules
from server.core.table import Phase, TableState, entropy_window
from server.store.audit import DEFAULT_AUDIT_ENTRIES, DEFAULT_AUDIT_KEEP_MS, paying_kind
from server.store.base import (
    DEFAULT_HISTORY_EVENTS,
    DEFAULT_HISTORY_ROUNDS,
    DEFAULT_MAX_BETS_PER_ROUND,
    BetReceipt,
    Event,
    Lease,
    Settlement,
    Snapshot,
    StaleWrite,
    StateUnreadable,
    StoreDataError,
    new_epoch,
)
from server.store.codec import (
    bet_from_bytes,
    packb,
    rules_from_dict,
    state_from_bytes,
    state_to_bytes,
    unpackb,
)
from server.store.outbox import round_entries
from server.store.recall import record_body
from server.store.redis_audit import RedisAudit
from server.store.redis_bets import BetBatches, bet_args, refuse
from server.store.redis_client import reachable
from server.store.redis_entropy import RedisEntropy
from server.store.redis_events import RedisEvents
from server.store.redis_guests import RedisGuests
from server.store.redis_notices import RedisNotices
from server.store.redis_outbox import RedisOutbox, owed_arg
from server.store.redis_replies import as_bytes, flat_pairs, totals_of, unknown_table
from server.store.redis_wallet import RedisWallet
from server.store.wallet import DEFAULT_RECALL_ROUNDS
from server.wire.envelope import template

__all__ = ["RedisStore"]

ROUND_BETS_PAGE = 1000  # bets one read of a round's list takes (and the node decodes at once)


class RedisStore(
    RedisWallet, RedisAudit, RedisGuests, RedisEvents, RedisNotices, RedisEntropy, RedisOutbox
):
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
        audit_keep_ms: int = DEFAULT_AUDIT_KEEP_MS,
        audit_entries: int = DEFAULT_AUDIT_ENTRIES,
        outbox: bool = False,
    ) -> None:
        super().__init__(
            url,
            key_prefix=key_prefix,
            timeout_s=timeout_s,
            retries=retries,
            max_connections=max_connections,
            audit_keep_ms=audit_keep_ms,
            audit_entries=audit_entries,
        )
        self._history = (max(history_events, 1), max(history_rounds, 1))
        self._recall_rounds = max(recall_rounds, 1)
        self._max_bets = max(max_bets_per_round, 1)
        self._bets = BetBatches(self._submit_bets)
        self._rules_cache: dict[bytes, TableRules] = {}
        self._start_outbox(outbox)  # with an HTTP wallet, bets and commits use the outbox

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
        audit_keep_ms: int = DEFAULT_AUDIT_KEEP_MS,
        audit_entries: int = DEFAULT_AUDIT_ENTRIES,
        outbox: bool = False,
    ) -> RedisStore:
        return cls(
            url,
            history_events=history_events,
            history_rounds=history_rounds,
            recall_rounds=recall_rounds,
            max_bets_per_round=max_bets_per_round,
            key_prefix=key_prefix,
            audit_keep_ms=audit_keep_ms,
            audit_entries=audit_entries,
            outbox=outbox,
        )

    # --- tables -------------------------------------------------------------------------
    async def create_table(self, table_id: str, rules: TableRules) -> None:
        keys = self._table_keys(table_id)
        state = TableState(table_id)
        args: list[object] = [table_id, state_to_bytes(state), packb(rules.to_dict())]
        args += [state.phase.value, state.round, state.closes_at_ms, state.version]
        for spot, limit in rules.limits.spots.items():
            args += [spot.value, limit.minimum, limit.maximum]
        args.append(new_epoch())  # used only if the table is new (or has no epoch yet)
        await self._run("create_table", [keys.state, self._keys.tables], args)

    async def table_ids(self) -> list[str]:
        with reachable():
            ids = await self._redis.lrange(self._keys.tables, 0, -1)
        return [as_bytes(raw).decode() for raw in ids]

    async def rules(self, table_id: str) -> TableRules | None:
        with reachable():
            raw = await self._redis.hget(self._table_keys(table_id).state, "rules")
        return rules_from_dict(unpackb(as_bytes(raw))) if raw is not None else None

    async def load_state(self, table_id: str) -> TableState | None:
        raw = await self._call("HGET", self._table_keys(table_id).state, "blob")
        return state_from_bytes(as_bytes(raw)) if raw is not None else None

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
        with reachable():
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
        totals = totals_of(raw_totals)
        state = state_from_bytes(blob)
        rules_ = self._rules_of(rules)
        return Snapshot(
            state, int(seq), rules_, bets, totals.totals, totals.bettors, epoch=epoch.decode()
        )

    # --- bets ---------------------------------------------------------------------------
    async def place_bet(
        self,
        table_id: str,
        player: str,
        round_no: object,
        bet_id: str,
        spot: object,
        amount: object,
    ) -> BetReceipt:
        key = self._player_key
        reply = await self._bets.place(
            table_id,
            [key(player, "balance"), key(player, "in_play"), key(player, "audit")],
            bet_args(player, round_no, bet_id, spot, amount),
        )
        if reply[0] != b"OK":
            refuse(table_id, reply, round_no, spot, amount)
        return BetReceipt(*unpackb(reply[1]))

    def _submit_bets(self, table_id: str, keys: list[str], args: list[str]) -> Awaitable[Any]:
        """One place_bet script for a batch of bets on one table (see redis_bets.BetBatches)."""
        return self._submit_place_bet("", table_id, keys, args)  # "": the internal wallet

    def _bet_args(self, table_id: str, prefix: str) -> list[object]:
        return [table_id, prefix, self._history[1], self._max_bets, *self._audit_keep]

    async def round_bets(self, table_id: str, round_no: int) -> list[Bet]:
        # Read and decoded a page at a time: the node's loop runs other work between pages
        # instead of decoding a round of 40,000 bets in one go (~100 ms). The list only ever
        # grows at its end, so the pages make one consistent prefix.
        key = self._table_keys(table_id).per_round("bets", round_no)
        bets: list[Bet] = []
        while True:
            with reachable():
                raw = await self._redis.lrange(key, len(bets), len(bets) + ROUND_BETS_PAGE - 1)
            bets += [bet_from_bytes(as_bytes(item)) for item in raw]
            if len(raw) < ROUND_BETS_PAGE:
                break
        if not bets:
            await self._require_table(table_id)
        return bets

    async def bet_totals(self, table_id: str, round_no: int) -> BetTotals:
        # The table loop asks a few times a second while betting is open: both reads in one
        # write of the turn's pipeline, whether there are bets or not (none: is the table
        # there at all?), not two calls of the pooled client.
        keys = self._table_keys(table_id)
        with reachable():
            raw, exists = await asyncio.gather(
                self._batcher.submit("HGETALL", keys.per_round("totals", round_no)),
                self._batcher.submit("EXISTS", keys.state),
            )
        if not raw:
            if not exists:
                raise unknown_table(table_id)
            return BetTotals()
        return totals_of(flat_pairs(raw))

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
        args.append(entropy_window(state))
        for payload in events:
            args += template(table_id, state.round, payload)
        players = []
        # With an HTTP wallet a player's "balance" is the wallet's latest (outbox.py).
        kinds = ("wallet" if self.outbox else "balance", "in_play", "history", "audit")
        for player, mine in payouts_by_player(payouts or []).items():
            credit, staked = sum(p.credit for p in mine), sum(p.amount for p in mine)
            args += [player, credit, -staked, staked - credit, packb([p.to_dict() for p in mine])]
            args.append(packb(record_body(table_id, state.round, mine, summary)))
            players += [self._player_key(player, kind) for kind in kinds]
        kind = paying_kind(state, summary)
        if self.outbox and payouts:
            owed = round_entries(table_id, state.round, payouts, kind == "refund")
            args += [self._keys.outbox, owed_arg(owed)]
        else:
            args += ["", ""]
        args += [kind, *self._audit_keep]  # its audit entries
        args.append(self._keys.settled)  # a paying commit publishes its notice there
        script_keys = [keys.state, keys.stream, keys.rounds, self._keys.ledger, *players]
        reply = await self._run("commit", script_keys, args)
        code = reply[0].decode()
        if code == "UNKNOWN_TABLE":
            raise unknown_table(table_id)
        if code == "FENCE":
            raise StaleWrite(f"fencing token {fence} is not the lease holder's")
        if code == "VERSION":
            raise StaleWrite(f"version {expected_version} is stale; at {int(reply[1])}")
        if code == "BROKEN":
            raise StoreDataError(f"commit not written, nothing was: {reply[1].decode()}")
        return [unpackb(raw) for raw in reply[1:]]

    async def settlement(self, table_id: str, round_no: int, player: str) -> Settlement | None:
        key = self._table_keys(table_id).per_round("settle", round_no)
        with reachable():
            raw = await self._redis.hget(key, player)
        if raw is None:
            await self._require_table(table_id)
            return None
        payouts, balance = unpackb(as_bytes(raw))
        return Settlement(table_id, round_no, payouts, balance)

    async def settlements(
        self, table_id: str, round_no: int, players: Collection[str]
    ) -> dict[str, Settlement]:
        names = list(dict.fromkeys(players))
        if not names:
            await self._require_table(table_id)
            return {}
        key = self._table_keys(table_id).per_round("settle", round_no)
        with reachable():
            raws = await self._redis.hmget(key, names)  # one round trip for every bettor
        found: dict[str, Settlement] = {}
        for player, raw in zip(names, raws, strict=True):
            if raw is not None:
                payouts, balance = unpackb(as_bytes(raw))
                found[player] = Settlement(table_id, round_no, payouts, balance)
        if not found:
            await self._require_table(table_id)
        return found

    # --- ownership --------------------------------------------------------------------------
    async def acquire_lease(self, table_id: str, node: str, ttl_ms: int) -> Lease | None:
        keys = self._table_keys(table_id)
        reply = await self._run("acquire_lease", [keys.state, keys.lease], [node, max(ttl_ms, 1)])
        code = reply[0].decode()
        if code == "UNKNOWN_TABLE":
            raise unknown_table(table_id)
        if code == "HELD":
            return None
        return Lease(table_id, node, int(reply[1]), int(reply[2]))

    async def release_lease(self, table_id: str, node: str, token: int) -> None:
        keys = self._table_keys(table_id)
        reply = await self._run("release_lease", [keys.state, keys.lease], [node, token])
        if reply[0] == b"UNKNOWN_TABLE":
            raise unknown_table(table_id)

    async def lease(self, table_id: str) -> Lease | None:
        keys = self._table_keys(table_id)
        reply = await self._run("lease", [keys.state, keys.lease], [])
        code = reply[0].decode()
        if code == "UNKNOWN_TABLE":
            raise unknown_table(table_id)
        if code == "NONE":
            return None
        return Lease(table_id, reply[1].decode(), int(reply[2]), int(reply[3]))

    # --- operator controls ----------------------------------------------------------------
    async def set_paused(self, table_id: str, paused: bool) -> bool:
        key = self._table_keys(table_id).paused
        with reachable():
            if paused:
                return bool(await self._redis.set(key, b"1", nx=True))
            return bool(await self._redis.delete(key))

    async def paused(self, table_id: str) -> bool:
        return bool(await self._call("EXISTS", self._table_keys(table_id).paused))

    # --- housekeeping ---------------------------------------------------------------------
    async def now_ms(self) -> int:
        seconds, micros = await self._call("TIME")
        return int(seconds) * 1000 + int(micros) // 1000

    async def close(self) -> None:
        for batches in (self._bets, self._holds, self._records):
            await batches.close()
        await super().close()
