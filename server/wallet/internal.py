"""The internal wallet: the store's own balances behind the `Wallet` interface.

This is today's wallet. On the bet path the store moves its money itself, in the same atomic
step as the bet (`Store.place_bet` debits) and as the round (`Store.commit` credits, or refunds
a voided round), so `in_store` is True and the bet path calls none of debit, credit or cancel
here: nothing can be moved twice or lost between two systems.

Called directly, debit, credit and cancel keep the wallet contract (the suite in
tests/wallet/test_contract.py holds both engines to it) as operator movements on the same
balances (`Wallet.move_money` of server/store/wallet.py, counted in the ledger as operator_out
and operator_in), keyed by the transaction id, so the money of a repeated transaction moves
once on every node. The book of answers, of cancelled ids and of which debits a credit closed
is this process's: the bet path never relies on it.
"""

from __future__ import annotations

import asyncio
from dataclasses import dataclass
from typing import Literal

from server.store.wallet import InsufficientFunds
from server.store.wallet import Wallet as StoreWallet
from server.wallet.base import Answer, Cancel, Credit, Debit, Unknown, Wallet, WalletUnknown
from server.wallet.protocol import Call, Status

__all__ = ["InternalWallet"]

DebitState = Literal["standing", "refused", "cancelled", "credited"]
Transaction = Debit | Credit | Cancel


@dataclass(slots=True)
class _Booked:
    """What the book knows of one debit id: the debit (None: cancelled before it came)."""

    debit: Debit | Cancel
    state: DebitState


class InternalWallet(Wallet):
    """The store's balances (see the module doc)."""

    in_store = True

    def __init__(self, store: StoreWallet, currency: str = "EUR") -> None:
        super().__init__(currency)
        self._store = store
        self._answers: dict[tuple[Call, str], tuple[Transaction, Answer]] = {}
        self._debits: dict[str, _Booked] = {}
        self._credited: set[tuple[str, int, str]] = set()  # (table, round, player)
        self._lock = asyncio.Lock()

    async def balance(self, player: str) -> Answer:
        return Answer(Status.OK, await self._balance(player))

    async def _balance(self, player: str) -> int:
        balance = await self._store.balance(player)
        return balance or 0

    def _replay(self, call: Call, tx: Transaction) -> Answer | None:
        """The first answer to this transaction; CONFLICT if its id came with other data."""
        first = self._answers.get((call, tx.transaction_id))
        if first is None:
            return None
        if first[0] != tx:
            raise WalletUnknown(
                call, tx.transaction_id, Unknown.CONFLICT, "this id was sent with other data"
            )
        return first[1]

    def _keep(self, call: Call, tx: Transaction, answer: Answer) -> Answer:
        self._answers[(call, tx.transaction_id)] = (tx, answer)
        return answer

    async def debit(self, tx: Debit) -> Answer:
        async with self._lock:
            if (first := self._replay(Call.DEBIT, tx)) is not None:
                return first
            booked = self._debits.get(tx.transaction_id)
            if booked is not None:  # cancelled before it came
                answer = Answer(Status.CANCELLED, await self._balance(tx.player))
                return self._keep(Call.DEBIT, tx, answer)
            try:
                moved = await self._store.move_money(tx.player, -tx.amount, tx.transaction_id)
            except InsufficientFunds as refused:
                self._debits[tx.transaction_id] = _Booked(tx, "refused")
                answer = Answer(Status.INSUFFICIENT_FUNDS, refused.balance)
                return self._keep(Call.DEBIT, tx, answer)
            self._debits[tx.transaction_id] = _Booked(tx, "standing")
            return self._keep(Call.DEBIT, tx, Answer(Status.OK, moved.balance))

    async def credit(self, tx: Credit) -> Answer:
        async with self._lock:
            if (first := self._replay(Call.CREDIT, tx)) is not None:
                return first
            self._check_credit(tx)
            if tx.amount:
                moved = await self._store.move_money(tx.player, tx.amount, tx.transaction_id)
                balance = moved.balance
            else:
                balance = await self._balance(tx.player)
            for debit in tx.debits:
                self._debits[debit].state = "credited"
            self._credited.add((tx.table, tx.round, tx.player))
            return self._keep(Call.CREDIT, tx, Answer(Status.OK, balance))

    def _check_credit(self, tx: Credit) -> None:
        def conflict(detail: str) -> WalletUnknown:
            return WalletUnknown(Call.CREDIT, tx.transaction_id, Unknown.CONFLICT, detail)

        if (tx.table, tx.round, tx.player) in self._credited:
            raise conflict("this player's round already has a credit")
        if len(set(tx.debits)) != len(tx.debits):
            raise conflict("a debit is listed twice")
        for debit_id in tx.debits:
            booked = self._debits.get(debit_id)
            debit = booked.debit if booked else None
            if (
                booked is None
                or not isinstance(debit, Debit)
                or (debit.table, debit.round, debit.player) != (tx.table, tx.round, tx.player)
            ):
                raise conflict(f"{debit_id} is no debit of this player and round")
            if booked.state != "standing":
                raise conflict(f"{debit_id} is {booked.state}, not standing")

    async def cancel(self, tx: Cancel) -> Answer:
        async with self._lock:
            if (first := self._replay(Call.CANCEL, tx)) is not None:
                return first
            booked = self._debits.get(tx.transaction_id)
            if booked is None:  # never booked: nothing moves, and the debit is refused later
                self._debits[tx.transaction_id] = _Booked(tx, "cancelled")
                answer = Answer(Status.OK, await self._balance(tx.player))
                return self._keep(Call.CANCEL, tx, answer)
            debit = booked.debit
            if (debit.player, debit.amount, debit.table, debit.round) != (
                tx.player, tx.amount, tx.table, tx.round,
            ):  # fmt: skip
                raise WalletUnknown(
                    Call.CANCEL, tx.transaction_id, Unknown.CONFLICT, "the debit had other data"
                )
            if booked.state == "credited":
                raise WalletUnknown(
                    Call.CANCEL, tx.transaction_id, Unknown.CONFLICT, "the debit is credited"
                )
            if booked.state == "standing":
                key = f"x:{tx.transaction_id}"  # the debit's own id is its debit's key
                moved = await self._store.move_money(tx.player, tx.amount, key)
                balance = moved.balance
            else:  # refused: nothing was taken
                balance = await self._balance(tx.player)
            booked.state = "cancelled"
            return self._keep(Call.CANCEL, tx, Answer(Status.OK, balance))
