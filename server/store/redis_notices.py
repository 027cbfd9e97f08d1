"""The Redis engine's settled notices: commit.lua publishes one on the store's settled channel
when a commit pays players, and each listener reads them on a connection of its own."""

from __future__ import annotations

import asyncio
import contextlib
from collections.abc import AsyncIterator
from typing import Any

import structlog
from redis.asyncio import Redis
from redis.asyncio.retry import Retry
from redis.backoff import NoBackoff

from server.store.base import SettledNotice, StoreUnavailable
from server.store.codec import unpackb
from server.store.outbox import BalanceNotice
from server.store.redis_base import RedisBase
from server.store.redis_client import reachable

__all__ = ["NOTICE_HEALTH_S", "NOTICE_POLL_S", "RedisNotices"]

_log = structlog.get_logger("store")

NOTICE_POLL_S = 1.0  # one wait for a settled notice; the listener loops, checking its health
NOTICE_HEALTH_S = 10  # a listener with nothing to read PINGs this often, to notice a lost Redis


class RedisNotices(RedisBase):
    @contextlib.asynccontextmanager
    async def settled_notices(
        self,
    ) -> AsyncIterator[AsyncIterator[SettledNotice | BalanceNotice]]:
        # A connection of its own, which fails at once instead of reconnecting quietly: a
        # subscription lost while Redis was away must be seen (and entered again) by the caller.
        options = self._options()
        options["retry"] = Retry(NoBackoff(), 0)
        options["socket_timeout"] = self._timeout_s + NOTICE_POLL_S
        options["health_check_interval"] = NOTICE_HEALTH_S
        client: Redis = Redis.from_url(self._url, **options)
        pubsub: Any = client.pubsub()
        try:
            await self._subscribe(pubsub)
            yield self._notices(pubsub)
        finally:
            with contextlib.suppress(Exception):  # a connection already lost is gone anyway
                await pubsub.aclose()
            await client.aclose()

    async def _subscribe(self, pubsub: Any) -> None:
        """Subscribe, and wait until Redis confirms: the subscription is live from then on."""
        try:
            with reachable():
                await pubsub.subscribe(self._keys.settled)
                async with asyncio.timeout(self._timeout_s):
                    while await pubsub.get_message(timeout=NOTICE_POLL_S) is None:
                        pass
        except TimeoutError as exc:
            raise StoreUnavailable("redis did not confirm the subscription") from exc

    @staticmethod
    async def _notices(pubsub: Any) -> AsyncIterator[SettledNotice | BalanceNotice]:
        while True:
            with reachable():
                message = await pubsub.get_message(
                    ignore_subscribe_messages=True, timeout=NOTICE_POLL_S
                )
            if message is None or message["type"] != "message":
                continue
            notice = notice_of(message["data"])
            if notice is None:  # not ours (anyone may PUBLISH): skipped, the listener goes on
                _log.warning("settled_notice_malformed", size=len(message["data"]))
                continue
            yield notice


def notice_of(data: bytes) -> SettledNotice | BalanceNotice | None:
    """The notice a commit script published ([table, round, [player, ...]]), or outbox_done
    (['balance', player, balance, table, round, settled]), or None."""
    try:
        notice = unpackb(data)
        if isinstance(notice, list) and len(notice) == 6 and notice[0] == "balance":
            return balance_notice_of(notice)
        table_id, round_no, players = notice
    except Exception:  # any bytes at all may arrive on a pub/sub channel
        return None
    if (
        not isinstance(table_id, str)
        or type(round_no) is not int
        or not isinstance(players, list)
        or not all(isinstance(player, str) for player in players)
    ):
        return None
    return SettledNotice(table_id, round_no, tuple(players))


def balance_notice_of(notice: list[Any]) -> BalanceNotice | None:
    _, player, balance, table_id, round_no, settled = notice
    if not (isinstance(player, str) and isinstance(table_id, str)):
        return None
    if type(balance) is not int or type(round_no) is not int:
        return None
    return BalanceNotice(player, balance, table_id, round_no, bool(settled))
