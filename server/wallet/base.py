"""The `Wallet` interface: where a player's money lives, and the calls that move it.

Two engines implement it (issue 19):

- the internal wallet (server/wallet/internal.py): the store's own balances, as today. Its
  `in_store` is True: the store moves the money of the bet path itself, atomically, in
  `place_bet` (the debit) and `commit` (the credits, or the refunds of a voided round); the
  bet path calls none of debit, credit or cancel on it.
- the HTTP wallet (server/wallet/http_client.py): the operator's seamless wallet. Its
  `in_store` is False: the store checks window, round and limits, then the wallet is
  debited, then the bet is recorded; credits and cancels go through the store's outbox.

A call's answer is an `Answer` (a status the call may answer, and the balance after). A call
whose outcome is not known (a timeout, a lost connection, an answer that is not HTTP 200 with
a valid signature and a known status) raises `WalletUnknown`: never a guess. The same
transaction sent again gets the same answer and moves money once, so retrying with the same
transaction (the same id) is always safe; a debit whose outcome is unknown is cancelled.
"""

from __future__ import annotations

import abc
from dataclasses import dataclass
from enum import StrEnum
from typing import ClassVar

from server.wallet.protocol import (
    MAX_AMOUNT,
    Call,
    CancelRequest,
    CreditRequest,
    DebitRequest,
    Status,
    credit_id,
    debit_id,
)

__all__ = [
    "Answer",
    "Cancel",
    "Credit",
    "Debit",
    "Unknown",
    "Wallet",
    "WalletUnknown",
]


def _check(tx: Debit | Credit | Cancel, low: int) -> None:
    """ValueError for a transaction no wallet could take: an amount that is no whole number
    from `low` below 2**53, or a round below 0."""
    name = type(tx).__name__
    if type(tx.amount) is not int or not low <= tx.amount < MAX_AMOUNT:
        raise ValueError(f"{name} amount must be a whole number {low} to 2**53, not {tx.amount!r}")
    if type(tx.round) is not int or tx.round < 0:
        raise ValueError(f"{name} round must be a whole number >= 0, not {tx.round!r}")


@dataclass(frozen=True, slots=True)
class Debit:
    """A bet's stake, taken from the player's balance when the bet is placed."""

    table: str
    round: int
    player: str
    bet_id: str
    spot: str
    amount: int  # > 0, minor units

    def __post_init__(self) -> None:
        _check(self, low=1)

    @property
    def transaction_id(self) -> str:
        return debit_id(self.table, self.round, self.player, self.bet_id)

    def cancel(self) -> Cancel:
        """The cancel of this debit: same id, same amount."""
        return Cancel(self.table, self.round, self.player, self.amount, self.transaction_id)

    def request(self, currency: str) -> DebitRequest:
        return DebitRequest(
            transaction_id=self.transaction_id,
            player=self.player,
            amount=self.amount,
            currency=currency,
            table=self.table,
            round=self.round,
            bet_id=self.bet_id,
            spot=self.spot,
        )


@dataclass(frozen=True, slots=True)
class Credit:
    """A player's one credit of a settled round: what the player gets back (stake +
    winnings, the stake on a push, 0 on a loss), closing the round's standing debits."""

    table: str
    round: int
    player: str
    amount: int  # >= 0, minor units
    debits: tuple[str, ...]  # the transaction ids of the round's standing debits

    def __post_init__(self) -> None:
        _check(self, low=0)
        if not self.debits or len(set(self.debits)) != len(self.debits):
            raise ValueError(f"a credit lists its distinct debits, not {self.debits!r}")

    @property
    def transaction_id(self) -> str:
        return credit_id(self.table, self.round, self.player)

    def request(self, currency: str) -> CreditRequest:
        return CreditRequest(
            transaction_id=self.transaction_id,
            player=self.player,
            amount=self.amount,
            currency=currency,
            table=self.table,
            round=self.round,
            debits=list(self.debits),
        )


