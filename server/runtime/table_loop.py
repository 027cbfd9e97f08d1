"""One table's authoritative loop: the only code that sleeps, and only through a Clock.

The loop holds the table's lease while it plays. Each step loads the committed state, sleeps
until that state's next action is due, computes the pure transition and commits it under the
lease's fencing token. Because every step starts from the stored state, a node that takes over
a table continues the very round its previous owner left, from the same shoe position.

While betting is open the loop also publishes the round's totals (bet_totals), at most every
`totals_interval` and only when bets came in, plus a final one with betting_closed: spectators
see how much is on each spot a few times a second, whatever the number of bets, and never who.

Failure policy: a state the loop cannot read or step (a corrupt blob, a newer format, a bug
in a transition) is tried STEP_ATTEMPTS times; then the table is restarted from the fields the
store keeps outside the blob: the open round is voided, its stored bets refunded once (the
commit is fenced and versioned), a new shoe follows, and `table_wedged` is logged as critical.
If even that does not get the table going, the node gives the lease up and leaves the table
to other nodes for `abandon_pause` (`table_abandoned`).
"""

from __future__ import annotations

import asyncio
import secrets
from collections.abc import Callable
from dataclasses import dataclass

import structlog

from server.core.bets import BetTotals, Payout, settle_bets
from server.core.errors import BetRejected, NotEnoughCards
from server.core.fair import SEED_SIZE
from server.core.recall import round_summary
from server.core.rules import TableRules
from server.core.shoe import RandRange
from server.core.table import (
    Phase,
    TableState,
    Transition,
    bare_state,
    close_betting,
    coup_of,
    deal_next_card,
    open_round,
    pause_table,
    publish_totals,
    refund_bets,
    restart_table,
    resume_table,
    round_settled,
    round_voided,
)
from server.metrics import Metrics
from server.runtime.clock import Clock, honour_swallowed_cancel
from server.runtime.slices import in_slices, player_slices
from server.store.base import Event, StaleWrite, StateUnreadable, Store, StoreUnavailable

__all__ = ["STEP_ATTEMPTS", "LeaseLost", "TableLoop", "TableWedged", "Timings", "fresh_seed"]

STEP_ATTEMPTS = 3  # failed tries on one stored state before the table is restarted


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
    totals_interval: float = 0.25  # at most this often a bet_totals event while betting
    abandon_pause: float = 30.0  # a table this node could not restart is left to others


def fresh_seed() -> bytes:
    """A new shoe's secret seed, from the OS CSPRNG (docs/fairness.md)."""
    return secrets.token_bytes(SEED_SIZE)


class LeaseLost(Exception):
    """Another node holds the table now; this loop must stop writing."""


class TableWedged(Exception):
    """The table's state cannot be read or stepped, even after restarting the table."""


# Not a wedged table: the store is down or another node owns the table. Retried as before.
_NOT_WEDGED = (StoreUnavailable, StaleWrite, LeaseLost)


