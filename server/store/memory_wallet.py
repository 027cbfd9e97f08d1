"""The memory engine's wallet and guests: players' balances, the operator's credits and debits
(with their idempotency keys), the game-recall history, the guests' expiry and the ledger.

MemoryStore inherits this part (a mixin, not an object it forwards to: a bet costs what it did
when the engine was one class). The counters are the engine's: its bets and settlements move
them too (server/store/memory.py), each check and its write with no await in between.
"""

from __future__ import annotations

from collections.abc import Callable, Collection
from typing import Any

from server.store.audit import (
    AUDIT_PAGE,
    DEFAULT_AUDIT_ENTRIES,
    DEFAULT_AUDIT_KEEP_MS,
    AuditEntry,
)
from server.store.base import Ledger, Store
from server.store.memory_audit import MemoryAudit
from server.store.memory_records import PlayerRecord
from server.store.wallet import (
    IDEMPOTENCY_KEYS_KEPT,
    MONEY_LIMIT,
    MOVEMENTS_KEPT,
    InsufficientFunds,
    Movement,
    check_ledger,
    check_movement,
)

__all__ = ["MemoryWallet"]


class MemoryWallet(Store):
    def __init__(
        self,
        now_ms: Callable[[], int],
        audit_keep_ms: int = DEFAULT_AUDIT_KEEP_MS,
        audit_entries: int = DEFAULT_AUDIT_ENTRIES,
    ) -> None:
        self._now_ms = now_ms
        # Every movement appends to it with no await between the move and the append.
        self._audit = MemoryAudit(now_ms, audit_keep_ms, audit_entries)
        self._players: dict[str, PlayerRecord] = {}
        self._guests: set[str] = set()  # the players that may expire: a sweep looks at these
        self._issued = 0
        # The sum of the balances, kept as it changes (ledger() sums them anew), so the ledger
        # bound is checked without summing every player's balance.
        self._balances = 0
        self._in_play = 0
        self._house = 0
        self._operator_in = 0
        self._operator_out = 0
        self._expired = 0

    async def ensure_player(
        self, player: str, initial_balance: int, guest_ttl_ms: int | None = None
    ) -> int:
        record = self._players.get(player)
        if record is None:
            check_ledger(
                issued=self._issued + initial_balance, balances=self._balances + initial_balance
            )
            ttl = None if guest_ttl_ms is None else max(guest_ttl_ms, 0)
            record = self._players[player] = PlayerRecord(initial_balance, ttl)
            self._issued += initial_balance
            self._balances += initial_balance
            self._audit.append("issue", player, initial_balance, initial_balance)
            if ttl is not None:
                self._guests.add(player)
        elif record.guest_ttl_ms is not None and guest_ttl_ms is not None:
            record.guest_ttl_ms = max(guest_ttl_ms, 0)
        self._seen(record)
        return record.balance

    def _seen(self, record: PlayerRecord) -> None:
        """A guest was seen: its expiry moves to its TTL from now."""
        if record.guest_ttl_ms is not None:
            record.expires_at_ms = self._now_ms() + record.guest_ttl_ms

    async def balance(self, player: str) -> int | None:
        record = self._players.get(player)
        return record.balance if record else None

    async def move_money(self, player: str, amount: int, idempotency_key: str) -> Movement:
        amount = check_movement(amount, idempotency_key)
        record = self._players.get(player)
        if record is not None and (first := record.moves.get(idempotency_key)) is not None:
            return first
        balance = record.balance if record is not None else 0
        if balance + amount < 0:
            raise InsufficientFunds(player, balance, -amount)
        if balance + amount >= MONEY_LIMIT:
            raise ValueError(f"a balance of {balance} + {amount} would pass 2**53")
        if amount > 0:
            check_ledger(balances=self._balances + amount, operator_in=self._operator_in + amount)
        else:
            check_ledger(balances=self._balances + amount, operator_out=self._operator_out - amount)
        if record is None:
            record = self._players[player] = PlayerRecord(0)
        record.balance += amount
        self._balances += amount
        if amount > 0:
            self._operator_in += amount
        else:
            self._operator_out -= amount
        movement = Movement(player, amount, idempotency_key, record.balance, self._now_ms())
        kind = "operator_credit" if amount > 0 else "operator_debit"
        self._audit.append(kind, player, amount, record.balance, ref=idempotency_key)
        record.movements.appendleft(movement)
        record.moves[idempotency_key] = movement
        while len(record.moves) > IDEMPOTENCY_KEYS_KEPT:
            record.moves.popitem(last=False)
        return movement

    async def movements(self, player: str, limit: int = MOVEMENTS_KEPT) -> list[Movement]:
        record = self._players.get(player)
        return list(record.movements)[: max(limit, 0)] if record else []

    async def keep_guests(self, players: Collection[str]) -> None:
        for name in players:
            record = self._players.get(name)
            if record is not None:
                self._seen(record)  # a no-op for a player who is no guest

    async def expire_guests(self, now_ms: int | None = None) -> int:
        now = self._now_ms() if now_ms is None else now_ms
        gone = [
            name
            for name in self._guests
            if (record := self._players[name]).expires_at_ms <= now and record.in_play == 0
        ]
        for name in gone:
            self._guests.discard(name)
            balance = self._players.pop(name).balance
            self._balances -= balance
            self._expired += balance
            self._audit.append("expire", name, -balance, 0)
        return len(gone)

    async def history(
        self, player: str, table_id: str | None = None, limit: int = 20
    ) -> list[dict[str, Any]]:
        record = self._players.get(player)
        if record is None or limit <= 0:
            return []
        found = [r for r in record.history if table_id is None or r["table"] == table_id]
        return found[:limit]

    async def audit(
        self,
        player: str,
        since_ms: int | None = None,
        limit: int = AUDIT_PAGE,
        after: str | None = None,
    ) -> list[AuditEntry]:
        return self._audit.read(player, since_ms, limit, after)

    async def ledger(self) -> Ledger:
        return Ledger(
            self._issued,
            sum(record.balance for record in self._players.values()),
            self._in_play,
            self._house,
            self._operator_in,
            self._operator_out,
            self._expired,
        )
