"""The Redis engine's part of the committed shoe: players' entropy values, taken from any node
by the add_entropy script (the window judged by Redis's clock, one value per player per shoe)
and read back in order by the table's owner when it seals the shoe (docs/fairness.md).

A shoe's values live in two keys beside the table's: `entropy:<shoe>` (hash, player ->
value: one per player) and `entropy_order:<shoe>` (list: the values in the order taken).
They expire a day after the last value; the next shoe's first value deletes them.
"""

from __future__ import annotations

from typing import Any

from server.core import events as ev
from server.store.base import (
    MAX_ENTROPY_PER_SHOE,
    Event,
    StoreDataError,
    entropy_already_sent,
    entropy_closed,
    entropy_full,
)
from server.store.codec import unpackb
from server.store.redis_base import RedisBase
from server.store.redis_client import reachable
from server.store.redis_replies import as_bytes, unknown_table
from server.wire.envelope import template

__all__ = ["RedisEntropy"]


class RedisEntropy(RedisBase):
    _history: tuple[int, int]  # events and rounds kept (RedisStore sets them)

    async def add_entropy(self, table_id: str, player: str, value: str) -> Event:
        keys = self._table_keys(table_id)
        with reachable():
            raw: list[Any] = await self._redis.hmget(keys.state, ("round", "shoe"))
        if raw[0] is None:
            raise unknown_table(table_id)
        round_no, shoe = int(raw[0]), int(raw[1] or 0)
        # Encoded for the round and shoe read; the script refuses if either moved on since.
        parts = template(table_id, round_no, ev.entropy_accepted(shoe=shoe, value=value))
        args: list[object] = [table_id, keys.prefix, *self._history, player, value]
        args += [MAX_ENTROPY_PER_SHOE, round_no, shoe, *parts]
        reply = await self._run("add_entropy", [keys.state, keys.stream, keys.rounds], args)
        code = reply[0].decode()
        if code == "OK":
            event: Event = unpackb(reply[1])
            return event
        if code == "UNKNOWN_TABLE":
            raise unknown_table(table_id)
        if code == "BROKEN":
            raise StoreDataError(f"entropy not taken, nothing written: {reply[1].decode()}")
        refusal = {"CLOSED": entropy_closed, "SENT": entropy_already_sent, "FULL": entropy_full}
        raise refusal[code]()

    async def shoe_entropy(self, table_id: str, shoe: int) -> list[str]:
        key = self._table_keys(table_id).per_round("entropy_order", shoe)
        with reachable():
            raw = await self._redis.lrange(key, 0, -1)
        return [as_bytes(value).decode() for value in raw]
