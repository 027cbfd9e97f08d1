"""The in-memory engine: the embedded default, one process, no setup.

Every method runs to completion without awaiting in between its check and its write, so on
one event loop each is atomic, the same guarantee the Redis engine gets from Lua scripts. It
keeps the state as the Redis engine does, an encoded blob beside the few fields bets are
checked against, so both read, migrate and fail to read a state the same way.
"""

from __future__ import annotations

import asyncio
from collections import OrderedDict, deque
from collections.abc import AsyncIterator, Callable, Collection
from dataclasses import dataclass, field

from server.core.bets import Bet, BetTotals, Payout, Spot, parse_spot, verify_bet
from server.core.errors import BetRejected, RejectCode
from server.core.events import Payload
from server.core.rules import TableRules
from server.core.table import TableState, verify_bet_window
from server.store.base import (
    DEFAULT_HISTORY_EVENTS,
    DEFAULT_HISTORY_ROUNDS,
    BetReceipt,
    Event,
    Lease,
    Ledger,
    Settlement,
    Snapshot,
    StaleWrite,
    Store,
    new_epoch,
)
from server.store.codec import state_from_bytes, state_to_bytes

__all__ = ["MemoryStore"]


@dataclass(slots=True)
class _Round:
    """One round's records, kept and forgotten together (the last history_rounds rounds)."""

    events: list[Event] = field(default_factory=list)
    bets: list[Bet] = field(default_factory=list)
    # Running totals, so a bet costs the same however many were placed before it.
    mine: dict[str, list[Bet]] = field(default_factory=dict)  # player -> their bets
    stakes: dict[tuple[str, Spot], int] = field(default_factory=dict)  # limits: per player+spot
    totals: dict[str, int] = field(default_factory=dict)  # spot -> all players' stakes
    receipts: dict[tuple[str, str], BetReceipt] = field(default_factory=dict)  # (player, bet_id)
    settlements: dict[str, Settlement] = field(default_factory=dict)

    def bet_totals(self) -> BetTotals:
        return BetTotals.of(self.totals, len(self.mine), len(self.bets))


def _header(state: TableState) -> TableState:
    """The fields the Redis engine keeps outside its state blob, and no shoe."""
    return TableState(
        state.table_id,
        phase=state.phase,
        round=state.round,
        version=state.version,
        closes_at_ms=state.closes_at_ms,
        shoe_number=state.shoe_number,
    )


@dataclass(slots=True)
class _Table:
    rules: TableRules
    header: TableState  # what bets are checked against, readable whatever the blob holds
    blob: bytes  # the state, stored as the Redis engine stores it (so it can be unreadable)
    seq: int = 0
    events: deque[Event] = field(default_factory=deque)
    rounds: OrderedDict[int, _Round] = field(default_factory=OrderedDict)
    receipt_rounds: dict[tuple[str, str], int] = field(default_factory=dict)  # -> its round
    lease: Lease | None = None
    fence: int = 0  # last fencing token handed out
    wakeup: asyncio.Event = field(default_factory=asyncio.Event)
    epoch: str = field(default_factory=new_epoch)  # new per table and per process


