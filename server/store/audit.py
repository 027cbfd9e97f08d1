"""The audit log: an append-only record of every movement of a player's money.

Each movement appends one entry in the same atomic step as the movement itself (inside the
Lua script on the Redis engine, in the same synchronous section on the memory engine), to
the player's own log: a Redis stream `<prefix>:{p:<player>}:audit` per player, its twin in
memory. Both engines keep the same entries and give them the same kind of sequence, a Redis
stream ID `<ms>-<n>` (the store's clock, then a counter within that millisecond), which
orders a player's entries.

The kinds, and the sign of `amount`:

- `issue`: a new player's initial balance (+, or 0: the player's first entry either way)
- `bet`: a bet's stake debited (-), with its table, round and bet_id
- `settle`: a settled round's credit to the player (+, or 0 when every bet lost: recorded,
  so each bet is closed by an entry of its round), with table and round
- `refund`: a voided round's stakes given back (+), with table and round
- `operator_credit` (+) / `operator_debit` (-): an operator's movement, with its
  idempotency key
- `expire`: a guest forgotten after its TTL, its balance leaving (-, the balance after 0)

`balance` is the player's balance right after the entry, so a player's balance is always
the last entry's balance, and equals the sum of the amounts of every entry the log still
holds plus what the first one held before it (`balance - amount`, 0 when nothing was trimmed).

A log keeps its entries for `keep_ms` (default 90 days) and at most `max_entries` (per
player): older ones go when the player's next entry is written, and are never read.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from server.core.recall import RoundSummary
from server.core.table import Phase, TableState

__all__ = [
    "AUDIT_KINDS",
    "AUDIT_PAGE",
    "DAY_MS",
    "DEFAULT_AUDIT_DAYS",
    "DEFAULT_AUDIT_ENTRIES",
    "DEFAULT_AUDIT_KEEP_MS",
    "AuditEntry",
    "audit_entry",
    "first_seq",
    "parse_seq",
    "paying_kind",
]

DAY_MS = 86_400_000
DEFAULT_AUDIT_DAYS = 90
DEFAULT_AUDIT_KEEP_MS = DEFAULT_AUDIT_DAYS * DAY_MS
DEFAULT_AUDIT_ENTRIES = 100_000  # per player: a cap so one player cannot grow a log forever
AUDIT_PAGE = 1_000  # entries one audit() call returns by default

AUDIT_KINDS = (
    "issue",
    "bet",
    "settle",
    "refund",
    "operator_credit",
    "operator_debit",
    "expire",
)


@dataclass(frozen=True, slots=True)
class AuditEntry:
    """One movement of one player's money, as the audit log holds it."""

    seq: str  # the stream ID, "<ms>-<n>": orders the player's entries
    ts: int  # the store's clock when it moved, ms
    kind: str  # one of AUDIT_KINDS
    player: str
    table: str | None  # bet, settle, refund: the table
    round: int | None  # bet, settle, refund: the round
    bet_id: str | None  # bet: the bet's id
    key: str | None  # operator_credit, operator_debit: the idempotency key
    amount: int  # signed: a debit is negative
    balance: int  # the player's balance right after

    def to_dict(self) -> dict[str, Any]:
        return {
            "seq": self.seq,
            "ts": self.ts,
            "kind": self.kind,
            "player": self.player,
            "table": self.table,
            "round": self.round,
            "bet_id": self.bet_id,
            "key": self.key,
            "amount": self.amount,
            "balance": self.balance,
        }


def audit_entry(seq: str, player: str, fields: list[Any]) -> AuditEntry:
    """An entry from its stored form, the msgpack array [kind, table, round, ref, amount,
    balance, ts] both engines keep (the player is the log's; `ref` is the bet_id of a bet,
    the idempotency key of an operator movement; a missing value is false)."""
    kind, table, round_no, ref, amount, balance, ts = fields
    operator = kind in ("operator_credit", "operator_debit")
    return AuditEntry(
        seq,
        int(ts),
        kind,
        player,
        table or None,
        int(round_no) if round_no is not False and round_no is not None else None,
        ref if ref and kind == "bet" else None,
        ref if ref and operator else None,
        int(amount),
        int(balance),
    )


def parse_seq(seq: str) -> tuple[int, int]:
    """A stream ID's two numbers; ValueError for anything else."""
    ms, _, n = seq.partition("-")
    if not (ms.isdigit() and n.isdigit()):
        raise ValueError(f"not an audit sequence (<ms>-<n>): {seq!r}")
    return int(ms), int(n)


def first_seq(
    now_ms: int, keep_ms: int, since_ms: int | None, after: str | None
) -> tuple[int, int]:
    """The first sequence a read returns: not older than `keep_ms` before `now_ms`, at or
    after `since_ms`, strictly after the sequence `after` (the last one a page returned)."""
    start = (max(now_ms - keep_ms, 0), 0)
    if since_ms is not None:
        start = max(start, (max(since_ms, 0), 0))
    if after is not None:
        ms, n = parse_seq(after)
        start = max(start, (ms, n + 1))
    return start


def paying_kind(state: TableState, summary: RoundSummary | None) -> str:
    """The kind of a paying commit's entries: `refund` when it voids the round (its summary
    has no result; without a summary, the state committed is voided), else `settle`. A round
    settled or voided in slices commits its unchanged state with the round's summary."""
    voided = summary.winner is None if summary is not None else state.phase is Phase.VOIDED
    return "refund" if voided else "settle"
