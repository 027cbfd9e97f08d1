"""The Redis engine's wallet outbox (server/store/outbox.py): the bets of an HTTP wallet
(hold_debit and record_debit, the place_bet script in its `hold` and `record` modes, batched
as place_bet is) and the outbox's senders' calls (the outbox_*.lua scripts).

Keys (redis_keys.KeyLayout): `<prefix>:outbox:e:<key>` a hash per entry (body, state,
created, attempts, owner), `<prefix>:outbox:due` the entries by next attempt (a hold by its
time, a claimed entry by its claim's end), `...:age` the queued ones by creation, and
`...:parked` the parked ones by creation.
"""

from __future__ import annotations

from collections.abc import Awaitable
from typing import Any

import msgpack

from server.store.base import BetReceipt, StoreDataError, debit_in_outbox, debit_taken
from server.store.codec import packb, unpackb
from server.store.outbox import EntryState, OutboxEntry, OutboxStats, body_of, entry_of
from server.store.redis_base import RedisBase
from server.store.redis_bets import BetBatches, bet_args, refuse
from server.store.redis_client import reachable
from server.store.redis_replies import as_bytes
from server.wallet.protocol import debit_id

__all__ = ["RedisOutbox"]


class RedisOutbox(RedisBase):
    outbox = False  # an HTTP wallet: set by RedisStore
    _holds: BetBatches
    _records: BetBatches

    def _bet_args(self, table_id: str, prefix: str) -> list[object]:
        raise NotImplementedError  # RedisStore's: place_bet's first arguments

    def _start_outbox(self, outbox: bool) -> None:
        self.outbox = outbox
        self._holds = BetBatches(lambda t, k, a: self._submit_place_bet("hold", t, k, a))
        self._records = BetBatches(lambda t, k, a: self._submit_place_bet("record", t, k, a))

    def _submit_place_bet(
        self, mode: str, table_id: str, keys: list[str], args: list[str]
    ) -> Awaitable[Any]:
        """One place_bet script for a batch of one table's bets: `mode` '' (the internal
        wallet), 'hold' or 'record' (an operator's wallet, with the outbox's prefix)."""
        table = self._table_keys(table_id)
        return self._submit_script(
            "place_bet",
            [table.state, table.rounds, self._keys.ledger, *self._keys.guests, *keys],
            [*self._bet_args(table_id, table.prefix), mode, self._keys.outbox if mode else "",
             *args],
        )  # fmt: skip

    async def _wallet_bet(
        self,
        batches: BetBatches,
        table_id: str,
        player: str,
        bet: tuple[object, str, object, object],
        extra: int,
    ) -> list[Any]:
        round_no, bet_id, spot, amount = bet
        # The debit's key names its round: the round the bet claims (checked by the script).
        debit = debit_id(table_id, round_no if type(round_no) is int else -1, player, bet_id)
        key = self._player_key
        args = bet_args(player, round_no, bet_id, spot, amount)
        reply: list[Any] = await batches.place(
            table_id,
            [key(player, "wallet"), key(player, "in_play"), key(player, "audit")],
            [*args, f"cancel:{debit}", str(extra)],
        )
        code = reply[0]
        if code == b"IN_OUTBOX":
            raise debit_in_outbox(EntryState(reply[1].decode()))
        if code == b"GONE":
            raise debit_taken()
        if code not in (b"OK", b"HELD"):
            refuse(table_id, reply, round_no, spot, amount)
        return reply

    async def hold_debit(
        self,
        table_id: str,
        player: str,
        round_no: object,
        bet_id: str,
        spot: object,
        amount: object,
        hold_ms: int,
    ) -> BetReceipt | None:
        bet = (round_no, bet_id, spot, amount)
        reply = await self._wallet_bet(self._holds, table_id, player, bet, hold_ms)
        return BetReceipt(*unpackb(reply[1])) if reply[0] == b"OK" else None

    async def record_debit(
        self,
        table_id: str,
        player: str,
        round_no: object,
        bet_id: str,
        spot: object,
        amount: object,
        balance: int,
    ) -> BetReceipt:
        bet = (round_no, bet_id, spot, amount)
        reply = await self._wallet_bet(self._records, table_id, player, bet, balance)
        return BetReceipt(*unpackb(reply[1]))

    async def release_debit(
        self, table_id: str, player: str, round_no: int, bet_id: str, cancel: bool
    ) -> None:
        key = f"cancel:{debit_id(table_id, round_no, player, bet_id)}"
        due, age, _ = self._keys.outbox_sets
        keys = [due, age, self._keys.outbox + "e:" + key]
        self._checked(await self._run("outbox_release", keys, [key, "1" if cancel else "0"]))

    @staticmethod
    def _checked(reply: list[Any]) -> list[Any]:
        if reply and reply[0] == b"BROKEN":
            raise StoreDataError(f"outbox not written, nothing was: {reply[1].decode()}")
        return reply

    # --- the senders ------------------------------------------------------------------------
    async def claim_outbox(self, owner: str, limit: int, claim_ms: int) -> list[OutboxEntry]:
        due, age, _ = self._keys.outbox_sets
        reply = await self._run(
            "outbox_claim", [due, age], [self._keys.outbox + "e:", owner, claim_ms, limit]
        )
        self._checked(reply)
        return [
            entry_of(unpackb(body), "queued", int(created), int(attempts or 0))
            for _, body, created, attempts in reply
        ]

    async def outbox_done(self, entry: OutboxEntry, balance: int) -> bool:
        keys = [*self._keys.outbox_sets, self._entry_key(entry)]
        keys.append(self._player_key(entry.player, "wallet"))
        args = [entry.key, balance, self._keys.settled, entry.player, entry.table, entry.round]
        args.append("1" if entry.settled else "0")
        return bool(self._checked(await self._run("outbox_done", keys, args))[0] == b"OK")

    async def wallet_balance(self, player: str) -> int | None:
        raw = await self._call("GET", self._player_key(player, "wallet"))
        return int(raw) if raw is not None else None

    async def outbox_retry(
        self, entry: OutboxEntry, owner: str, delay_ms: int, park_after_ms: int
    ) -> EntryState | None:
        keys = [*self._keys.outbox_sets, self._entry_key(entry)]
        args = [entry.key, owner, delay_ms, park_after_ms]
        code = self._checked(await self._run("outbox_retry", keys, args))[0]
        return None if code == b"GONE" else EntryState(code.decode().lower())

    def _entry_key(self, entry: OutboxEntry) -> str:
        return f"{self._keys.outbox}e:{entry.key}"

    async def outbox_entries(self) -> list[OutboxEntry]:
        due, _, parked = self._keys.outbox_sets
        with reachable():
            keys = [as_bytes(k).decode() for k in await self._redis.zrange(due, 0, -1)]
            keys += [as_bytes(k).decode() for k in await self._redis.zrange(parked, 0, -1)]
            pipe = self._redis.pipeline(transaction=False)
            for key in keys:
                pipe.hmget(f"{self._keys.outbox}e:{key}", "body", "state", "created", "attempts")
            rows = await pipe.execute()
        entries = [
            entry_of(unpackb(body), state.decode(), int(created), int(attempts or 0))
            for body, state, created, attempts in rows
            if body is not None
        ]
        return sorted(entries, key=lambda entry: entry.created_ms)

    async def outbox_stats(self) -> OutboxStats:
        _, age, parked = self._keys.outbox_sets
        with reachable():
            pipe = self._redis.pipeline(transaction=False)
            pipe.zcard(age)
            pipe.zcard(parked)
            pipe.zrange(age, 0, 0, withscores=True)
            pipe.zrange(parked, 0, 0, withscores=True)
            queued, parked_n, first, first_parked = await pipe.execute()
        oldest = [int(score) for _, score in (*first, *first_parked)]
        return OutboxStats(int(queued) + int(parked_n), min(oldest, default=None), int(parked_n))


def owed_arg(owed: dict[str, list[OutboxEntry]]) -> bytes:
    """What a paying commit owes the wallet, as commit.lua reads it: each body's bytes packed
    as msgpack's raw strings (Redis's cmsgpack does not read the bin type)."""
    owed_map = {p: [[e.key, packb(body_of(e))] for e in entries] for p, entries in owed.items()}
    data = msgpack.packb(owed_map, use_bin_type=False)
    assert isinstance(data, bytes)
    return data
