"""The Redis engine's audit log: one stream per player, `<prefix>:{p:<player>}:audit`.

The money scripts append to it (server/store/lua/lib.lua `audit`), each entry an `XADD *`
whose ID is its sequence, with one field `a`: the msgpack array server/store/audit.py reads.
A read is one XRANGE of that player's stream, from the first sequence the store still keeps,
whatever the number of other players.
"""

from __future__ import annotations

from typing import Any

from server.store.audit import AUDIT_PAGE, AuditEntry, audit_entry, first_seq
from server.store.codec import unpackb
from server.store.redis_base import RedisBase
from server.store.redis_client import reachable
from server.store.redis_replies import as_bytes

__all__ = ["RedisAudit"]


class RedisAudit(RedisBase):
    async def audit(
        self,
        player: str,
        since_ms: int | None = None,
        limit: int = AUDIT_PAGE,
        after: str | None = None,
    ) -> list[AuditEntry]:
        if limit <= 0:
            return []
        # By the store's clock: entries past keep_ms wait for the next append to be trimmed.
        ms, n = first_seq(await self.now_ms(), self._audit_keep[0], since_ms, after)
        with reachable():
            raw: Any = await self._redis.xrange(
                self._player_key(player, "audit"), f"{ms}-{n}", "+", count=limit
            )
        return [
            audit_entry(as_bytes(seq).decode(), player, unpackb(as_bytes(fields[b"a"])))
            for seq, fields in raw
        ]
