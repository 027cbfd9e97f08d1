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
from collections.abc import Collection
from dataclasses import dataclass
from typing import Any

__all__ = [
    "DEFAULT_RECALL_ROUNDS",
    "IDEMPOTENCY_KEYS_KEPT",
    "LEDGER_LIMIT",
    "MONEY_LIMIT",
    "MOVEMENTS_KEPT",
    "InsufficientFunds",
    "LedgerLimit",
    "Movement",
    "Wallet",
    "check_ledger",
    "check_movement",
]

DEFAULT_RECALL_ROUNDS = 100  # game-recall records kept per player (regulators ask for >= 10)
MOVEMENTS_KEPT = 100  # operator movements kept per player
IDEMPOTENCY_KEYS_KEPT = 1_000  # a player's latest operator keys that still dedupe a retry
# Amounts and balances stay below this: the Redis engine's Lua counts in doubles.
MONEY_LIMIT = 2**53
# No ledger counter (issued, balances, operator_in, ...) goes past this, on either engine:
# Redis keeps 64-bit integers, and a write that would overflow one fails midway. A movement
# or a new player that would take a counter past it is refused with LedgerLimit.
LEDGER_LIMIT = 2**63 - 1


class LedgerLimit(Exception):
    """A movement (or a new player's balance) that would take a ledger counter past
    LEDGER_LIMIT: nothing moved (HTTP 409 on the operator API)."""

    def __init__(self, counter: str) -> None:
        super().__init__(f"the ledger's {counter} would pass 2**63 - 1; nothing moved")
        self.counter = counter


def check_ledger(**after: int) -> None:
    """LedgerLimit naming the first counter (in the order given) whose value after a write
    would leave [-2**63, LEDGER_LIMIT]; the Redis scripts check in the same order."""
    for counter, value in after.items():
        if not -LEDGER_LIMIT - 1 <= value <= LEDGER_LIMIT:
            raise LedgerLimit(counter)


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


def check_movement(amount: object, idempotency_key: object) -> int:
    """The amount of a valid operator movement; ValueError for a bad one (the HTTP API's 400)."""
    if type(amount) is not int or amount == 0 or not -MONEY_LIMIT < amount < MONEY_LIMIT:
        raise ValueError(f"amount must be a non-zero whole number below 2**53, not {amount!r}")
    if not isinstance(idempotency_key, str) or not idempotency_key:
        raise ValueError("idempotency_key must be a non-empty string")
    return amount


class Wallet(abc.ABC):
    """One balance per player, shared by every connection, tab, table and node."""

    @abc.abstractmethod
    async def ensure_player(
        self, player: str, initial_balance: int, guest_ttl_ms: int | None = None
    ) -> int:
        """Create the player with `initial_balance` if new (counted as issued) and return the
        balance. A player created with `guest_ttl_ms` is a guest: forgotten by expire_guests
        once that long passed, by the store's clock, without it being seen. Every call for a
        guest (and every bet it places) is a sighting and pushes its expiry back, by the TTL
        given (which then becomes its TTL) or else by its own. A player created without a TTL
        is never a guest and never expires, whatever later calls pass. LedgerLimit if a new
        player's balance would take the ledger's issued or balances past LEDGER_LIMIT."""

    @abc.abstractmethod
    async def balance(self, player: str) -> int | None: ...

    @abc.abstractmethod
    async def move_money(self, player: str, amount: int, idempotency_key: str) -> Movement:
        """An operator credit (`amount` > 0) or debit (< 0), counted in the ledger as
        operator_in / operator_out. The same key for the same player returns the first
        Movement and moves nothing, while the key is among the player's last
        IDEMPOTENCY_KEYS_KEPT. A player not seen before is created with balance 0 first (not a
        guest). InsufficientFunds for a debit beyond the balance (nothing moves, the key is
        not used up); ValueError for a bad amount or key (see check_movement) or a credit
        that would take the balance to MONEY_LIMIT; LedgerLimit for a movement that would
        take the ledger's balances, then operator_in (a credit) or operator_out (a debit),
        past LEDGER_LIMIT. Checked in that order, and nothing moves."""

    @abc.abstractmethod
    async def movements(self, player: str, limit: int = MOVEMENTS_KEPT) -> list[Movement]:
        """The player's latest operator movements, newest first (the last MOVEMENTS_KEPT)."""

    @abc.abstractmethod
    async def keep_guests(self, players: Collection[str]) -> None:
        """These guests are still connected, or their last connection just closed: each one's
        expiry moves to its TTL from now, by the store's clock (a guest who only watches sends
        nothing, yet is not to be forgotten while connected). A player that is no guest, or
        no longer exists (expired meanwhile), is left as it is: this never creates a wallet."""

    @abc.abstractmethod
    async def expire_guests(self, now_ms: int | None = None) -> int:
        """Forget guests idle past their TTL with nothing in play; their balance leaves the
        ledger as `expired` and every record of theirs (balance, movements, history) goes.
        Returns how many were removed. Safe to run on every node at once. `now_ms` (default:
        the store's clock) lets a test judge expiry at a later time instead of waiting."""

    @abc.abstractmethod
    async def history(
        self, player: str, table_id: str | None = None, limit: int = 20
    ) -> list[dict[str, Any]]:
        """Game recall: the player's latest settled or voided rounds, newest first (only this
        table's if given), at most `limit`, from the last `recall_rounds` the store keeps.
        Each record: table, round, time (the store's clock, ms), bets [{bet_id, spot,
        amount}], cards [{hand, rank, suit}] in deal order, player_total, banker_total, winner,
        natural (the last four None when voided), payouts, balance_after."""
