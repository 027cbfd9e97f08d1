"""The in-memory engine: the embedded default, one process, no setup.

Every method runs to completion without awaiting in between its check and its write, so on
one event loop each is atomic, the same guarantee the Redis engine gets from Lua scripts. It
keeps the state as the Redis engine does, an encoded blob beside the few fields bets are
checked against, so both read, migrate and fail to read a state the same way.

This module holds the engine's tables, bets, commits, settlements, events and leases; its
records are in server/store/memory_records.py, and the players' money and the guests in
server/store/memory_wallet.py (a part MemoryStore inherits).
"""

from __future__ import annotations

import asyncio
import contextlib
from collections.abc import AsyncIterator, Callable, Collection

from server.core.bets import Bet, BetTotals, Payout, Spot, parse_spot, payouts_by_player, verify_bet
from server.core.errors import BetRejected, RejectCode
from server.core.events import EventPayload, entropy_accepted
from server.core.recall import RoundSummary
from server.core.rules import TableRules
from server.core.table import Phase, TableState, entropy_window, verify_bet_window
from server.store.audit import DEFAULT_AUDIT_ENTRIES, DEFAULT_AUDIT_KEEP_MS, paying_kind
from server.store.base import (
    DEFAULT_HISTORY_EVENTS,
    DEFAULT_HISTORY_ROUNDS,
    DEFAULT_MAX_BETS_PER_ROUND,
    MAX_ENTROPY_PER_SHOE,
    BetReceipt,
    Event,
    Lease,
    SettledNotice,
    Settlement,
    Snapshot,
    StaleWrite,
    debit_in_outbox,
    debit_taken,
    entropy_already_sent,
    entropy_closed,
    entropy_full,
    too_many_bets,
)
from server.store.codec import state_from_bytes, state_to_bytes
from server.store.memory_events import MemoryEvents
from server.store.memory_outbox import MemoryOutbox
from server.store.memory_records import (
    BetRow,
    PlayerRecord,
    ReceiptRow,
    RoundRecord,
    TableRecord,
    bet_of,
    header_of,
    receipt_key,
)
from server.store.outbox import BalanceNotice, hold_of, round_entries
from server.store.recall import history_record, record_body
from server.store.wallet import DEFAULT_RECALL_ROUNDS
from server.wallet.protocol import MAX_AMOUNT, debit_id
from server.wire.envelope import stamp
from server.wire.shapes import payout_view

__all__ = ["MemoryStore"]

# Notices queued per listener that is not reading; more are dropped (at most once, as with
# Redis pub/sub, which cuts a subscriber whose output buffer is full).
NOTICES_QUEUED = 10_000
Notice = SettledNotice | BalanceNotice


