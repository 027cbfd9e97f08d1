"""The wallet outbox (issue 19, docs/wallet.md "The outbox"): the credits and cancels the
server owes an operator's wallet, kept in the store until the wallet acknowledges them.

Only with an HTTP wallet (a store made with `outbox=True`). Three ways an entry is made, each
in the same atomic step as what makes it owed:

- `commit` of a settled round: one credit per player paid (the round's standing debits of
  that player, which are exactly its recorded bets: a bet is recorded only after its debit
  was answered OK); of a voided round: one cancel per bet instead.
- `hold_debit`, before a bet's debit is sent: a **hold**, the "cancel unless recorded" entry
  of that debit, due `hold_ms` later. `record_debit` drops it in the step that records the
  bet; `release_debit` drops it (the wallet refused the debit: nothing to undo) or queues it
  (the outcome is unknown). A hold nobody recorded or released by its due time (its node
  died) is claimed like any entry and sent as a cancel.
- `record_debit` of a debit the wallet took but whose bet cannot stand (the window closed
  meanwhile, a limit): its hold is queued as a cancel.

Any node sends them (server/runtime/outbox.py): `claim_outbox` hands out due entries, each
to one sender until `claim_ms` passes (a sender killed mid-send loses its claim, and another
node takes the entry then), `outbox_done` forgets an entry the wallet acknowledged and tells
every node the player's new balance (a BalanceNotice), `outbox_retry` makes it due again after
a backoff, or parks it for good once it has been retried for the retry period.
"""

from __future__ import annotations

from collections.abc import Iterable
from dataclasses import dataclass
from enum import StrEnum
from typing import Any

from server.core.bets import Payout, payouts_by_player
from server.wallet.base import Cancel, Credit
from server.wallet.protocol import Call, credit_id, debit_id

__all__ = [
    "BACKOFF_FIRST_MS",
    "BACKOFF_MAX_MS",
    "BalanceNotice",
    "EntryState",
    "OutboxEntry",
    "OutboxStats",
    "body_of",
    "entry_of",
    "hold_of",
    "retry_delay_ms",
    "round_entries",
]

BACKOFF_FIRST_MS = 1_000  # the wait after an entry's first failed attempt
BACKOFF_MAX_MS = 300_000  # the wait doubles after each failure, up to 5 minutes


class EntryState(StrEnum):
    HOLD = "hold"  # a debit in flight: cancelled unless its bet is recorded in time
    QUEUED = "queued"  # a credit or cancel to send until acknowledged
    PARKED = "parked"  # retried for --wallet-retry-hours: no longer sent, reported


@dataclass(frozen=True, slots=True)
class OutboxEntry:
    """One credit or cancel owed to the wallet (a hold is the cancel of its debit)."""

    call: Call  # CREDIT or CANCEL
    table: str
    round: int
    player: str
    amount: int
    transaction_id: str  # the credit's, or the cancelled debit's
    debits: tuple[str, ...] = ()  # a credit's standing debits
    settled: bool = False  # owed by a round's settlement (a credit, a voided round's cancel)
    state: EntryState = EntryState.QUEUED
    created_ms: int = 0  # by the store's clock
    attempts: int = 0  # sends that failed so far

    @property
    def key(self) -> str:
        """Unique per call and transaction id, as the wallet's idempotency is."""
        return f"{self.call.value}:{self.transaction_id}"

    def transaction(self) -> Credit | Cancel:
        if self.call is Call.CREDIT:
            return Credit(self.table, self.round, self.player, self.amount, self.debits)
        return Cancel(self.table, self.round, self.player, self.amount, self.transaction_id)


@dataclass(frozen=True, slots=True)
class OutboxStats:
    depth: int  # entries queued (holds not counted) and parked
    oldest_ms: int | None  # the oldest queued or parked entry's creation, by the store's clock
    parked: int


@dataclass(frozen=True, slots=True)
class BalanceNotice:
    """The wallet acknowledged a credit or cancel of `player`: its balance now. Heard by every
    node (with the settled notices), which sends `balance` to the player's connections."""

    player: str
    balance: int
    table: str
    round: int
    settled: bool  # owed by the round's settlement: sent after that settlement


def body_of(entry: OutboxEntry) -> list[Any]:
    """What the store keeps of an entry, beside its state, creation and attempts."""
    return [
        entry.call.value,
        entry.table,
        entry.round,
        entry.player,
        entry.amount,
        entry.transaction_id,
        list(entry.debits),
        entry.settled,
    ]


def entry_of(body: list[Any], state: str, created_ms: int, attempts: int) -> OutboxEntry:
    call, table, round_no, player, amount, transaction_id, debits, settled = body
    return OutboxEntry(
        Call(call),
        table,
        int(round_no),
        player,
        int(amount),
        transaction_id,
        tuple(debits),
        bool(settled),
        EntryState(state),
        int(created_ms),
        int(attempts),
    )


def hold_of(table: str, round_no: int, player: str, bet_id: str, amount: int) -> OutboxEntry:
    """The "cancel unless recorded" entry of a bet's debit."""
    tx = debit_id(table, round_no, player, bet_id)
    return OutboxEntry(Call.CANCEL, table, round_no, player, amount, tx, state=EntryState.HOLD)


def round_entries(
    table: str, round_no: int, payouts: Iterable[Payout], voided: bool
) -> dict[str, list[OutboxEntry]]:
    """Per player, what a paying commit owes the wallet: one credit of the player's payouts
    listing every debit of the round (all its recorded bets), or for a voided round one
    cancel per bet."""
    owed: dict[str, list[OutboxEntry]] = {}
    for player, paid in payouts_by_player(payouts).items():
        debits = [debit_id(table, round_no, player, p.bet_id) for p in paid]
        if voided:
            owed[player] = [
                OutboxEntry(Call.CANCEL, table, round_no, player, p.amount, tx, settled=True)
                for p, tx in zip(paid, debits, strict=True)
            ]
        else:
            credit = sum(p.credit for p in paid)
            tx = credit_id(table, round_no, player)
            entry = OutboxEntry(
                Call.CREDIT, table, round_no, player, credit, tx, tuple(debits), settled=True
            )
            owed[player] = [entry]
    return owed


def retry_delay_ms(attempts: int) -> int:
    """The wait after the `attempts`-th failed send (1 s, 2 s, 4 s, ... up to 5 min)."""
    return min(BACKOFF_FIRST_MS << min(max(attempts - 1, 0), 20), BACKOFF_MAX_MS)
