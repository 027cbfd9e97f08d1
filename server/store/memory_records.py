"""The memory engine's records: what it keeps per table, per round and per player.

Laid out as the Redis engine lays out its keys: a table's state blob beside the few fields
bets are checked against (its header), each round's records kept and forgotten together, and
a player's records beside the balance, all dropped when a guest expires.
"""

from __future__ import annotations

import asyncio
from collections import OrderedDict, deque
from dataclasses import dataclass, field
from typing import Any

from server.core.bets import Bet, BetTotals, Spot
from server.core.rules import TableRules
from server.core.table import TableState
from server.store.base import BetReceipt, Event, Lease, Settlement, new_epoch
from server.store.wallet import MOVEMENTS_KEPT, Movement

__all__ = [
    "BetRow",
    "PlayerRecord",
    "ReceiptRow",
    "RoundRecord",
    "TableRecord",
    "bet_of",
    "header_of",
    "receipt_key",
]


# A bet as the memory engine keeps it: (bet_id, player, the spot's value, amount), and its
# receipt: BetReceipt's fields in order. Tuples of strings and ints, not Bet and BetReceipt
# objects: CPython's collector stops tracking such a tuple the first time it sees one, so a
# round of 100,000s of bets adds nothing to what a full collection walks (as objects they
# stayed tracked: full collections of 27-34 ms in the memory engine's bets benchmark, issue
# 20). Bet and BetReceipt are made when read (bet_of, BetReceipt(*row)).
BetRow = tuple[str, str, str, int]
ReceiptRow = tuple[str, int, str, str, int, int]


def receipt_key(player: str, bet_id: str) -> str:
    """A bet's receipt's key: a string, not a (player, bet_id) tuple, so the dicts keyed by it
    hold no container and CPython never tracks them: a dict untracked by a collection is
    tracked again when a new tuple goes in, back in the youngest generation, where every
    young collection walked its 100,000s of entries. The player's length first, so no two
    pairs share a key (as the Redis engine's receipt field)."""
    return f"{len(player)}:{player}:{bet_id}"


def bet_of(row: BetRow) -> Bet:
    bet_id, player, spot, amount = row
    return Bet(bet_id, player, Spot(spot), amount)


@dataclass(slots=True)
class RoundRecord:
    """One round's records, kept and forgotten together (the last history_rounds rounds)."""

    events: list[Event] = field(default_factory=list)
    bets: list[BetRow] = field(default_factory=list)
    # Running totals, so a bet costs the same however many were placed before it.
    mine: dict[str, list[BetRow]] = field(default_factory=dict)  # player -> their bets
    stakes: dict[tuple[str, Spot], int] = field(default_factory=dict)  # limits: per player+spot
    totals: dict[str, int] = field(default_factory=dict)  # spot -> all players' stakes
    receipts: dict[str, int] = field(default_factory=dict)  # receipt_key -> its row's index
    receipt_rows: list[ReceiptRow] = field(default_factory=list)
    settlements: dict[str, Settlement] = field(default_factory=dict)

    def receipt(self, key: str) -> BetReceipt:
        return BetReceipt(*self.receipt_rows[self.receipts[key]])

    def bet_totals(self) -> BetTotals:
        return BetTotals.of(self.totals, len(self.mine), len(self.bets))


def header_of(state: TableState) -> TableState:
    """The fields the Redis engine keeps outside its state blob, and no shoe."""
    return TableState(
        state.table_id,
        phase=state.phase,
        round=state.round,
        version=state.version,
        closes_at_ms=state.closes_at_ms,
        shoe_number=state.shoe_number,
    )


@dataclass(slots=True)
class PlayerRecord:
    """A player's records beside the balance; all go when a guest expires."""

    balance: int
    guest_ttl_ms: int | None = None  # None: not a guest, never expires
    expires_at_ms: int = 0  # a guest's, by the store's clock
    in_play: int = 0  # stakes debited and not yet settled: a guest with any never expires
    movements: deque[Movement] = field(default_factory=lambda: deque(maxlen=MOVEMENTS_KEPT))
    # idempotency key -> its movement, oldest first, the last IDEMPOTENCY_KEYS_KEPT
    moves: OrderedDict[str, Movement] = field(default_factory=OrderedDict)
    history: deque[dict[str, Any]] = field(default_factory=deque)  # newest first


@dataclass(slots=True)
class TableRecord:
    rules: TableRules
    header: TableState  # what bets are checked against, readable whatever the blob holds
    blob: bytes  # the state, stored as the Redis engine stores it (so it can be unreadable)
    seq: int = 0
    events: deque[Event] = field(default_factory=deque)
    rounds: OrderedDict[int, RoundRecord] = field(default_factory=OrderedDict)
    receipt_rounds: dict[str, int] = field(default_factory=dict)  # receipt_key -> its round
    lease: Lease | None = None
    fence: int = 0  # last fencing token handed out
    wakeup: asyncio.Event = field(default_factory=asyncio.Event)
    epoch: str = field(default_factory=new_epoch)  # new per table and per process
    entropy_round: int = 0  # the round whose window takes entropy (core.table.entropy_window)
    # The entropy of the shoe being committed: its number, and player -> value in order.
    entropy: tuple[int, dict[str, str]] = field(default_factory=lambda: (0, {}))

    def receipt(self, key: str) -> BetReceipt | None:
        """The receipt of the bet with this receipt_key, if its round is still held."""
        held = self.receipt_rounds.get(key)
        return None if held is None else self.rounds[held].receipt(key)
