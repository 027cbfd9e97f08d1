"""What every part of the Redis engine shares: its connection settings, its clients, its
scripts, its key layout, and the three ways a part calls Redis.

RedisStore (server/store/redis.py) is this base and the parts that inherit it, one job each:
the wallet (redis_wallet.py), the guests (redis_guests.py), the entropy of committed shoes
(redis_entropy.py), the event stream
(redis_events.py) and the settled notices (redis_notices.py). Mixins, not objects the store
forwards to, so a call costs what it did when the engine was one class.

A part calls Redis one of three ways: `_run` a Lua script and `_call` a command, both sent in
the turn's pipeline (redis_link.Batcher), or `self._redis`, the pooled client, for reads that
need no batching. Each turns a lost connection into StoreUnavailable (redis_client.reachable).
"""

from __future__ import annotations

from collections.abc import Awaitable, Sequence
from typing import Any

from redis.asyncio import BlockingConnectionPool, Redis
from redis.asyncio.retry import Retry
from redis.backoff import ExponentialBackoff
from redis.commands.core import AsyncScript

from server.store.audit import DEFAULT_AUDIT_ENTRIES, DEFAULT_AUDIT_KEEP_MS
from server.store.base import Store
from server.store.redis_client import PackingConnection, reachable
from server.store.redis_keys import KeyLayout
from server.store.redis_link import Batcher
from server.store.redis_replies import unknown_table
from server.store.redis_scripts import register_scripts, script_reply

__all__ = ["RedisBase"]


class RedisBase(Store):
    def __init__(
        self,
        url: str,
        *,
        key_prefix: str,
        timeout_s: float,
        retries: int,
        max_connections: int,
        audit_keep_ms: int = DEFAULT_AUDIT_KEEP_MS,
        audit_entries: int = DEFAULT_AUDIT_ENTRIES,
    ) -> None:
        self._url = url
        # The audit log's limits, as every money script takes them (server/store/audit.py).
        self._audit_keep = (max(int(audit_keep_ms), 1), max(int(audit_entries), 1))
        self._prefix = key_prefix
        self._keys = KeyLayout(key_prefix)
        # Bound once: the bet path names a player's and a table's keys without a second hop.
        self._table_keys = self._keys.table
        self._player_key = self._keys.player
        self._timeout_s = timeout_s
        self._retries = retries
        self._max_connections = max_connections
        self._redis = self._shared_client()
        self._scripts: dict[str, AsyncScript] = register_scripts(self._redis)
        self._batcher = Batcher(self._redis)

    @property
    def key_prefix(self) -> str:
        """The prefix of every key this store uses (tests and operators inspect them)."""
        return self._prefix

    def _options(self) -> dict[str, Any]:
        return {
            "socket_connect_timeout": self._timeout_s,
            "socket_timeout": self._timeout_s,
            # Reconnects on its own: a few quick retries, then the caller sees StoreUnavailable.
            "retry": Retry(ExponentialBackoff(cap=0.5, base=0.02), self._retries),
        }

    def _shared_client(self) -> Redis:
        """The client of every call but follow: a bounded pool that queues callers when full
        (the default pool refuses the 101st concurrent call outright)."""
        pool = BlockingConnectionPool.from_url(
            self._url,
            # Only for redis://; the URL's scheme picks the class of the others.
            connection_class=PackingConnection,
            max_connections=self._max_connections,
            timeout=self._timeout_s,
            **self._options(),
        )
        return Redis.from_pool(pool)

    async def _run(self, name: str, keys: Sequence[str], args: Sequence[object]) -> Any:
        return await self._submit_script(name, keys, args)

    def _submit_script(
        self, name: str, keys: Sequence[str], args: Sequence[object]
    ) -> Awaitable[Any]:
        """Queue a script call in this turn's pipeline now; await what this returns for its
        reply."""
        script = self._scripts[name]
        sent = self._batcher.submit("EVALSHA", script.sha, len(keys), *keys, *args)
        return script_reply(script, sent, keys, args)

    async def _call(self, *args: Any) -> Any:
        """One command, in the next pipeline (see redis_link.Batcher)."""
        with reachable():
            return await self._batcher.call(*args)

    async def _require_table(self, table_id: str) -> None:
        if not await self._call("EXISTS", self._table_keys(table_id).state):
            raise unknown_table(table_id)

    async def close(self) -> None:
        await self._batcher.close()
        await self._redis.aclose()
