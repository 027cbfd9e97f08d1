"""The Redis engine's bet path, beside RedisStore.place_bet: the batcher that groups a loop
turn's bets on one table into one place_bet script call, the arguments a bet is sent as, and
the BetRejected a script's refusal stands for."""

from __future__ import annotations

import asyncio
from collections.abc import Awaitable, Callable
from typing import Any, NoReturn

from redis.exceptions import RedisError

from server.core.bets import Spot, SpotLimit, TableLimits, parse_spot, verify_bet
from server.core.errors import BetRejected, RejectCode
from server.store.base import StoreDataError, too_many_bets
from server.store.redis_replies import unknown_table

__all__ = ["BET_BATCH_MAX", "BetBatches", "bet_args", "refuse", "round_arg"]

BET_BATCH_MAX = 64  # bets one place_bet script takes: Redis runs nothing else meanwhile

# One bet waiting in a batch: its keys, its arguments, and its caller's future.
_Queued = tuple[list[str], list[str], "asyncio.Future[Any]"]


class BetBatches:
    """Gathers the bets placed on each table within one turn of the event loop into one
    place_bet script call (at most BET_BATCH_MAX bets each).

    One script call per bet cost Redis the call's own overhead and a read of the table's
    state, the clock and the spot's limits for every bet, and the node redis-py's per-command
    work; a batch pays them once. Each caller still gets its own reply: the script judges
    every bet on its own, so a bet it cannot place (a damaged key: StoreDataError) leaves the
    others' answers alone. Only a call that fails as a whole (Redis unreachable) fails every
    bet in it (place_bet is idempotent by bet_id, so a caller may retry)."""

    def __init__(self, submit: Callable[[str, list[str], list[str]], Awaitable[Any]]) -> None:
        self._submit = submit  # queues the batch's script call at once; awaited for its reply
        self._queued: dict[str, list[_Queued]] = {}
        self._tasks: set[asyncio.Task[None]] = set()

    async def place(self, table_id: str, keys: list[str], args: list[str]) -> Any:
        loop = asyncio.get_running_loop()
        future: asyncio.Future[Any] = loop.create_future()
        queued = self._queued.get(table_id)
        if queued is None:
            queued = self._queued[table_id] = []
            loop.call_soon(self._flush, table_id)
        queued.append((keys, args, future))
        return await future

    def _flush(self, table_id: str) -> None:
        queued = self._queued.pop(table_id)
        for first in range(0, len(queued), BET_BATCH_MAX):
            batch = queued[first : first + BET_BATCH_MAX]
            keys = [key for bet_keys, _, _ in batch for key in bet_keys]
            args = [arg for _, bet_args, _ in batch for arg in bet_args]
            # Submitted now, so the batch joins the pipeline of this turn's other calls.
            task = asyncio.create_task(self._answer(self._submit(table_id, keys, args), batch))
            self._tasks.add(task)
            task.add_done_callback(self._tasks.discard)

    @staticmethod
    async def _answer(sent: Awaitable[Any], batch: list[_Queued]) -> None:
        try:
            replies = await sent
            if not isinstance(replies, list) or len(replies) != len(batch):
                raise RedisError(f"place_bet answered {replies!r} to {len(batch)} bets")
        except BaseException as error:  # every caller hears it; a cancel ends the batch too
            for _, _, future in batch:
                if not future.done():
                    future.set_exception(error)
            if not isinstance(error, Exception):
                raise
            return
        for (_, _, future), reply in zip(batch, replies, strict=True):
            if not future.done():  # else its caller was cancelled: the reply is dropped
                future.set_result(reply)

    async def close(self) -> None:
        for task in list(self._tasks):
            task.cancel()
        await asyncio.gather(*self._tasks, return_exceptions=True)


def round_arg(round_no: object) -> str:
    """The round as the script compares it: an int's digits, else '' (never equal).

    Mirrors verify_bet_window, which takes only a true int: 2.0 and True are WRONG_ROUND.
    """
    return str(round_no) if type(round_no) is int else ""


def bet_args(player: str, round_no: object, bet_id: str, spot: object, amount: object) -> list[str]:
    """A bet's five arguments of place_bet.lua: a spot or an amount the core would refuse is
    sent as '' and refused by the script after its window checks, in the core's order."""
    try:
        spot_: Spot | None = parse_spot(spot)
    except BetRejected:
        spot_ = None
    amount_arg = str(amount) if type(amount) is int and amount > 0 else ""
    return [player, bet_id, round_arg(round_no), spot_.value if spot_ else "", amount_arg]


def refuse(
    table_id: str, reply: list[Any], round_no: object, spot: object, amount: object
) -> NoReturn:
    """Raise the BetRejected the memory engine would, from the script's refusal."""
    code = reply[0].decode()
    if code == "BROKEN":
        raise StoreDataError(f"bet not placed, nothing written: {reply[1].decode()}")
    if code == "UNKNOWN_TABLE":
        raise unknown_table(table_id)
    if code == "CLOSED":
        raise BetRejected(RejectCode.BETTING_CLOSED, "betting is closed for this round")
    if code == "ROUND":
        current = int(reply[1])
        raise BetRejected(RejectCode.WRONG_ROUND, f"round {round_no!r} is not open; {current} is")
    spot_ = parse_spot(spot)  # raises UNKNOWN_SPOT for code SPOT
    if code == "TOO_MANY":
        raise too_many_bets(int(reply[1]))
    # MONEY: the core names the rule that failed, from the values the script saw.
    low, high, on_spot, balance = reply[1:5]
    spots = {spot_: SpotLimit(int(low), int(high))} if low else {}
    verify_bet(TableLimits(spots), spot_, amount, int(on_spot), int(balance))
    raise AssertionError(f"place_bet script refused ({code}) a bet the core accepts")
