"""Helpers for the store tests: a manual clock, test rules, an owner that drives a table, and a
way to write a raw state blob into either engine."""

from __future__ import annotations

import asyncio
import itertools
import random
from collections.abc import AsyncIterator

from server.core.bets import Payout, Spot, SpotLimit, TableLimits
from server.core.recall import round_summary
from server.core.rules import TableRules
from server.core.table import (
    TableState,
    Transition,
    close_betting,
    coup_of,
    deal_next_card,
    open_round,
    publish_totals,
    settle_round,
    void_round,
)
from server.store.base import BetReceipt, Event, Settlement, Store
from server.store.memory import MemoryStore
from server.store.redis import RedisStore
from server.wire import shapes

__all__ = [
    "RULES",
    "TABLE",
    "ManualClock",
    "Owner",
    "accepted_message",
    "bet",
    "read_blob",
    "settlement_message",
    "take",
    "write_blob",
]

TABLE = "t1"
# Small limits so every limit case is reachable; the pair spots are not offered at all.
LIMITS = TableLimits(
    {
        Spot.PLAYER: SpotLimit(100, 1_000),
        Spot.BANKER: SpotLimit(100, 1_000),
        Spot.TIE: SpotLimit(50, 300),
    }
)
RULES = TableRules("test", decks=1, cut_card_from_end=7, limits=LIMITS)
WAIT_S = 5.0  # the most any test waits for an event
_bet_ids = itertools.count(1)


class ManualClock:
    """The memory engine's clock: time moves only when a test says so."""

    def __init__(self, now_ms: int = 1_700_000_000_000) -> None:
        self.now_ms = now_ms

    def __call__(self) -> int:
        return self.now_ms


class Owner:
    """Plays a table's owner through the public interface: lease, then pure transitions."""

    def __init__(self, store: Store, table_id: str = TABLE, node: str = "node-a", seed: int = 1):
        self.store = store
        self.table_id = table_id
        self.node = node
        self.rng = random.Random(seed)
        self.rules = RULES
        self.fence = 0
        self.state = TableState(table_id)

    async def start(self, ttl_ms: int = 60_000) -> Owner:
        lease = await self.store.acquire_lease(self.table_id, self.node, ttl_ms)
        assert lease is not None, "the table is held by another node"
        self.fence = lease.token
        state, rules = (
            await self.store.load_state(self.table_id),
            await self.store.rules(self.table_id),
        )
        assert state is not None and rules is not None
        self.state, self.rules = state, rules
        return self

    async def apply(
        self, transition: Transition, payouts: list[Payout] | None = None
    ) -> list[Event]:
        """Commit the transition; a settling or voiding one with its round's summary, as the
        table loop does."""
        summary = round_summary(transition.state) if payouts is not None else None
        events = await self.store.commit(
            self.table_id,
            self.fence,
            self.state.version,
            transition.state,
            transition.events,
            payouts,
            summary,
        )
        self.state = transition.state
        return events

    async def open(self, window_ms: int = 60_000, *, now_ms: int | None = None) -> list[Event]:
        now = await self.store.now_ms() if now_ms is None else now_ms
        seed = self.rng.randbytes(32)
        return await self.apply(open_round(self.state, self.rules, now, window_ms, seed))

    async def close(self) -> list[Event]:
        """Close the window; a new shoe's first is sealed with the entropy the store took."""
        fair, entropy = self.state.fair, []
        if fair is not None and not fair.sealed:
            entropy = await self.store.shoe_entropy(self.table_id, self.state.shoe_number)
        return await self.apply(close_betting(self.state, None, entropy))

    async def publish(self) -> list[Event]:
        """Commit the round's current totals as a bet_totals event."""
        totals = await self.store.bet_totals(self.table_id, self.state.round)
        return await self.apply(publish_totals(self.state, totals))

    async def deal(self) -> list[Event]:
        events: list[Event] = []
        while self.state.dealt < coup_of(self.state).cards_used:
            events += await self.apply(deal_next_card(self.state))
        return events

    async def settle(self) -> tuple[list[Event], list[Payout]]:
        bets = await self.store.round_bets(self.table_id, self.state.round)
        transition, payouts = settle_round(self.state, self.rules, bets)
        return await self.apply(transition, payouts), payouts

    async def void(self, reason: str = "test") -> tuple[list[Event], list[Payout]]:
        bets = await self.store.round_bets(self.table_id, self.state.round)
        transition, refunds = void_round(self.state, bets, reason)
        return await self.apply(transition, refunds), refunds

    async def finish(self) -> list[Event]:
        """Close, deal and settle the open round; the events, in order."""
        events = await self.close()
        events += await self.deal()
        return events + (await self.settle())[0]


async def bet(
    store: Store,
    player: str,
    amount: object = 100,
    spot: object = "player",
    *,
    round_no: object = 1,
    bet_id: str | None = None,
    table_id: str = TABLE,
) -> BetReceipt:
    bet_id = bet_id if bet_id is not None else f"bet-{next(_bet_ids)}"
    return await store.place_bet(table_id, player, round_no, bet_id, spot, amount)


async def take(events: AsyncIterator[Event], count: int) -> list[Event]:
    """The next `count` events, or a TimeoutError if they do not come."""

    async def collect() -> list[Event]:
        return [await anext(events) for _ in range(count)]

    return await asyncio.wait_for(collect(), WAIT_S)


async def write_blob(store: Store, table_id: str, blob: bytes) -> None:
    """Overwrite the table's stored state blob (and nothing else), as corruption or a node
    of another version would."""
    if isinstance(store, MemoryStore):
        store._tables[table_id].blob = blob
        return
    assert isinstance(store, RedisStore)
    await store._redis.hset(f"{store.key_prefix}:{{t:{table_id}}}:state", "blob", blob)


async def read_blob(store: Store, table_id: str) -> bytes:
    """The table's stored state blob, as stored."""
    if isinstance(store, MemoryStore):
        return store._tables[table_id].blob
    assert isinstance(store, RedisStore)
    blob = await store._redis.hget(f"{store.key_prefix}:{{t:{table_id}}}:state", "blob")
    assert isinstance(blob, bytes)
    return blob


def accepted_message(receipt: BetReceipt) -> shapes.BetAccepted:
    """The bet_accepted answer a session sends for this receipt (server/transport/betting.py)."""
    r = receipt
    return shapes.bet_accepted(r.table, r.round, r.bet_id, r.spot, r.amount, r.balance)


def settlement_message(settlement: Settlement) -> shapes.Settlement:
    """The settlement message a session sends for this record."""
    s = settlement
    return shapes.settlement(s.table, s.round, s.payouts, s.balance)
