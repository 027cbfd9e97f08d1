"""The in-memory engine: the embedded default, one process, no setup.

Every method runs to completion without awaiting in between its check and its write, so on
one event loop each is atomic, the same guarantee the Redis engine gets from Lua scripts.
"""

from __future__ import annotations

import asyncio
from collections import OrderedDict, deque
from collections.abc import AsyncIterator, Callable, Collection
from dataclasses import dataclass, field

from server.core.bets import Bet, Payout, parse_spot, verify_bet
from server.core.errors import BetRejected, RejectCode
from server.core.events import EventKind, Payload, event
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

__all__ = ["MemoryStore"]


@dataclass(slots=True)
class _Table:
    rules: TableRules
    state: TableState
    seq: int = 0
    events: deque[Event] = field(default_factory=deque)
    rounds: OrderedDict[int, list[Event]] = field(default_factory=OrderedDict)
    bets: dict[int, list[Bet]] = field(default_factory=dict)
    settlements: dict[tuple[int, str], Settlement] = field(default_factory=dict)
    # (player, bet_id) -> receipt, grouped by round so old rounds can be forgotten together
    receipts: OrderedDict[int, dict[tuple[str, str], BetReceipt]] = field(
        default_factory=OrderedDict
    )
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
        self._history_rounds = history_rounds
        self._tables: dict[str, _Table] = {}
        self._balances: dict[str, int] = {}
        self._receipt_rounds: dict[tuple[str, str, str], int] = {}  # where each receipt is
        self._issued = 0
        self._in_play = 0
        self._house = 0

    def _table(self, table_id: str) -> _Table:
        table = self._tables.get(table_id)
        if table is None:
            raise BetRejected(RejectCode.UNKNOWN_TABLE, f"no table {table_id!r}")
        return table

    # --- tables -------------------------------------------------------------------------
    async def create_table(self, table_id: str, rules: TableRules) -> None:
        self._tables.setdefault(table_id, _Table(rules, TableState(table_id)))

    async def table_ids(self) -> list[str]:
        return list(self._tables)

    async def rules(self, table_id: str) -> TableRules | None:
        table = self._tables.get(table_id)
        return table.rules if table else None

    async def load_state(self, table_id: str) -> TableState | None:
        table = self._tables.get(table_id)
        return table.state if table else None

    async def snapshot(self, table_id: str, player: str | None) -> Snapshot | None:
        table = self._tables.get(table_id)
        if table is None:
            return None
        state = table.state
        mine = [b for b in table.bets.get(state.round, []) if b.player == player]
        return Snapshot(state, table.seq, table.rules, mine, table.epoch)

    # --- players and bets ---------------------------------------------------------------
    async def ensure_player(self, player: str, initial_balance: int) -> int:
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
        receipt_round = self._receipt_rounds.get((player, table_id, bet_id))
        if receipt_round is not None:
            # The same bet_id again: the first answer, no second debit.
            return table.receipts[receipt_round][(player, bet_id)]
        verify_bet_window(table.state, round_no, self._now_ms())
        spot_ = parse_spot(spot)
        balance = self._balances.get(player, 0)
        bets = table.bets.setdefault(table.state.round, [])
        on_spot = sum(b.amount for b in bets if b.player == player and b.spot is spot_)
        verify_bet(table.rules.limits, spot_, amount, on_spot, balance)
        assert isinstance(amount, int)
        self._balances[player] = balance - amount
        self._in_play += amount
        bets.append(Bet(bet_id, player, spot_, amount))
        receipt = BetReceipt(
            table_id, table.state.round, bet_id, spot_.value, amount, balance - amount
        )
        table.receipts.setdefault(receipt.round, {})[(player, bet_id)] = receipt
        self._receipt_rounds[(player, table_id, bet_id)] = receipt.round
        self._append(
            table, [event(EventKind.BET_PLACED, player=player, spot=spot_.value, amount=amount)]
        )
        return receipt

    async def round_bets(self, table_id: str, round_no: int) -> list[Bet]:
        return list(self._table(table_id).bets.get(round_no, []))

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
        if table.state.version != expected_version:
            raise StaleWrite(f"version {expected_version} is stale; at {table.state.version}")
        table.state = state
        if payouts:
            self._credit(table, state, payouts)
        stored = self._append(table, events)
        table.bets = {r: b for r, b in table.bets.items() if r >= state.round - 1}
        self._forget_old_rounds(table, state.round - self._history_rounds)
        return stored

    def _credit(self, table: _Table, state: TableState, payouts: list[Payout]) -> None:
        by_player: dict[str, list[Payout]] = {}
        for payout in payouts:
            by_player.setdefault(payout.player, []).append(payout)
            self._balances[payout.player] = self._balances.get(payout.player, 0) + payout.credit
            self._in_play -= payout.amount
            self._house += payout.amount - payout.credit
        for player, mine in by_player.items():
            table.settlements[(state.round, player)] = Settlement(
                table.state.table_id,
                state.round,
                [p.to_dict() for p in mine],
                self._balances[player],
            )

    def _forget_old_rounds(self, table: _Table, before: int) -> None:
        """Receipts and settlements live as long as a round's replay does, so a long-running
        embedded server does not grow without bound. A retried bet for a forgotten round is
        refused as WRONG_ROUND, so forgetting its receipt can never debit twice."""
        while table.receipts and next(iter(table.receipts)) < before:
            old_round, receipts = table.receipts.popitem(last=False)
            for player, bet_id in receipts:
                del self._receipt_rounds[(player, table.state.table_id, bet_id)]
            for player in {player for player, _ in receipts}:
                table.settlements.pop((old_round, player), None)

    async def settlement(self, table_id: str, round_no: int, player: str) -> Settlement | None:
        return self._table(table_id).settlements.get((round_no, player))

    async def settlements(
        self, table_id: str, round_no: int, players: Collection[str]
    ) -> dict[str, Settlement]:
        held = self._table(table_id).settlements
        found = {player: held.get((round_no, player)) for player in players}
        return {player: s for player, s in found.items() if s is not None}

    # --- events ---------------------------------------------------------------------------
    def _append(self, table: _Table, payloads: list[Payload]) -> list[Event]:
        stored = []
        now = self._now_ms()
        for payload in payloads:
            table.seq += 1
            ev: Event = {
                "type": "event",
                "table": table.state.table_id,
                "seq": table.seq,
                "round": table.state.round,
                "ts": now,
                **payload,
            }
            stored.append(ev)
            table.events.append(ev)
            table.rounds.setdefault(table.state.round, []).append(ev)
        while len(table.events) > self._history_events:
            table.events.popleft()
        while len(table.rounds) > self._history_rounds:
            table.rounds.popitem(last=False)
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
        events = self._table(table_id).rounds.get(round_no)
        return list(events) if events is not None else None

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