class TableLoop:
    def __init__(
        self,
        store: Store,
        table_id: str,
        rules: TableRules,
        node_id: str,
        clock: Clock,
        timings: Timings,
        seeds: Callable[[], bytes] = fresh_seed,
        rig: RandRange | None = None,
        on_commit: Callable[[str, list[Event]], None] | None = None,
        metrics: Metrics | None = None,
    ) -> None:
        self.store = store
        self.table_id = table_id
        self.rules = rules
        self.node_id = node_id
        self.clock = clock
        self.timings = timings
        # Each new shoe's seed: the OS CSPRNG; a test may inject its own source.
        self.seeds = seeds
        # TESTS ONLY: shuffle sealed shoes with this source instead of the committed stream,
        # to stack the cards (core.fair_table.seal_shoe); the reveal will not recompute them.
        self.rig = rig
        # Hands committed events straight to this node's fan-out, ahead of the store's feed.
        self.on_commit = on_commit
        self.metrics = metrics or Metrics()
        self.token: int | None = None  # the fencing token while this node owns the table
        self.log = structlog.get_logger("table").bind(table=table_id, node=node_id)
        self._published = (0, 0)  # (round, bets) of the last bet_totals committed
        self._failed_version: int | None = None  # the stored version that keeps failing
        self._attempts = 0  # failed tries on it
        self._restarted = False  # restarted the table, and no step has succeeded since
        self._poke = asyncio.Event()  # set by wake(): an operator paused or resumed the table

    @property
    def owning(self) -> bool:
        return self.token is not None

    async def run(self) -> None:
        """Own the table whenever it is free; play while owning; never raise."""
        while True:
            wedged: BaseException | None = None  # why this node gives the table up
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
            except* TableWedged as stuck:
                wedged = stuck.exceptions[0]
            except* (LeaseLost, StaleWrite) as lost:
                self.log.warning("lease_lost", reason=str(lost.exceptions[0]))
                self.metrics.lease_lost(self.table_id)
            except* StoreUnavailable as down:
                self.log.warning("store_unavailable", error=str(down.exceptions[0]))
                self.metrics.store_error("table_loop")
            except* Exception:
                self.log.exception("table_loop_failed")
            if wedged is not None:
                await self._step_down()
                self.log.critical(
                    "table_abandoned",
                    reason=str(wedged),
                    pause=self.timings.abandon_pause,
                    exc_info=wedged,
                )
            # Not in a `finally`: a cancelled loop keeps its token so release() can still
            # give the lease up (Node.stop cancels the loops, then releases).
            self.token = None
            await self.clock.sleep(
                self.timings.abandon_pause if wedged is not None else self.timings.retry
            )

    async def _step_down(self) -> None:
        """Give up a table this node cannot play: another node may take it at once, and this
        one starts afresh when it next gets the table."""
        self._failed_version, self._attempts, self._restarted = None, 0, False
        try:
            await self.release()
        except StoreUnavailable:
            self.token = None  # the lease lapses by itself: it is no longer renewed

    async def release(self) -> None:
        """Give the table up (graceful drain): another node can take it at once."""
        if self.token is None:
            return
        token, self.token = self.token, None
        try:
            await self.store.release_lease(self.table_id, self.node_id, token)
        except (BetRejected, StoreUnavailable) as error:
            # The store lost the table (came back empty) or is down: there is nothing to hand
            # over, or the lease expires by itself. Either way the node's stop goes on.
            self.log.warning("release_failed", error=str(error))

    @property
    def _ttl_ms(self) -> int:
        return round(self.timings.lease_ttl * 1000)

    async def _own(self, token: int) -> None:
        """Renew the lease and play until either fails; raise what it raised.

        Not a TaskGroup: on Python 3.11 a TaskGroup whose child fails while it waits in
        __aexit__ leaves its parent's cancel request counted (Task.cancelling), and the
        clock's check for cancellations lost inside redis-py would then stop this loop.

        A cancel of this loop lost in the store call that just got the lease is honoured
        first: the children below never hear of it, and would play on while Node.stop
        waited for this loop for ever."""
        honour_swallowed_cancel()
        tasks = [asyncio.create_task(self._renew(token)), asyncio.create_task(self._play(token))]
        try:
            done, _ = await asyncio.wait(tasks, return_when=asyncio.FIRST_EXCEPTION)
        finally:
            for task in tasks:
                task.cancel()
            await asyncio.gather(*tasks, return_exceptions=True)
        for task in done:
            if not task.cancelled() and (error := task.exception()) is not None:
                raise error

    async def _renew(self, token: int) -> None:
        while True:
            await self.clock.sleep(self.timings.lease_ttl / 3)
            lease = await self.store.acquire_lease(self.table_id, self.node_id, self._ttl_ms)
            if lease is None or lease.token != token:
                raise LeaseLost(f"lease token {token} is gone")

    async def _play(self, token: int) -> None:
        rules = await self.store.rules(self.table_id) or self.rules
        while True:
            try:
                state = await self.store.load_state(self.table_id)
                if state is None:  # e.g. a Redis without persistence restarted empty
                    raise LeaseLost("the table is gone from the store")
                # Every log line of this task (ours, the store's) names the round it is about.
                structlog.contextvars.bind_contextvars(table=self.table_id, round=state.round)
                await self.step(state, rules, token)
            except _NOT_WEDGED:
                raise
            except Exception as error:  # unreadable or unsteppable: the failure policy
                await self._failed(token, error)
            else:
                self._failed_version, self._attempts, self._restarted = None, 0, False

    async def _failed(self, token: int, error: Exception) -> None:
        """Count a failed step on the stored version; restart the table after STEP_ATTEMPTS."""
        try:
            header = await self.store.load_header(self.table_id)
        except StateUnreadable as unreadable:  # nothing to restart from
            raise TableWedged(f"not even the state's fields can be read: {unreadable}") from error
        version = header.version if header is not None else None
        if version != self._failed_version:
            self._failed_version, self._attempts = version, 0
        self._attempts += 1
        self.log.error("table_step_failed", attempt=self._attempts, version=version, exc_info=error)
        if self._attempts < STEP_ATTEMPTS:
            await self.clock.sleep(self.timings.retry)
            return
        if header is None or self._restarted:
            raise TableWedged(f"the state still cannot be read or stepped: {error!r}") from error
        await self._restart(token, header, error)

    async def _restart(self, token: int, header: TableState, error: Exception) -> None:
        reason = f"the table's state could not be read or stepped ({type(error).__name__})"
        self.log.critical(
            "table_wedged",
            round=header.round,
            phase=header.phase.value,
            version=header.version,
            attempts=self._attempts,
            exc_info=error,
        )
        try:
            state = bare_state(header)
            if state.phase is Phase.BETTING:
                # Stop the bets first: once this commits the store refuses every bet of the
                # round, so the bets read below are all there is to refund.
                closing = close_betting(state)
                await self._commit(token, state, closing)
                state = closing.state
            dealing = state.phase is Phase.DEALING
            bets = await self.store.round_bets(self.table_id, state.round) if dealing else []
            refunds = await in_slices(bets, refund_bets)
            await self._commit(token, state, restart_table(state, refunds, reason), refunds)
        except _NOT_WEDGED:
            raise
        except Exception as failure:
            raise TableWedged(f"the table could not be restarted: {failure!r}") from failure
        self._restarted, self._attempts = True, 0
        self.log.warning("round_voided", round=header.round, reason=reason, bets=len(bets))

    def wake(self) -> None:
        """An operator paused or resumed this table: look at the request now rather than at
        the next `retry` (a request made on another node is seen within `retry`)."""
        self._poke.set()

    async def step(self, state: TableState, rules: TableRules, token: int) -> None:
        """Wait for the state's next action, then commit it."""
        if state.phase in (Phase.IDLE, Phase.SETTLED, Phase.VOIDED):
            # Between two rounds: the only place an operator's pause takes effect, so the
            # round in play always finishes. Applying it is a commit (table_paused/resumed).
            self._poke.clear()
            wanted = await self.store.paused(self.table_id)
            if wanted != state.paused:
                change = pause_table if wanted else resume_table
                await self._commit(token, state, change(state))
                self.log.info("table_paused" if wanted else "table_resumed", round=state.round)
                return
            if state.paused:
                await self._until_poked(self.timings.retry)
                return
            now = await self.store.now_ms()
            window_ms = round(self.timings.betting_window * 1000)
            opening = open_round(state, rules, now, window_ms, self.seeds())
            await self._commit(token, state, opening)
        elif state.phase is Phase.BETTING:
            remaining_ms = state.closes_at_ms - await self.store.now_ms()
            if remaining_ms > 0:
                totals = await self._new_totals(state)
                if totals is not None:
                    await self._commit(token, state, publish_totals(state, totals))
                    self._published = (state.round, totals.bets)
                await self.clock.sleep(min(remaining_ms / 1000, self.timings.totals_interval))
                return  # reload: the state is re-read and the deadline re-checked
            # Past the deadline by the store's clock no bet (and no entropy) is accepted: these
            # totals are final, and so is a new shoe's entropy, which seals it.
            totals = await self._new_totals(state)
            entropy = await self._entropy(state)
            await self._commit(token, state, close_betting(state, totals, entropy, self.rig))
            if totals is not None:
                self._published = (state.round, totals.bets)
        else:
            await self._deal_or_settle(state, rules, token)

    async def _until_poked(self, seconds: float) -> None:
        """Sleep `seconds` (through the clock), or less if wake() is called meanwhile."""
        # The sleep runs in a task of its own, whose clock.sleep cannot see a cancel of this
        # one that a store call swallowed (see clock.py); without this check a paused table's
        # loop would ignore Node.stop for ever.
        honour_swallowed_cancel()
        sleeper = asyncio.ensure_future(self.clock.sleep(seconds))
        poked = asyncio.ensure_future(self._poke.wait())
        try:
            await asyncio.wait((sleeper, poked), return_when=asyncio.FIRST_COMPLETED)
        finally:
            for task in (sleeper, poked):
                task.cancel()
            await asyncio.gather(sleeper, poked, return_exceptions=True)

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
        coup = coup_of(state)
        payouts = await in_slices(bets, lambda part: settle_bets(rules.paytable, part, coup))
        await self._commit(token, state, round_settled(state, payouts, rules), payouts)
        self.log.info("round_settled", round=state.round, bets=len(bets))
        self.metrics.round_settled(coup_of(state).winner.value)
        await self.clock.sleep(self.timings.next_round_pause)

    async def _entropy(self, state: TableState) -> list[str]:
        """The players' entropy a shoe not sealed yet is sealed with: all the store took."""
        if state.fair is None or state.fair.sealed:
            return []
        return await self.store.shoe_entropy(self.table_id, state.shoe_number)

    async def _new_totals(self, state: TableState) -> BetTotals | None:
        """The round's totals if bets came in since the last ones published (a round's bets
        only ever grow, so their count tells)."""
        totals = await self.store.bet_totals(self.table_id, state.round)
        published = self._published[1] if self._published[0] == state.round else 0
        return totals if totals.bets != published else None

    async def _void(self, state: TableState, token: int, reason: str) -> None:
        bets = await self.store.round_bets(self.table_id, state.round)
        refunds = await in_slices(bets, refund_bets)
        await self._commit(token, state, round_voided(state, refunds, reason), refunds)
        self.log.warning("round_voided", round=state.round, reason=reason, bets=len(bets))
        self.metrics.round_voided()

    async def _commit(
        self,
        token: int,
        state: TableState,
        transition: Transition,
        payouts: list[Payout] | None = None,
    ) -> None:
        """Commit a transition; one that pays (settles or voids a round) goes with the round's
        summary, from which the store writes each bettor's game-recall record.

        The payouts are credited in slices of whole players (server/runtime/slices.py), each
        but the last a commit of the unchanged `state` with no events, yielding in between;
        the last goes with the transition, so a round of one slice is one atomic commit as
        before. A commit is fenced and versioned and the store credits no player twice in a
        round, so an owner that loses the table halfway leaves the rest to the next owner,
        which redoes the round's slices from the same stored state and bets: every bet is
        credited exactly once, and the round ends only once all are."""
        summary = round_summary(transition.state) if payouts else None
        parts = await player_slices(payouts) if payouts else [[]]
        for part in parts[:-1]:
            await self.store.commit(self.table_id, token, state.version, state, [], part, summary)
            await asyncio.sleep(0)  # the memory engine's commit never yields by itself
        stored = await self.store.commit(
            self.table_id,
            token,
            state.version,
            transition.state,
            transition.events,
            parts[-1] or None,
            summary,
        )
        if self.on_commit is not None:
            self.on_commit(self.table_id, stored)
