"""The player's money behind one interface: the wallet.

Today the wallet is part of the store: a bet's debit happens in the same atomic step that
checks the window and records the bet, and a settlement's credit in the same step that commits
the round, so no money can be moved twice or lost between two systems. An operator's own wallet
(a casino's account system) would replace this class later; the bet path then becomes the three
calls such wallets offer, each carrying a transaction id so a retry never moves money twice:

- debit on bet: ``debit(player, amount, tx_id=f"bet:{table}:{round}:{player}:{bet_id}")``
- credit on settlement: ``credit(player, credit, tx_id=f"settle:{table}:{round}:{player}")``
- rollback on void: ``credit(player, stake, tx_id=f"void:{table}:{round}:{player}")``

Operators move money with the same two calls (credit/debit with their idempotency key).
"""

from __future__ import annotations

import abc
from dataclasses import dataclass
from typing import Any

__all__ = [
    "DEFAULT_RECALL_ROUNDS",
    "InsufficientFunds",
    "Movement",
    "Wallet",
]

DEFAULT_RECALL_ROUNDS = 100  # game-recall records kept per player (regulators ask for >= 10)
MOVEMENTS_KEPT = 100  # operator movements kept per player


class InsufficientFunds(Exception):
    """A debit beyond the balance: nothing moved (HTTP 409 on the operator API)."""

    def __init__(self, player: str, balance: int, amount: int) -> None:
        super().__init__(f"player {player!r} has {balance}, cannot debit {amount}")
        self.player = player
        self.balance = balance
        self.amount = amount


@dataclass(frozen=True, slots=True)
class Movement:
    """One operator movement of money: `amount` > 0 credits, < 0 debits."""

    player: str
    amount: int
    idempotency_key: str
    balance: int  # the player's balance right after this movement
    ts: int  # the store's clock, ms

    def to_dict(self) -> dict[str, Any]:
        return {
            "amount": self.amount,
            "idempotency_key": self.idempotency_key,
            "balance": self.balance,
            "ts": self.ts,
        }


class Wallet(abc.ABC):
    """One balance per player, shared by every connection, tab, table and node."""

    @abc.abstractmethod
    async def ensure_player(
        self, player: str, initial_balance: int, guest_ttl_ms: int | None = None
    ) -> int:
        """Create the player with `initial_balance` if new (counted as issued) and return the
        balance. A guest (`guest_ttl_ms` set) expires after that long without being seen;
        every call (and every bet) refreshes it."""

    @abc.abstractmethod
    async def balance(self, player: str) -> int | None: ...

    async def move_money(self, player: str, amount: int, idempotency_key: str) -> Movement:
        """An operator credit (`amount` > 0) or debit (< 0). The same key for the same player
        returns the first Movement and moves nothing. A player not seen before is created with
        balance 0 first. InsufficientFunds for a debit beyond the balance."""
        raise NotImplementedError

    async def movements(self, player: str, limit: int = MOVEMENTS_KEPT) -> list[Movement]:
        """The player's latest operator movements, newest first."""
        raise NotImplementedError

    async def expire_guests(self) -> int:
        """Forget guests idle past their TTL with nothing in play; their balance leaves the
        ledger as `expired`. Returns how many were removed. Safe to run on every node."""
        raise NotImplementedError

    async def history(
        self, player: str, table_id: str | None = None, limit: int = 20
    ) -> list[dict[str, Any]]:
        """Game recall: the player's latest settled or voided rounds, newest first (only this
        table's if given). Each record: table, round, time (ms), bets [{bet_id, spot,
        amount}], cards [{hand, rank, suit}] in deal order, player_total, banker_total,
        winner (None when voided), natural, payouts, balance_after."""
        raise NotImplementedError
