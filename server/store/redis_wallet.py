"""The Redis engine's wallet: players' balances, the operator's credits and debits (with
their idempotency keys), the game-recall history and the ledger of every unit of money.

The writes are Lua scripts (ensure_player, move_money; commit and place_bet move the rest),
each checking the ledger's bounds before it writes anything (server/store/wallet.py).
"""

from __future__ import annotations

from typing import Any, NoReturn

from server.store.base import Ledger, StoreDataError
from server.store.codec import unpackb
from server.store.recall import history_record
from server.store.redis_base import RedisBase
from server.store.redis_client import reachable
from server.store.redis_replies import as_bytes
from server.store.wallet import (
    IDEMPOTENCY_KEYS_KEPT,
    MONEY_LIMIT,
    MOVEMENTS_KEPT,
    InsufficientFunds,
    LedgerLimit,
    Movement,
    check_movement,
)

__all__ = ["RedisWallet", "refused_write"]


class RedisWallet(RedisBase):
    async def ensure_player(
        self, player: str, initial_balance: int, guest_ttl_ms: int | None = None
    ) -> int:
        keys = [self._player_key(player, "balance"), self._keys.ledger, *self._keys.guests]
        keys.append(self._player_key(player, "audit"))
        ttl = "" if guest_ttl_ms is None else max(int(guest_ttl_ms), 0)
        args = [initial_balance, ttl, player, *self._audit_keep]
        reply = await self._run("ensure_player", keys, args)
        if isinstance(reply, list):
            refused_write(reply)
        return int(reply)

    async def balance(self, player: str) -> int | None:
        raw = await self._call("GET", self._player_key(player, "balance"))
        return int(raw) if raw is not None else None

    async def move_money(self, player: str, amount: int, idempotency_key: str) -> Movement:
        amount = check_movement(amount, idempotency_key)
        keys = [
            *(self._player_key(player, kind) for kind in ("balance", "movements", "moves")),
            self._player_key(player, "move_keys"),
            self._keys.ledger,
            self._player_key(player, "audit"),
        ]
        args = [player, amount, idempotency_key, MOVEMENTS_KEPT, IDEMPOTENCY_KEYS_KEPT]
        reply = await self._run("move_money", keys, [*args, MONEY_LIMIT, *self._audit_keep])
        code = reply[0].decode()
        if code == "FUNDS":
            raise InsufficientFunds(player, int(reply[1]), -amount)
        if code == "LIMIT":
            raise ValueError(f"a balance of {int(reply[1])} + {amount} would pass 2**53")
        if code != "OK":
            refused_write(reply)
        return Movement(*unpackb(reply[1]))

    async def movements(self, player: str, limit: int = MOVEMENTS_KEPT) -> list[Movement]:
        if limit <= 0:
            return []
        with reachable():
            raw = await self._redis.lrange(self._player_key(player, "movements"), 0, limit - 1)
        return [Movement(*unpackb(as_bytes(item))) for item in raw]

    async def history(
        self, player: str, table_id: str | None = None, limit: int = 20
    ) -> list[dict[str, Any]]:
        if limit <= 0:
            return []
        # Filtering by table reads every record kept (at most recall_rounds, small).
        last = limit - 1 if table_id is None else -1
        with reachable():
            raw = await self._redis.lrange(self._player_key(player, "history"), 0, last)
        records = []
        for item in raw:
            time_ms, balance_after, body = unpackb(as_bytes(item))
            if table_id is None or body["table"] == table_id:
                records.append(history_record(body, time_ms, balance_after))
        return records[:limit]

    async def ledger(self) -> Ledger:
        fields = ("issued", "balances", "in_play", "house", "operator_in", "operator_out")
        with reachable():
            raw = await self._redis.hmget(self._keys.ledger, [*fields, "expired"])
        return Ledger(*(int(value or 0) for value in raw))


def refused_write(reply: list[Any]) -> NoReturn:
    """Raise what a money script's {'LEDGER', counter} or {'BROKEN', reason} means."""
    code, detail = reply[0].decode(), reply[1].decode()
    if code == "LEDGER":
        raise LedgerLimit(detail)
    raise StoreDataError(f"nothing written: {detail}")
