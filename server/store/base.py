"""The store interface every engine implements, and the records it returns.

A store holds everything a table needs: its rules, its state (phase, round, deadlines, the
shoe and its position), the bets of each round, balances, settlements and the table's event
history. Every state change by a table's owner is one `commit`, checked against the owner's
fencing token and the state's version, so a stale owner can change nothing. Bets come from any
node through `place_bet`, which checks the window against the store's own clock and debits in
one atomic step.

What a round leaves behind (its events, bets, receipts, settlements and totals) is kept as long
as the round is held for replay, the last `history_rounds` rounds, and then forgotten together.
"""

from __future__ import annotations

import abc
import asyncio
import secrets
from collections.abc import AsyncIterator, Collection
from contextlib import AbstractAsyncContextManager
from dataclasses import dataclass, field

from server.core.bets import Bet, BetTotals, Payout
from server.core.errors import BetRejected, RejectCode
from server.core.events import EventPayload
from server.core.recall import RoundSummary
from server.core.rules import TableRules
from server.core.table import TableState
from server.store.audit import AUDIT_PAGE, AuditEntry
from server.store.outbox import BalanceNotice, EntryState, OutboxEntry, OutboxStats
from server.store.wallet import Wallet
from server.wire.shapes import PayoutView, TableEvent

__all__ = [
    "DEFAULT_HISTORY_EVENTS",
    "DEFAULT_HISTORY_ROUNDS",
    "DEFAULT_MAX_BETS_PER_ROUND",
    "MAX_ENTROPY_PER_SHOE",
    "BetReceipt",
    "EntropyRefused",
    "Event",
    "Lease",
    "Ledger",
    "SettledNotice",
    "Settlement",
    "Snapshot",
    "StaleWrite",
    "StateUnreadable",
    "Store",
    "StoreDataError",
    "StoreUnavailable",
    "debit_in_outbox",
    "debit_taken",
    "entropy_already_sent",
    "entropy_closed",
    "entropy_full",
    "new_epoch",
    "too_many_bets",
]

Event = TableEvent  # a stored event exactly as broadcast: type, table, seq, round, ts, kind, ...

DEFAULT_HISTORY_EVENTS = 20_000  # live events kept per table for `since` catch-up
DEFAULT_HISTORY_ROUNDS = 1_000  # rounds kept per table for replay
# Bets one player may have accepted in one round (per table): a round's bets are settled and
# delivered together, so what one player can add to that work is bounded.
DEFAULT_MAX_BETS_PER_ROUND = 50


# Entropy values one shoe takes (one per player): bounds what shoe_sealed publishes.
MAX_ENTROPY_PER_SHOE = 256


class EntropyRefused(Exception):
    """A player's entropy was not taken: `code` is ENTROPY_CLOSED (not the shoe's first
    betting window, or it is closed by the store's clock), ENTROPY_ALREADY_SENT (one value
    per player per shoe) or ENTROPY_FULL (the shoe holds MAX_ENTROPY_PER_SHOE values)."""

    def __init__(self, code: str, message: str) -> None:
        super().__init__(message)
        self.code = code
        self.message = message


def entropy_closed() -> EntropyRefused:
    return EntropyRefused("ENTROPY_CLOSED", "entropy is taken only in a new shoe's first window")


def entropy_already_sent() -> EntropyRefused:
    return EntropyRefused("ENTROPY_ALREADY_SENT", "one entropy value per player per shoe")


def entropy_full() -> EntropyRefused:
    return EntropyRefused("ENTROPY_FULL", f"a shoe takes at most {MAX_ENTROPY_PER_SHOE} values")


def too_many_bets(limit: int) -> BetRejected:
    """The refusal of a player's bet beyond `limit` accepted in one round (both engines)."""
    return BetRejected(RejectCode.TOO_MANY_BETS, f"at most {limit} bets per player in one round")


