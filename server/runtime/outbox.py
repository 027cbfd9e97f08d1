"""The wallet outbox's sender: every node of a site runs one, and together they send each
credit and cancel the store's outbox holds (server/store/outbox.py) until the operator's
wallet acknowledges it.

Each turn claims the due entries (at most CLAIM_BATCH), each for this sender alone until the
claim ends (the wallet's timeout plus CLAIM_GRACE_MS: a sender killed mid-send leaves its
entries to another node within ~12 s), and sends them at once, the same transaction id on
every attempt. OK: the entry is forgotten and every node tells the player its balance. No
answer: due again after a backoff doubling from 1 s to 5 min, until the entry is
--wallet-retry-hours old; then it is parked (sent no more), logged and counted for an
operator to resolve. Never turned into something else: a credit stays a credit.
"""

from __future__ import annotations

import asyncio
import secrets

import structlog

from server.metrics import Metrics
from server.runtime.clock import Clock
from server.store.base import Store, StoreUnavailable
from server.store.outbox import EntryState, OutboxEntry, retry_delay_ms
from server.wallet.base import Credit, Wallet, WalletUnknown

__all__ = ["CLAIM_BATCH", "CLAIM_GRACE_MS", "OutboxSender"]

CLAIM_BATCH = 32  # entries one claim takes, sent at once
CLAIM_GRACE_MS = 10_000  # a claim lasts the wallet's timeout plus this
POLL_S = 0.5  # the pause of a sender that found nothing due
STATS_S = 5.0  # how often the outbox's depth and age are read for /metrics


class OutboxSender:
    def __init__(
        self,
        store: Store,
        wallet: Wallet,
        node_id: str,
        clock: Clock,
        *,
        timeout_s: float,
        retry_hours: float,
        metrics: Metrics | None = None,
    ) -> None:
        self.store = store
        self.wallet = wallet
        self.owner = f"{node_id}/{secrets.token_hex(4)}"  # claims of this process only
        self.clock = clock
        self.claim_ms = round(timeout_s * 1000) + CLAIM_GRACE_MS
        self.park_after_ms = round(retry_hours * 3_600_000)
        self.metrics = metrics or Metrics()
        self.log = structlog.get_logger("wallet").bind(node=node_id)
        self._stats_due = 0.0

    async def run(self) -> None:
        """Send until cancelled; never raise."""
        while True:
            sent = 0
            try:
                sent = await self.send_due()
                await self._stats()
            except StoreUnavailable as error:
                self.log.warning("outbox_store_unavailable", error=str(error))
                self.metrics.store_error("outbox")
            except Exception:  # a bug must not stop the sending for good
                self.log.exception("outbox_failed")
            if not sent:
                await self.clock.sleep(POLL_S)

    async def send_due(self) -> int:
        """Claim the due entries and send each once; how many were claimed."""
        entries = await self.store.claim_outbox(self.owner, CLAIM_BATCH, self.claim_ms)
        if entries:
            await asyncio.gather(*(self._send(entry) for entry in entries))
        return len(entries)

    async def _send(self, entry: OutboxEntry) -> None:
        tx = entry.transaction()
        try:
            answer = await (
                self.wallet.credit(tx) if isinstance(tx, Credit) else self.wallet.cancel(tx)
            )
        except WalletUnknown as unknown:
            await self._failed(entry, unknown)
            return
        assert answer.balance is not None  # a credit's or a cancel's OK carries it
        await self.store.outbox_done(entry, answer.balance)

    async def _failed(self, entry: OutboxEntry, unknown: WalletUnknown) -> None:
        attempts = entry.attempts + 1
        delay = retry_delay_ms(attempts)
        state = await self.store.outbox_retry(entry, self.owner, delay, self.park_after_ms)
        fields = {
            "call": entry.call.value,
            "transaction_id": entry.transaction_id,
            "player": entry.player,
            "amount": entry.amount,
            "attempts": attempts,
            "reason": unknown.reason.value,
        }
        if state is EntryState.PARKED:
            self.log.error("wallet_outbox_parked", **fields, detail=unknown.detail[:200])
            self.metrics.outbox_parked(entry.call.value)
        else:
            self.log.warning("wallet_outbox_retry", **fields, retry_in_ms=delay)

    async def _stats(self) -> None:
        now = self.clock.now_ms() / 1000
        if now < self._stats_due:
            return
        self._stats_due = now + STATS_S
        stats = await self.store.outbox_stats()
        oldest_s = 0.0
        if stats.oldest_ms is not None:
            oldest_s = max(0.0, (await self.store.now_ms() - stats.oldest_ms) / 1000)
        self.metrics.outbox_seen(stats.depth, oldest_s, stats.parked)