class MemoryStore(Store):
    def __init__(
        self,
        now_ms: Callable[[], int],
        history_events: int = DEFAULT_HISTORY_EVENTS,
        history_rounds: int = DEFAULT_HISTORY_ROUNDS,
    ) -> None:
        self._now_ms = now_ms
        self._history_events = history_events
        self._history_rounds = max(history_rounds, 1)
        self._tables: dict[str, _Table] = {}
        self._balances: dict[str, int] = {}
        self._issued = 0
        self._in_play = 0
        self._house = 0

    def _table(self, table_id: str) -> _Table:
        table = self._tables.get(table_id)
        if table is None:
            raise BetRejected(RejectCode.UNKNOWN_TABLE, f"no table {table_id!r}")
        return table

    def _round(self, table: _Table, round_no: int) -> _Round:
        """The round's records, made on first use; the oldest round beyond history_rounds is
        forgotten with everything it holds. A retried bet for a forgotten round is refused as
        WRONG_ROUND, so forgetting its receipt can never debit twice."""
        record = table.rounds.get(round_no)
        if record is None:
            record = table.rounds[round_no] = _Round()
            while len(table.rounds) > self._history_rounds:
                _, old = table.rounds.popitem(last=False)
                for key in old.receipts:
                    del table.receipt_rounds[key]
        return record

    # --- tables -------------------------------------------------------------------------
    async def create_table(self, table_id: str, rules: TableRules) -> None:
        if table_id not in self._tables:
            state = TableState(table_id)
            self._tables[table_id] = _Table(rules, _header(state), state_to_bytes(state))

    async def table_ids(self) -> list[str]:
        return list(self._tables)

    async def rules(self, table_id: str) -> TableRules | None:
        table = self._tables.get(table_id)
        return table.rules if table else None

    async def load_state(self, table_id: str) -> TableState | None:
        table = self._tables.get(table_id)
        return state_from_bytes(table.blob) if table else None

    async def load_header(self, table_id: str) -> TableState | None:
        table = self._tables.get(table_id)
        return table.header if table else None

    async def snapshot(self, table_id: str, player: str | None) -> Snapshot | None:
        table = self._tables.get(table_id)
        if table is None:
            return None
        state = state_from_bytes(table.blob)
        record = table.rounds.get(state.round, _Round())
        mine = list(record.mine.get(player, [])) if player is not None else []
        totals = record.bet_totals()
        return Snapshot(
            state, table.seq, table.rules, mine, totals.totals, totals.bettors, epoch=table.epoch
        )

    # --- players and bets ---------------------------------------------------------------
    async def ensure_player(
        self, player: str, initial_balance: int, guest_ttl_ms: int | None = None
    ) -> int:
        if player not in self._balances:
            self._balances[player] = initial_balance
            self._issued += initial_balance
        return self._balances[player]

    async def balance(self, player: str) -> int | None:
        return self._balances.get(player)

    async def place_bet(
        self,
        table_id: str,
        player: str,
        round_no: object,
        bet_id: str,
        spot: object,
        amount: object,
    ) -> BetReceipt:
        table = self._table(table_id)
        key = (player, bet_id)
        held = table.receipt_rounds.get(key)
        if held is not None:
            # The same bet_id again: the first answer, no second debit.
            return table.rounds[held].receipts[key]
        verify_bet_window(table.header, round_no, self._now_ms())
        spot_ = parse_spot(spot)
        balance = self._balances.get(player, 0)
        record = self._round(table, table.header.round)
        on_spot = record.stakes.get((player, spot_), 0)
        verify_bet(table.rules.limits, spot_, amount, on_spot, balance)
        assert isinstance(amount, int)
        self._balances[player] = balance - amount
        self._in_play += amount
        placed = Bet(bet_id, player, spot_, amount)
        record.bets.append(placed)
        record.mine.setdefault(player, []).append(placed)
        record.stakes[(player, spot_)] = on_spot + amount
        record.totals[spot_.value] = record.totals.get(spot_.value, 0) + amount
        receipt = BetReceipt(
            table_id, table.header.round, bet_id, spot_.value, amount, balance - amount
        )
        record.receipts[key] = receipt
        table.receipt_rounds[key] = receipt.round
        return receipt

    async def round_bets(self, table_id: str, round_no: int) -> list[Bet]:
        record = self._table(table_id).rounds.get(round_no)
        return list(record.bets) if record else []

    async def bet_totals(self, table_id: str, round_no: int) -> BetTotals:
        record = self._table(table_id).rounds.get(round_no)
        return record.bet_totals() if record else BetTotals()

    # --- the owner's transitions ----------------------------------------------------------
    async def commit(
        self,
        table_id: str,
        fence: int,
        expected_version: int,
        state: TableState,
        events: list[Payload],
        payouts: list[Payout] | None = None,
    ) -> list[Event]:
        table = self._table(table_id)
        if table.lease is None or table.lease.token != fence:
            raise StaleWrite(f"fencing token {fence} is not the lease holder's")
        if table.header.version != expected_version:
            raise StaleWrite(f"version {expected_version} is stale; at {table.header.version}")
        table.blob, table.header = state_to_bytes(state), _header(state)
        if payouts:
            self._credit(table, state, payouts)
        return self._append(table, events)

    def _credit(self, table: _Table, state: TableState, payouts: list[Payout]) -> None:
        by_player: dict[str, list[Payout]] = {}
        for payout in payouts:
            by_player.setdefault(payout.player, []).append(payout)
            self._balances[payout.player] = self._balances.get(payout.player, 0) + payout.credit
            self._in_play -= payout.amount
            self._house += payout.amount - payout.credit
        record = self._round(table, state.round)
        for player, mine in by_player.items():
            record.settlements[player] = Settlement(
                state.table_id, state.round, [p.to_dict() for p in mine], self._balances[player]
            )

    async def settlement(self, table_id: str, round_no: int, player: str) -> Settlement | None:
        record = self._table(table_id).rounds.get(round_no)
        return record.settlements.get(player) if record else None

    async def settlements(
        self, table_id: str, round_no: int, players: Collection[str]
    ) -> dict[str, Settlement]:
        record = self._table(table_id).rounds.get(round_no)
        held = record.settlements if record else {}
        return {player: held[player] for player in players if player in held}

    # --- events ---------------------------------------------------------------------------
    def _append(self, table: _Table, payloads: list[Payload]) -> list[Event]:
        stored = []
        now = self._now_ms()
        for payload in payloads:
            table.seq += 1
            ev: Event = {
                "type": "event",
                "table": table.header.table_id,
                "seq": table.seq,
                "round": table.header.round,
                "ts": now,
                **payload,
            }
            stored.append(ev)
            table.events.append(ev)
            self._round(table, ev["round"]).events.append(ev)
        while len(table.events) > self._history_events:
            table.events.popleft()
        if stored:
            table.wakeup.set()
            table.wakeup = asyncio.Event()
        return stored

    async def last_seq(self, table_id: str) -> int:
        return self._table(table_id).seq

    async def epoch(self, table_id: str) -> str:
        return self._table(table_id).epoch

    async def head(self, table_id: str) -> tuple[int, str]:
        table = self._table(table_id)
        return table.seq, table.epoch

    async def reset_epoch(self, table_id: str, seen: str) -> str:
        table = self._table(table_id)
        if table.epoch == seen:
            table.epoch = new_epoch()
        return table.epoch

    async def events_after(self, table_id: str, seq: int, limit: int = 1000) -> list[Event] | None:
        table = self._table(table_id)
        if seq >= table.seq:
            return []
        first = table.events[0]["seq"] if table.events else table.seq + 1
        if seq < first - 1:
            return None
        start = seq - first + 1
        return [table.events[i] for i in range(start, min(start + limit, len(table.events)))]

    async def round_events(self, table_id: str, round_no: int) -> list[Event] | None:
        record = self._table(table_id).rounds.get(round_no)
        return list(record.events) if record is not None and record.events else None

    async def follow(self, table_id: str, after_seq: int) -> AsyncIterator[Event]:
        table = self._table(table_id)
        while True:
            wakeup = table.wakeup
            events = await self.events_after(table_id, after_seq, limit=10_000)
            if events is None:
                raise LookupError(f"events after {after_seq} are no longer held")
            for ev in events:
                yield ev
                after_seq = ev["seq"]
            if not events:
                await wakeup.wait()

    # --- ownership --------------------------------------------------------------------------
    async def acquire_lease(self, table_id: str, node: str, ttl_ms: int) -> Lease | None:
        table = self._table(table_id)
        now = self._now_ms()
        current = table.lease
        if current is not None and current.expires_at_ms > now and current.node != node:
            return None
        if current is not None and current.node == node and current.expires_at_ms > now:
            token = current.token
        else:
            table.fence += 1
            token = table.fence
        table.lease = Lease(table_id, node, token, now + ttl_ms)
        return table.lease

    async def release_lease(self, table_id: str, node: str, token: int) -> None:
        table = self._table(table_id)
        if table.lease is not None and table.lease.node == node and table.lease.token == token:
            table.lease = None

    async def lease(self, table_id: str) -> Lease | None:
        lease = self._table(table_id).lease
        return lease if lease is not None and lease.expires_at_ms > self._now_ms() else None

    # --- housekeeping ---------------------------------------------------------------------
    async def now_ms(self) -> int:
        return self._now_ms()

    async def ledger(self) -> Ledger:
        return Ledger(self._issued, sum(self._balances.values()), self._in_play, self._house)