def debit_in_outbox(state: EntryState) -> BetRejected:
    """The refusal of a bet whose debit is held (in flight: retry) or being cancelled."""
    if state is EntryState.HOLD:
        return BetRejected(
            RejectCode.WALLET_UNAVAILABLE, "this bet_id's debit is still in flight; retry"
        )
    return BetRejected(
        RejectCode.CANCELLED, "this bet_id's debit was cancelled; send the bet with a new bet_id"
    )


def debit_taken() -> BetRejected:
    """The refusal of a bet whose debit answered after its hold was taken for a cancel."""
    return BetRejected(
        RejectCode.WALLET_UNAVAILABLE, "the wallet answered too late: the debit is cancelled"
    )


def new_epoch() -> str:
    """A fresh epoch for a table's history: random, so two histories never share one."""
    return secrets.token_hex(6)


class StaleWrite(Exception):
    """A commit whose fencing token or expected version is no longer current."""


class StoreUnavailable(Exception):
    """The backing service cannot be reached right now; the caller may retry later."""


class StoreRefused(StoreUnavailable):
    """The backing service answers but refuses this node's settings (a Redis database it does
    not have): retrying will not help, so a node refuses to start on it. Still a
    StoreUnavailable, so a refusal met later (Redis reconfigured) is handled as an outage."""


class StateUnreadable(Exception):
    """The stored table state cannot be decoded (corrupt, or written in a newer format)."""


class StoreDataError(Exception):
    """A stored value kept a write from happening (a key of the wrong type, a value that is
    not an integer, a sum that would pass 64 bits): the store checked before writing, so
    nothing of that operation was written. Not the caller's fault; retrying does not help
    until the value is mended."""


@dataclass(slots=True, unsafe_hash=True)  # not frozen: one per bet (see core.bets.Bet)
class BetReceipt:
    """The answer to an accepted bet, returned again verbatim for a repeated bet_id."""

    table: str
    round: int
    bet_id: str
    spot: str
    amount: int
    balance: int


@dataclass(frozen=True, slots=True)
class Settlement:
    """One player's settlement of one round: each payout and the balance right after."""

    table: str
    round: int
    payouts: list[PayoutView]
    balance: int


@dataclass(frozen=True, slots=True)
class SettledNotice:
    """A round was settled or voided, and these players have a settlement of it: what every
    node hears (Store.settled_notices), so each delivers it to its own sessions of them."""

    table: str
    round: int
    players: tuple[str, ...]


@dataclass(frozen=True, slots=True)
class Lease:
    table: str
    node: str
    token: int  # the fencing token: grows with every new holder
    expires_at_ms: int


@dataclass(frozen=True, slots=True)
class Ledger:
    """Money conservation: what was issued is in balances, in play, or the house's."""

    issued: int  # every initial balance ever granted
    balances: int  # sum of all player balances
    in_play: int  # stakes debited and not yet settled
    house: int  # the house's net result (stakes kept minus winnings paid)
    operator_in: int = 0  # operator credits
    operator_out: int = 0  # operator debits
    expired: int = 0  # balances of guests forgotten after their TTL

    @property
    def balanced(self) -> bool:
        came_in = self.issued + self.operator_in - self.operator_out - self.expired
        return came_in == self.balances + self.in_play + self.house


@dataclass(slots=True)
class Snapshot:
    state: TableState
    seq: int  # the last event seq the state includes
    rules: TableRules
    bets: list[Bet] = field(default_factory=list)  # the asking player's bets this round
    totals: dict[str, int] = field(default_factory=dict)  # this round: spot -> stakes
    bettors: int = 0  # this round: distinct players with a bet
    epoch: str = ""  # the history `seq` belongs to (see Store.epoch), read with the state