class MemoryStore(MemoryEvents, MemoryOutbox):
    def __init__(
        self,
        now_ms: Callable[[], int],
        history_events: int = DEFAULT_HISTORY_EVENTS,
        history_rounds: int = DEFAULT_HISTORY_ROUNDS,
        recall_rounds: int = DEFAULT_RECALL_ROUNDS,
        max_bets_per_round: int = DEFAULT_MAX_BETS_PER_ROUND,
        *,
        audit_keep_ms: int = DEFAULT_AUDIT_KEEP_MS,
        audit_entries: int = DEFAULT_AUDIT_ENTRIES,
        outbox: bool = False,
    ) -> None:
        # The wallet's records; with `outbox` (an HTTP wallet) the wallet's outbox instead.
        super().__init__(now_ms, audit_keep_ms, audit_entries, outbox)
        self._max_bets = max(max_bets_per_round, 1)
        self._history_events = history_events
        self._history_rounds = max(history_rounds, 1)
        self._recall_rounds = max(recall_rounds, 1)
        self._tables: dict[str, TableRecord] = {}
        self._paused: set[str] = set()  # tables an operator asked to pause
        self._listeners: set[asyncio.Queue[Notice]] = set()  # settled_notices()

    def _table(self, table_id: str) -> TableRecord:
        table = self._tables.get(table_id)
        if table is None:
            raise BetRejected(RejectCode.UNKNOWN_TABLE, f"no table {table_id!r}")
        return table

    def _round(self, table: TableRecord, round_no: int) -> RoundRecord:
        """The round's records, made on first use; the oldest round beyond history_rounds is
        forgotten with everything it holds. A retried bet for a forgotten round is refused as
        WRONG_ROUND, so forgetting its receipt can never debit twice."""
        record = table.rounds.get(round_no)
        if record is None:
            record = table.rounds[round_no] = RoundRecord()
            while len(table.rounds) > self._history_rounds:
                _, old = table.rounds.popitem(last=False)
                for key in old.receipts:
                    del table.receipt_rounds[key]
        return record

    # --- tables -------------------------------------------------------------------------
    async def create_table(self, table_id: str, rules: TableRules) -> None:
        if table_id not in self._tables:
            state = TableState(table_id)
            self._tables[table_id] = TableRecord(rules, header_of(state), state_to_bytes(state))

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
        record = table.rounds.get(state.round, RoundRecord())
        mine = [bet_of(row) for row in record.mine.get(player, ())] if player is not None else []
        totals = record.bet_totals()
        return Snapshot(
            state, table.seq, table.rules, mine, totals.totals, totals.bettors, epoch=table.epoch
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
        table = self._table(table_id)
        key = receipt_key(player, bet_id)
        if (first := table.receipt(key)) is not None:
            return first  # the same bet_id again: the first answer, no second debit
        player_record = self._players.get(player)
        balance = player_record.balance if player_record else 0
        now = self._now_ms()  # one instant for the window, the guest's sighting and the log
        checked = self._check_bet(table, player, round_no, spot, amount, balance, now)
        record, spot_, on_spot = checked
        assert isinstance(amount, int) and player_record is not None  # balance >= amount > 0
        player_record.balance = after = balance - amount
        self._balances -= amount
        player_record.in_play += amount
        if player_record.guest_ttl_ms is not None:  # a guest was seen (MemoryWallet._seen)
            player_record.expires_at_ms = now + player_record.guest_ttl_ms
        self._in_play += amount
        row_key = (player, bet_id, key)
        receipt = self._record_bet(table, record, row_key, spot_, amount, on_spot, after)
        self._audit.append("bet", player, -amount, after, table_id, receipt.round, bet_id, now)
        return receipt

    def _check_bet(
        self,
        table: TableRecord,
        player: str,
        round_no: object,
        spot: object,
        amount: object,
        balance: int,
        now: int,
    ) -> tuple[RoundRecord, Spot, int]:
        """place_bet's checks, in its order: window, spot, bets this round, limits, balance."""
        verify_bet_window(table.header, round_no, now)
        spot_ = parse_spot(spot)
        record = self._round(table, table.header.round)
        if len(record.mine.get(player, ())) >= self._max_bets:
            raise too_many_bets(self._max_bets)
        on_spot = record.stakes.get((player, spot_), 0)
        verify_bet(table.rules.limits, spot_, amount, on_spot, balance)
        return record, spot_, on_spot

    @staticmethod
    def _record_bet(
        table: TableRecord,
        record: RoundRecord,
        key: tuple[str, str, str],  # (player, bet_id, receipt_key)
        spot: Spot,
        amount: int,
        on_spot: int,
        balance: int,
    ) -> BetReceipt:
        player, bet_id, field = key
        name = spot.value
        placed: BetRow = (bet_id, player, name, amount)
        record.bets.append(placed)
        record.mine.setdefault(player, []).append(placed)
        record.stakes[(player, spot)] = on_spot + amount
        record.totals[name] = record.totals.get(name, 0) + amount
        header = table.header
        receipt: ReceiptRow = (header.table_id, header.round, bet_id, name, amount, balance)
        record.receipts[field] = len(record.receipt_rows)
        record.receipt_rows.append(receipt)
        table.receipt_rounds[field] = header.round
        return BetReceipt(*receipt)

    # --- the committed shoe's entropy -------------------------------------------------------
    async def add_entropy(self, table_id: str, player: str, value: str) -> Event:
        table = self._table(table_id)
        header = table.header
        if (
            table.entropy_round == 0
            or header.round != table.entropy_round
            or header.phase is not Phase.BETTING
            or self._now_ms() >= header.closes_at_ms
        ):
            raise entropy_closed()
        shoe, values = table.entropy
        if shoe != header.shoe_number:  # the first value of this shoe: the last one's go
            shoe, values = header.shoe_number, {}
        if player in values:
            raise entropy_already_sent()
        if len(values) >= MAX_ENTROPY_PER_SHOE:
            raise entropy_full()
        values[player] = value
        table.entropy = (shoe, values)
        return self._append(table, [entropy_accepted(shoe=shoe, value=value)])[0]

    async def shoe_entropy(self, table_id: str, shoe: int) -> list[str]:
        number, values = self._table(table_id).entropy
        return list(values.values()) if number == shoe else []

    # --- bets with an operator's wallet (server/store/outbox.py) ------------------------------
    async def hold_debit(
        self,
        table_id: str,
        player: str,
        round_no: object,
        bet_id: str,
        spot: object,
        amount: object,
        hold_ms: int,
    ) -> BetReceipt | None:
        table = self._table(table_id)
        if (first := table.receipt(receipt_key(player, bet_id))) is not None:
            return first
        self._check_bet(table, player, round_no, spot, amount, MAX_AMOUNT, self._now_ms())
        assert isinstance(amount, int)
        entry = hold_of(table_id, table.header.round, player, bet_id, amount)
        slot = self._outbox.get(entry.key)
        if slot is not None:
            raise debit_in_outbox(slot.entry.state)
        self._hold(entry, hold_ms)
        return None

    async def record_debit(
        self,
        table_id: str,
        player: str,
        round_no: object,
        bet_id: str,
        spot: object,
        amount: object,
        balance: int,
    ) -> BetReceipt:
        table = self._table(table_id)
        assert isinstance(round_no, int) and isinstance(amount, int)  # as held
        slot = self._held(hold_of(table_id, round_no, player, bet_id, amount).key)
        if slot is None:
            raise debit_taken()
        try:
            record, spot_, on_spot = self._check_bet(
                table, player, round_no, spot, amount, MAX_AMOUNT, self._now_ms()
            )
        except BetRejected:
            self._queue_hold(slot)
            raise
        del self._outbox[slot.entry.key]
        self._wallet_balances[player] = balance
        if (player_record := self._players.get(player)) is not None:
            self._seen(player_record)
        key = (player, bet_id, receipt_key(player, bet_id))
        return self._record_bet(table, record, key, spot_, amount, on_spot, balance)

    async def release_debit(
        self, table_id: str, player: str, round_no: int, bet_id: str, cancel: bool
    ) -> None:
        slot = self._held(f"cancel:{debit_id(table_id, round_no, player, bet_id)}")
        if slot is None:
            return
        if cancel:
            self._queue_hold(slot)
        else:
            del self._outbox[slot.entry.key]

    async def round_bets(self, table_id: str, round_no: int) -> list[Bet]:
        record = self._table(table_id).rounds.get(round_no)
        return [bet_of(row) for row in record.bets] if record else []

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
        events: list[EventPayload],
        payouts: list[Payout] | None = None,
        summary: RoundSummary | None = None,
    ) -> list[Event]:
        table = self._table(table_id)
        if table.lease is None or table.lease.token != fence:
            raise StaleWrite(f"fencing token {fence} is not the lease holder's")
        if table.header.version != expected_version:
            raise StaleWrite(f"version {expected_version} is stale; at {table.header.version}")
        table.blob, table.header = state_to_bytes(state), header_of(state)
        table.entropy_round = entropy_window(state)
        paid = self._credit(table, state, payouts, summary) if payouts else ()
        appended = self._append(table, events)
        if paid:
            self._notify(SettledNotice(state.table_id, state.round, paid))
        return appended

    def _notify(self, notice: Notice) -> None:
        for queue in self._listeners:
            with contextlib.suppress(asyncio.QueueFull):  # a listener that stopped reading
                queue.put_nowait(notice)

    @contextlib.asynccontextmanager
    async def settled_notices(self) -> AsyncIterator[AsyncIterator[Notice]]:
        queue: asyncio.Queue[Notice] = asyncio.Queue(NOTICES_QUEUED)
        self._listeners.add(queue)
        try:
            yield _drain(queue)
        finally:
            self._listeners.discard(queue)

    def _credit(
        self,
        table: TableRecord,
        state: TableState,
        payouts: list[Payout],
        summary: RoundSummary | None,
    ) -> tuple[str, ...]:
        """Credit each player's payouts and record its settlement, but for a player who has a
        settlement of this round already (see Store.commit); returns the players credited.
        With an HTTP wallet (`outbox`) no money moves here: what the round owes each player
        goes to the outbox, and the settlement shows the wallet's latest balance."""
        by_player = payouts_by_player(payouts)
        record = self._round(table, state.round)
        now = self._now_ms()
        kind = paying_kind(state, summary)
        owed = (
            round_entries(state.table_id, state.round, payouts, kind == "refund")
            if self.outbox
            else {}
        )
        paid = []
        for player, mine in by_player.items():
            if player in record.settlements:
                continue
            paid.append(player)
            # A bettor has a record: it cannot expire while its stake is in play.
            wallet = self._players.setdefault(player, PlayerRecord(0))
            if self.outbox:
                self._owe(owed[player])
                balance = self._wallet_balances.get(player, 0)
            else:
                balance = self._pay(wallet, player, mine, kind, state)
            record.settlements[player] = Settlement(
                state.table_id, state.round, [payout_view(p) for p in mine], balance
            )
            body = record_body(state.table_id, state.round, mine, summary)
            wallet.history.appendleft(history_record(body, now, balance))
            while len(wallet.history) > self._recall_rounds:
                wallet.history.pop()
        return tuple(paid)

    def _pay(
        self, wallet: PlayerRecord, player: str, mine: list[Payout], kind: str, state: TableState
    ) -> int:
        """The internal wallet: the payouts to the balance, the stakes out of play."""
        credit, staked = sum(p.credit for p in mine), sum(p.amount for p in mine)
        wallet.balance += credit
        self._balances += credit
        wallet.in_play = max(wallet.in_play - staked, 0)
        self._in_play -= staked
        self._house += staked - credit
        self._audit.append(kind, player, credit, wallet.balance, state.table_id, state.round)
        return wallet.balance

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
    def _append(self, table: TableRecord, payloads: list[EventPayload]) -> list[Event]:
        stored = []
        now = self._now_ms()
        table_id, round_no = table.header.table_id, table.header.round
        for payload in payloads:
            table.seq += 1
            ev = stamp(table_id, table.seq, round_no, now, payload)
            stored.append(ev)
            table.events.append(ev)
            self._round(table, round_no).events.append(ev)
        while len(table.events) > self._history_events:
            table.events.popleft()
        if stored:
            table.wakeup.set()
            table.wakeup = asyncio.Event()
        return stored

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

    # --- operator controls ----------------------------------------------------------------
    async def set_paused(self, table_id: str, paused: bool) -> bool:
        changed = (table_id in self._paused) != paused
        if paused:
            self._paused.add(table_id)
        else:
            self._paused.discard(table_id)
        return changed

    async def paused(self, table_id: str) -> bool:
        return table_id in self._paused

    # --- housekeeping ---------------------------------------------------------------------
    async def now_ms(self) -> int:
        return self._now_ms()


async def _drain(queue: asyncio.Queue[Notice]) -> AsyncIterator[Notice]:
    while True:
        yield await queue.get()
