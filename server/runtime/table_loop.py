"""One table's authoritative loop: the only code that sleeps, and only through a Clock.

The loop holds the table's lease while it plays. Each step loads the committed state, sleeps
until that state's next action is due, computes the pure transition and commits it under the
lease's fencing token. Because every step starts from the stored state, a node that takes over
a table continues the very round its previous owner left, from the same shoe position.
"""

from __future__ import annotations

import asyncio
import random
from collections.abc import Callable
from dataclasses import dataclass

import structlog

from server.core.bets import Payout
from server.core.errors import NotEnoughCards
from server.core.rules import TableRules
from server.core.table import (
    Phase,
    TableState,
    Transition,
    close_betting,
    coup_of,
    deal_next_card,
    open_round,
    settle_round,
    void_round,
)
from server.metrics import Metrics
from server.runtime.clock import Clock
from server.store.base import Event, StaleWrite, Store, StoreUnavailable

__all__ = ["LeaseLost", "TableLoop", "Timings"]


@dataclass(frozen=True, slots=True)
class Timings:
    """Seconds between the phases of a round."""

    betting_window: float = 15.0
    deal_interval: float = 1.0  # between two cards
    close_pause: float = 1.0  # betting closed -> first card
    result_pause: float = 1.0  # last card -> settlement
    next_round_pause: float = 3.0  # settled -> next round opens
    lease_ttl: float = 3.0  # how long a silent owner keeps the table
    retry: float = 0.5  # how often a node not owning the table checks the lease


class LeaseLost(Exception):
    """Another node holds the table now; this loop must stop writing."""


class TableLoop:
    def __init__(
        self,
        store: Store,
        table_id: str,
        rules: TableRules,
        node_id: str,
        clock: Clock,
        timings: Timings,
        rng: random.Random | None = None,
        on_commit: Callable[[str, list[Event]], None] | None = None,
        metrics: Metrics | None = None,
    ) -> None:
        self.store = store
        self.table_id = table_id
        self.rules = rules
        self.node_id = node_id
        self.clock = clock
        self.timings = timings
        self.rng = rng or random.SystemRandom()
        # Hands committed events straight to this node's fan-out, ahead of the store's feed.
        self.on_commit = on_commit
        self.metrics = metrics or Metrics()
        self.token: int | None = None  # the fencing token while this node owns the table
        self.log = structlog.get_logger("table").bind(table=table_id, node=node_id)

    @property
    def owning(self) -> bool:
        return self.token is not None

    async def run(self) -> None:
        """Own the table whenever it is free; play while owning; never raise."""
        while True:
            try:
                # Idempotent: recreates the table if the store lost it (e.g. a Redis without
                # persistence restarted), so play resumes instead of failing forever.
                await self.store.create_table(self.table_id, self.rules)
                lease = await self.store.acquire_lease(self.table_id, self.node_id, self._ttl_ms)
                if lease is not None:
                    self.token = lease.token
                    self.metrics.lease_acquired(self.table_id)
                    self.log.info("table_owned", token=lease.token)
                    await self._own(lease.token)
            except* (LeaseLost, StaleWrite) as lost:
                self.log.warning("lease_lost", reason=str(lost.exceptions[0]))
                self.metrics.lease_lost(self.table_id)
            except* StoreUnavailable as down:
                self.log.warning("store_unavailable", error=str(down.exceptions[0]))
                self.metrics.store_error("table_loop")
            except* Exception:
                self.log.exception("table_loop_failed")
            # Not in a `finally`: a cancelled loop keeps its token so release() can still
            # give the lease up (Node.stop cancels the loops, then releases).
            self.token = None
            await self.clock.sleep(self.timings.retry)

    async def release(self) -> None:
        """Give the table up (graceful drain): another node can take it at once."""
        if self.token is not None:
            await self.store.release_lease(self.table_id, self.node_id, self.token)
            self.token = None

    @property
    def _ttl_ms(self) -> int:
        return round(self.timings.lease_ttl * 1000)

    async def _own(self, token: int) -> None:
        async with asyncio.TaskGroup() as group:
            group.create_task(self._renew(token))
            group.create_task(self._play(token))

    async def _renew(self, token: int) -> None:
        while True:
            await self.clock.sleep(self.timings.lease_ttl / 3)
            lease = await self.store.acquire_lease(self.table_id, self.node_id, self._ttl_ms)
            if lease is None or lease.token != token:
                raise LeaseLost(f"lease token {token} is gone")

    async def _play(self, token: int) -> None:
        rules = await self.store.rules(self.table_id) or self.rules
        while True:
            state = await self.store.load_state(self.table_id)
            assert state is not None
            # Every log line of this task (ours, the store's) names the round it is about.
            structlog.contextvars.bind_contextvars(table=self.table_id, round=state.round)
            await self.step(state, rules, token)

    async def step(self, state: TableState, rules: TableRules, token: int) -> None:
        """Wait for the state's next action, then commit it."""
        if state.phase in (Phase.IDLE, Phase.SETTLED, Phase.VOIDED):
            now = await self.store.now_ms()
            window_ms = round(self.timings.betting_window * 1000)
            await self._commit(token, state, open_round(state, rules, now, window_ms, self.rng))
        elif state.phase is Phase.BETTING:
            remaining_ms = state.closes_at_ms - await self.store.now_ms()
            if remaining_ms > 0:
                await self.clock.sleep(remaining_ms / 1000)
                return  # reload: the state is re-read and the deadline re-checked
            await self._commit(token, state, close_betting(state))
        else:
            await self._deal_or_settle(state, rules, token)

    async def _deal_or_settle(self, state: TableState, rules: TableRules, token: int) -> None:
        try:
            cards_used = coup_of(state).cards_used
        except NotEnoughCards as error:
            await self._void(state, token, f"the shoe cannot finish this coup: {error}")
            return
        if state.dealt < cards_used:
            first = state.dealt == 0
            await self.clock.sleep(
                self.timings.close_pause if first else self.timings.deal_interval
            )
            await self._commit(token, state, deal_next_card(state))
            return
        await self.clock.sleep(self.timings.result_pause)
        bets = await self.store.round_bets(self.table_id, state.round)
        transition, payouts = settle_round(state, rules, bets)
        await self._commit(token, state, transition, payouts)
        self.log.info("round_settled", round=state.round, bets=len(bets))
        self.metrics.round_settled(coup_of(state).winner.value)
        await self.clock.sleep(self.timings.next_round_pause)

    async def _void(self, state: TableState, token: int, reason: str) -> None:
        bets = await self.store.round_bets(self.table_id, state.round)
        transition, refunds = void_round(state, bets, reason)
        await self._commit(token, state, transition, refunds)
        self.log.warning("round_voided", round=state.round, reason=reason, bets=len(bets))
        self.metrics.round_voided()

    async def _commit(
        self,
        token: int,
        state: TableState,
        transition: Transition,
        payouts: list[Payout] | None = None,
    ) -> None:
        stored = await self.store.commit(
            self.table_id, token, state.version, transition.state, transition.events, payouts
        )
        if self.on_commit is not None:
            self.on_commit(self.table_id, stored)