@dataclass(frozen=True, slots=True)
class Cancel:
    """The cancel of a debit (`Debit.cancel()`): gives its stake back if the wallet booked it,
    and makes the wallet refuse the debit (CANCELLED) if it comes later."""

    table: str
    round: int
    player: str
    amount: int  # the debit's
    transaction_id: str  # the debit's

    def __post_init__(self) -> None:
        _check(self, low=1)

    def request(self, currency: str) -> CancelRequest:
        return CancelRequest(
            transaction_id=self.transaction_id,
            player=self.player,
            amount=self.amount,
            currency=currency,
            table=self.table,
            round=self.round,
        )


@dataclass(frozen=True, slots=True)
class Answer:
    """A known outcome: a status the call may answer, and the balance after the call (None
    when a refusal did not say)."""

    status: Status
    balance: int | None

    @property
    def ok(self) -> bool:
        return self.status is Status.OK


class Unknown(StrEnum):
    """Why a call's outcome is unknown (a label for logs and metrics)."""

    TIMEOUT = "timeout"  # no whole answer within --wallet-timeout
    CONNECTION = "connection"  # refused, reset or closed before the answer
    HTTP_STATUS = "http_status"  # an HTTP status other than 200 (and 409)
    CONFLICT = "conflict"  # HTTP 409: the wallet refuses it as contradicting what it booked
    SIGNATURE = "signature"  # the answer's signature or timestamp does not hold
    ANSWER = "answer"  # not JSON, an unknown status, no balance with OK


class WalletUnknown(Exception):
    """The call's outcome is unknown: the wallet may or may not have booked it. A debit is
    then cancelled (with its own id); a credit or cancel is sent again, same id, until the
    wallet acknowledges it."""

    def __init__(self, call: Call, transaction_id: str | None, reason: Unknown, detail: str):
        super().__init__(f"{call} {transaction_id or ''}: {reason}: {detail}".replace("  ", " "))
        self.call = call
        self.transaction_id = transaction_id
        self.reason = reason
        self.detail = detail


class Wallet(abc.ABC):
    """Where players' money lives. Every call either returns an Answer or raises
    WalletUnknown; repeating a transaction returns its first answer and moves nothing."""

    # True: the store moves this wallet's money in the bet path itself (place_bet debits,
    # commit credits and refunds, atomically with the bet and the round); the bet path must
    # not call debit, credit or cancel. False: the bet path calls them (see the module doc).
    in_store: ClassVar[bool]

    def __init__(self, currency: str) -> None:
        self.currency = currency

    @abc.abstractmethod
    async def balance(self, player: str) -> Answer:
        """The player's balance (status OK). A player the wallet has not seen has what the
        wallet gives new players (0 for the internal wallet)."""

    @abc.abstractmethod
    async def debit(self, tx: Debit) -> Answer:
        """Take the stake: OK with the balance after, or a refusal that moved nothing
        (INSUFFICIENT_FUNDS, PLAYER_BLOCKED, LIMIT_EXCEEDED, or CANCELLED for an id
        cancelled before)."""

    @abc.abstractmethod
    async def credit(self, tx: Credit) -> Answer:
        """Pay the player's round back (amount >= 0): OK with the balance after. Each of
        `tx.debits` must be a standing debit of this player and round, in no other credit;
        a wallet refuses a credit that contradicts its books (WalletUnknown CONFLICT)."""

    @abc.abstractmethod
    async def cancel(self, tx: Cancel) -> Answer:
        """Undo a debit: OK with the balance after, whether the wallet had booked the debit
        (its stake goes back) or not (nothing moves, and the debit is refused from then on).
        A debit already in a credit cannot be cancelled (WalletUnknown CONFLICT)."""

    async def close(self) -> None:  # noqa: B027 - an engine with nothing to release
        """Release connections; the default has none."""
