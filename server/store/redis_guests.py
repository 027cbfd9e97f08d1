"""The Redis engine's guests: players made on the fly (demo mode) who expire when unseen for
their TTL. A zset holds each guest's expiry by the store's clock; seeing a guest pushes it
back, and a sweep removes the due ones, money and records, in short scripts.

A guest with a stake in play never expires (its bet must settle first): the sweep pages past
those, so they cannot stop it from reaching the others.
"""

from __future__ import annotations

from collections.abc import Collection

from server.store.redis_base import RedisBase

__all__ = ["EXPIRE_BATCH", "KEEP_BATCH", "RedisGuests"]

EXPIRE_BATCH = 500  # guests one expire_guests script looks at: a short script, many if needed
KEEP_BATCH = 500  # guests one keep_guests script pushes back


class RedisGuests(RedisBase):
    async def keep_guests(self, players: Collection[str]) -> None:
        names = list(players)
        for first in range(0, len(names), KEEP_BATCH):  # short scripts, sent together
            batch = names[first : first + KEEP_BATCH]
            await self._run("keep_guests", list(self._keys.guests), batch)

    async def expire_guests(self, now_ms: int | None = None) -> int:
        now = await self.now_ms() if now_ms is None else now_ms
        keys = [*self._keys.guests, self._keys.ledger]
        removed = offset = 0
        while True:  # a batch per script, so no one script holds Redis long
            gone, looked_at, skipped = await self._run(
                "expire_guests", keys, [now, offset, EXPIRE_BATCH, self._prefix, *self._audit_keep]
            )
            removed, offset = removed + gone, offset + skipped  # skip those with bets in play
            if looked_at < EXPIRE_BATCH:
                return int(removed)