class Store(Wallet):
    """What tables, loops and connections need from storage. All methods are coroutines.
    The store is also the players' wallet (server/store/wallet.py)."""

    # --- tables -------------------------------------------------------------------------
    @abc.abstractmethod
    async def create_table(self, table_id: str, rules: TableRules) -> None:
        """Create the table if it does not exist; an existing table keeps its state."""

    @abc.abstractmethod
    async def table_ids(self) -> list[str]: ...

    @abc.abstractmethod
    async def rules(self, table_id: str) -> TableRules | None: ...

    @abc.abstractmethod
    async def load_state(self, table_id: str) -> TableState | None:
        """The committed state; StateUnreadable if its stored blob cannot be decoded."""

    @abc.abstractmethod
    async def load_header(self, table_id: str) -> TableState | None:
        """What the store keeps outside the state blob, readable even when the blob is not:
        phase, round, version, closes_at_ms and shoe_number, in a TableState with no shoe."""

    @abc.abstractmethod
    async def snapshot(self, table_id: str, player: str | None) -> Snapshot | None:
        """The state and the seq of its last event, read together, plus the player's bets and
        the round's totals. StateUnreadable if the state blob cannot be decoded."""

    # --- players and bets ---------------------------------------------------------------
    @abc.abstractmethod
    async def place_bet(
        self,
        table_id: str,
        player: str,
        round_no: object,
        bet_id: str,
        spot: object,
        amount: object,
    ) -> BetReceipt:
        """Check window (by the store's clock), spot, limits and balance; debit; record the bet
        and add it to the round's totals, all in one atomic step, in time independent of the
        bets already placed. No event: the owner publishes the totals (bet_totals). A bet_id
        the player used at this table in a round still held returns the first receipt and
        debits nothing. A player's bet beyond `max_bets_per_round` accepted in this round is
        BetRejected TOO_MANY_BETS (checked after the window and the spot, before the limits
        and the balance). Raises BetRejected with a code otherwise; StoreDataError if a
        stored value kept it from being placed (then nothing was written)."""

    # --- the committed shoe's entropy (docs/fairness.md) ------------------------------------
    @abc.abstractmethod
    async def add_entropy(self, table_id: str, player: str, value: str) -> Event:
        """Take a player's entropy value for the shoe being committed, from any node: only in
        that shoe's first betting window (judged by the store's clock, as a bet's window:
        the state's `entropy_window` round, still open), one value per player per shoe, at
        most MAX_ENTROPY_PER_SHOE. Atomically keeps it in the shoe's list, in the order
        received, and appends the `entropy_accepted` event, which it returns. EntropyRefused
        otherwise; BetRejected UNKNOWN_TABLE for an unknown table."""

    @abc.abstractmethod
    async def shoe_entropy(self, table_id: str, shoe: int) -> list[str]:
        """The values add_entropy took for shoe `shoe`, in the order received (what the owner
        seals the shoe with once its first window is closed); [] for any other shoe."""

    @abc.abstractmethod
    async def round_bets(self, table_id: str, round_no: int) -> list[Bet]:
        """Every bet of a round in order, while the round is held; [] once it is not."""

    @abc.abstractmethod
    async def bet_totals(self, table_id: str, round_no: int) -> BetTotals:
        """The round's running totals (one cheap read, whatever the number of bets)."""

    # --- the owner's transitions ----------------------------------------------------------
    @abc.abstractmethod
    async def commit(
        self,
        table_id: str,
        fence: int,
        expected_version: int,
        state: TableState,
        events: list[EventPayload],
        payouts: list[Payout] | None = None,
        summary: RoundSummary | None = None,
    ) -> list[Event]:
        """Atomically: check fence and version, store `state`, credit `payouts` (recording
        each player's settlement of the round and, with `summary`, the round's cards and
        result, each player's game-recall record: see Wallet.history), append `events` with
        the next seqs. Raises StaleWrite if the fence or the version is not current.

        A player who already has a settlement of `state.round` is not credited again: a round
        with many bets is settled in slices of whole players, each a commit of the unchanged
        state (same version) with no events, before the commit that ends the round (the table
        loop does, server/runtime/table_loop.py); a new owner that redoes a round its
        predecessor left half settled credits only the players not yet paid. So a player's
        payouts must all be in one commit."""

    @abc.abstractmethod
    async def settlement(self, table_id: str, round_no: int, player: str) -> Settlement | None: ...

    @abc.abstractmethod
    async def settlements(
        self, table_id: str, round_no: int, players: Collection[str]
    ) -> dict[str, Settlement]:
        """The settlements of these players for one round, read in one round trip; players
        without one are left out."""

    @abc.abstractmethod
    def settled_notices(
        self,
    ) -> AbstractAsyncContextManager[AsyncIterator[SettledNotice | BalanceNotice]]:
        """Hear of every round settled or voided from now on, on every node of this store: a
        commit that credits payouts sends one SettledNotice naming the players it credited
        (a round settled in slices sends one per slice, before the round's own event). With
        an operator's wallet, a BalanceNotice for each credit or cancel it acknowledged.

        `async with store.settled_notices() as notices: async for notice in notices: ...`
        Entering subscribes (the subscription is live once it returns); leaving stops.
        At most once: a notice sent while no one listens, or while the connection is down,
        is lost (the settlement itself is kept: resume and `history` still give it).
        StoreUnavailable from entering or iterating: the subscription is gone; enter again."""

    # --- the operator's wallet (issue 19; server/store/outbox.py) ----------------------------
    # Only a store made with outbox=True (an HTTP wallet): then `commit` moves no money but
    # writes the round's credits (or a voided round's cancels) to the outbox, and bets go
    # hold_debit -> the wallet's debit -> record_debit or release_debit instead of place_bet.
    @abc.abstractmethod
    async def hold_debit(
        self,
        table_id: str,
        player: str,
        round_no: object,
        bet_id: str,
        spot: object,
        amount: object,
        hold_ms: int,
    ) -> BetReceipt | None:
        """Check the bet as place_bet does but the balance (window, round, spot, max bets,
        limits), then write its debit's hold (the cancel unless recorded, due in `hold_ms`),
        in one atomic step; None when held. A bet_id already recorded returns its receipt
        (nothing held). BetRejected for a failed check; WALLET_UNAVAILABLE while this
        bet_id's debit is held already (in flight), CANCELLED once it was cancelled."""

    @abc.abstractmethod
    async def record_debit(
        self,
        table_id: str,
        player: str,
        round_no: object,
        bet_id: str,
        spot: object,
        amount: object,
        balance: int,
    ) -> BetReceipt:
        """The wallet took the debit (its answer's balance): check the bet again and record
        it (no money moves in the store), dropping its hold, in one atomic step. If a check
        fails now (the window closed meanwhile: BETTING_CLOSED), or the hold is no longer
        there to drop (a sender took it: WALLET_UNAVAILABLE), the debit's cancel is queued
        and BetRejected raised."""

    @abc.abstractmethod
    async def release_debit(
        self, table_id: str, player: str, round_no: int, bet_id: str, cancel: bool
    ) -> None:
        """The debit was refused (cancel=False: the hold is dropped) or its outcome is unknown
        (cancel=True: the hold becomes a cancel, due now). Nothing if it is no longer held."""

    @abc.abstractmethod
    async def claim_outbox(self, owner: str, limit: int, claim_ms: int) -> list[OutboxEntry]:
        """Up to `limit` due entries (holds past their time become cancels), each claimed by
        `owner` for `claim_ms`: no other claim hands it out before then."""

    @abc.abstractmethod
    async def outbox_done(self, entry: OutboxEntry, balance: int) -> bool:
        """The wallet acknowledged the entry: forget it and publish the player's balance
        (a BalanceNotice). False if it was gone already (another sender acknowledged it)."""

    @abc.abstractmethod
    async def outbox_retry(
        self, entry: OutboxEntry, owner: str, delay_ms: int, park_after_ms: int
    ) -> EntryState | None:
        """A send failed: due again in `delay_ms`, or PARKED (sent no more) when the entry is
        `park_after_ms` old. None if `owner` no longer holds the entry's claim."""

    @abc.abstractmethod
    async def outbox_entries(self) -> list[OutboxEntry]:
        """Every entry, held, queued or parked (baccarat wallet-pending), oldest first."""

    @abc.abstractmethod
    async def outbox_stats(self) -> OutboxStats: ...

    @abc.abstractmethod
    async def wallet_balance(self, player: str) -> int | None:
        """The wallet's latest balance answer for the player's bet, credit or cancel; None
        before any (GET /api/players/{id} with an HTTP wallet)."""

    # --- events ---------------------------------------------------------------------------
    @abc.abstractmethod
    async def last_seq(self, table_id: str) -> int: ...

    # --- the history's epoch ----------------------------------------------------------------
    # A table's event history carries an epoch, a short random string. It is made with the
    # table (so a table recreated after the store lost it has a new one) and replaced when
    # someone finds that the history went backwards (a Redis restarted without its last
    # writes, a failover to a lagging replica). A seq means something only with its epoch.
    @abc.abstractmethod
    async def epoch(self, table_id: str) -> str: ...

    @abc.abstractmethod
    async def head(self, table_id: str) -> tuple[int, str]:
        """The last seq and the epoch, read together in one cheap call."""

    @abc.abstractmethod
    async def reset_epoch(self, table_id: str, seen: str) -> str:
        """Compare-and-set: if the epoch is still `seen`, replace it with a new random one.
        Returns the epoch now current (so nodes that saw the same loss agree on one)."""

    @abc.abstractmethod
    async def events_after(self, table_id: str, seq: int, limit: int = 1000) -> list[Event] | None:
        """Events with seq > `seq` in order (at most `limit`); None if some are no longer held."""

    @abc.abstractmethod
    async def round_events(self, table_id: str, round_no: int) -> list[Event] | None:
        """Every event of one round in order, exactly as broadcast; None if not held."""

    @abc.abstractmethod
    def follow(self, table_id: str, after_seq: int) -> AsyncIterator[Event]:
        """Yield every event with seq > after_seq, in order, without gaps, forever."""

    # --- ownership --------------------------------------------------------------------------
    @abc.abstractmethod
    async def acquire_lease(self, table_id: str, node: str, ttl_ms: int) -> Lease | None:
        """Take the table's lease if free or expired (new token) or renew it if `node` holds
        it (same token). None if another node holds a live lease."""

    @abc.abstractmethod
    async def release_lease(self, table_id: str, node: str, token: int) -> None: ...

    @abc.abstractmethod
    async def lease(self, table_id: str) -> Lease | None: ...

    # --- operator controls ----------------------------------------------------------------
    # An operator's pause is a request kept apart from the state, which only the table's
    # owner writes: asking never races the owner's fenced commits, and the request holds on
    # every node and across a failover. The owner applies it between two rounds
    # (core.table.pause_table / resume_table), which is what clients see (TableState.paused).
    @abc.abstractmethod
    async def set_paused(self, table_id: str, paused: bool) -> bool:
        """Ask for the table to be paused (True) or to play again (False); returns whether
        this changed the request. The caller makes sure the table exists."""

    @abc.abstractmethod
    async def paused(self, table_id: str) -> bool:
        """Whether an operator asked for the table to be paused (and not resumed since)."""

    # --- housekeeping ---------------------------------------------------------------------
    @abc.abstractmethod
    async def now_ms(self) -> int:
        """The store's clock: bet deadlines are judged by it."""

    @abc.abstractmethod
    async def ledger(self) -> Ledger:
        """Where all the money is; `Ledger.balanced` must always hold."""

    @abc.abstractmethod
    async def audit(
        self,
        player: str,
        since_ms: int | None = None,
        limit: int = AUDIT_PAGE,
        after: str | None = None,
    ) -> list[AuditEntry]:
        """The player's audit log, oldest first (server/store/audit.py): at most `limit`
        entries, none older than the store keeps (`audit_keep_ms` by the store's clock), none
        whose sequence is before `since_ms`, and only those after the sequence `after` (the
        last of a page, to read the next). Every movement of the player's money wrote one
        entry in the same atomic step; a movement refused or not written wrote none. The log
        outlives the player: a guest's ends with its `expire` entry."""

    async def close(self) -> None:
        """Release connections; the default has none."""
        await asyncio.sleep(0)  # nothing to release; keeps it a real coroutine
