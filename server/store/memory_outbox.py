"""The memory engine's wallet outbox (server/store/outbox.py): the twin of the Redis engine's
outbox keys and scripts, each method a check and its writes with no await in between.

MemoryStore inherits this part; its bets and commits add entries through `_hold`,
`_queue_hold` and `_owe`, in the same step as the bet or the round they belong to.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass, replace

from server.store.audit import DEFAULT_AUDIT_ENTRIES, DEFAULT_AUDIT_KEEP_MS
from server.store.base import SettledNotice
from server.store.memory_wallet import MemoryWallet
from server.store.outbox import BalanceNotice, EntryState, OutboxEntry, OutboxStats

__all__ = ["MemoryOutbox"]


@dataclass(slots=True)
class _Slot:
    entry: OutboxEntry
    due_ms: int  # a hold's time, a queued entry's next attempt, or a claim's end
    owner: str = ""  # the last sender that claimed it


class MemoryOutbox(MemoryWallet):
    def __init__(
        self,
        now_ms: Callable[[], int],
        audit_keep_ms: int = DEFAULT_AUDIT_KEEP_MS,
        audit_entries: int = DEFAULT_AUDIT_ENTRIES,
        outbox: bool = False,
    ) -> None:
        super().__init__(now_ms, audit_keep_ms, audit_entries)
        self.outbox = outbox  # an HTTP wallet: commits owe credits instead of moving money
        self._outbox: dict[str, _Slot] = {}  # key -> entry, in the order made
        self._wallet_balances: dict[str, int] = {}  # the wallet's latest answer per player

    def _notify(self, notice: SettledNotice | BalanceNotice) -> None:
        raise NotImplementedError  # MemoryStore's

    # --- what bets and commits write ------------------------------------------------------
    def _hold(self, entry: OutboxEntry, hold_ms: int) -> None:
        now = self._now_ms()
        held = replace(entry, state=EntryState.HOLD, created_ms=now)
        self._outbox[entry.key] = _Slot(held, now + hold_ms)

    def _held(self, key: str) -> _Slot | None:
        """The hold of a debit, if it is still one (no sender took it)."""
        slot = self._outbox.get(key)
        return slot if slot is not None and slot.entry.state is EntryState.HOLD else None

    def _queue_hold(self, slot: _Slot) -> None:
        """A hold becomes a cancel to send now."""
        now = self._now_ms()
        slot.entry = replace(slot.entry, state=EntryState.QUEUED, created_ms=now)
        slot.due_ms = now

    def _owe(self, entries: list[OutboxEntry]) -> None:
        now = self._now_ms()
        for entry in entries:
            if entry.key not in self._outbox:
                self._outbox[entry.key] = _Slot(replace(entry, created_ms=now), now)

    # --- the senders ------------------------------------------------------------------------
    async def claim_outbox(self, owner: str, limit: int, claim_ms: int) -> list[OutboxEntry]:
        now = self._now_ms()
        claimed: list[OutboxEntry] = []
        for slot in self._outbox.values():
            if len(claimed) >= limit:
                break
            if slot.due_ms > now or slot.entry.state is EntryState.PARKED:
                continue
            if slot.entry.state is EntryState.HOLD:  # its node never recorded nor released it
                self._queue_hold(slot)
            slot.due_ms, slot.owner = now + claim_ms, owner
            claimed.append(slot.entry)
        return claimed

    async def outbox_done(self, entry: OutboxEntry, balance: int) -> bool:
        if self._outbox.pop(entry.key, None) is None:
            return False
        self._wallet_balances[entry.player] = balance
        notice = BalanceNotice(entry.player, balance, entry.table, entry.round, entry.settled)
        self._notify(notice)
        return True

    async def wallet_balance(self, player: str) -> int | None:
        return self._wallet_balances.get(player)

    async def outbox_retry(
        self, entry: OutboxEntry, owner: str, delay_ms: int, park_after_ms: int
    ) -> EntryState | None:
        slot = self._outbox.get(entry.key)
        if slot is None or slot.owner != owner or slot.entry.state is not EntryState.QUEUED:
            return None
        now = self._now_ms()
        state = EntryState.QUEUED
        if now - slot.entry.created_ms >= park_after_ms:
            state = EntryState.PARKED
        slot.entry = replace(slot.entry, state=state, attempts=slot.entry.attempts + 1)
        slot.due_ms = now + delay_ms
        return state

    async def outbox_entries(self) -> list[OutboxEntry]:
        return sorted((slot.entry for slot in self._outbox.values()), key=lambda e: e.created_ms)

    async def outbox_stats(self) -> OutboxStats:
        owed = [s.entry for s in self._outbox.values() if s.entry.state is not EntryState.HOLD]
        parked = sum(1 for entry in owed if entry.state is EntryState.PARKED)
        oldest = min((entry.created_ms for entry in owed), default=None)
        return OutboxStats(len(owed), oldest, parked)
