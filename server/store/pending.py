"""The debits an operator's wallet may still hold with neither a credit nor a cancel
acknowledged (`baccarat wallet-pending`, GET /api/wallet/pending): read from the store.

- `in_flight`: held, its debit sent or about to be (server/store/outbox.py);
- `in_play`: recorded in a round not settled yet;
- `credit_queued` / `credit_parked`: in its round's credit, not acknowledged yet (parked:
  retried for --wallet-retry-hours and no longer sent: for an operator to resolve);
- `cancel_queued` / `cancel_parked`: its cancel, not acknowledged yet.
"""

from __future__ import annotations

from dataclasses import asdict, dataclass
from typing import Any

from server.core.table import Phase
from server.store.base import Store
from server.store.outbox import EntryState, OutboxEntry
from server.wallet.protocol import Call, debit_id

__all__ = ["PendingDebit", "wallet_pending"]


@dataclass(frozen=True, slots=True)
class PendingDebit:
    transaction_id: str
    state: str
    table: str
    round: int
    player: str
    amount: int | None  # None: a credit's debit of a round no longer held
    since_ms: int | None  # its outbox entry's creation; None while in play

    def to_dict(self) -> dict[str, Any]:
        return asdict(self)


async def wallet_pending(store: Store, table: str | None = None) -> list[PendingDebit]:
    """Every such debit (of one table, with `table`): the outbox's, then the open rounds'."""
    found: list[PendingDebit] = []
    for entry in await store.outbox_entries():
        if table is None or entry.table == table:
            found += await _of_entry(store, entry)
    for table_id in [table] if table is not None else await store.table_ids():
        header = await store.load_header(table_id)
        if header is None or header.phase not in (Phase.BETTING, Phase.DEALING):
            continue
        for bet in await store.round_bets(table_id, header.round):
            tx = debit_id(table_id, header.round, bet.player, bet.bet_id)
            found.append(
                PendingDebit(tx, "in_play", table_id, header.round, bet.player, bet.amount, None)
            )
    return found


async def _of_entry(store: Store, entry: OutboxEntry) -> list[PendingDebit]:
    where = (entry.table, entry.round, entry.player)
    if entry.call is Call.CANCEL:
        state = "in_flight" if entry.state is EntryState.HOLD else f"cancel_{entry.state.value}"
        tx = entry.transaction_id
        return [PendingDebit(tx, state, *where, entry.amount, entry.created_ms)]
    amounts = {
        debit_id(entry.table, entry.round, bet.player, bet.bet_id): bet.amount
        for bet in await store.round_bets(entry.table, entry.round)
        if bet.player == entry.player
    }
    state = f"credit_{entry.state.value}"
    return [
        PendingDebit(tx, state, *where, amounts.get(tx), entry.created_ms) for tx in entry.debits
    ]
