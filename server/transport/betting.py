"""A player's bet: placed in the store, answered, and its bettor registered for settlement.

With the internal wallet (the default) the store checks, debits and records it in one atomic
step (place_bet); with an operator's wallet the store holds the debit, the wallet takes it and
the store records the bet (server/transport/wallet_bets.py).

The answer comes first (`bet_accepted` or `bet_rejected`): the bet stands whatever happens
after. Then the session is registered with settlement delivery as a bettor of the round
(server/transport/settlements.py), so it gets the round's settlement even if it leaves the
table before the round settles.
"""

from __future__ import annotations

from server.core.errors import BetRejected, RejectCode
from server.store.base import StoreUnavailable
from server.transport.context import SessionContext
from server.transport.settlements import Recipient
from server.transport.wallet_bets import debit_and_record
from server.wire import shapes
from server.wire.messages import Bet, ErrorReply

__all__ = ["place", "reject"]


async def place(sub: Recipient, ctx: SessionContext, player: str, bet: Bet) -> None:
    """Place `player`'s bet, answer it on `sub`'s port, and register `sub` as its bettor."""
    try:
        ctx.known_table(bet.table)
        if ctx.wallet is None:
            receipt = await ctx.store.place_bet(
                bet.table, player, bet.round, bet.bet_id, bet.spot, bet.amount
            )
        else:
            receipt = await debit_and_record(ctx.store, ctx.wallet, player, bet)
    except ErrorReply as error:
        reject(sub, ctx, bet, RejectCode.UNKNOWN_TABLE, error.message)
        return
    except BetRejected as rejected:
        reject(sub, ctx, bet, rejected.code, rejected.message)
        return
    except StoreUnavailable:
        ctx.metrics.store_error("session")
        reject(sub, ctx, bet, RejectCode.UNAVAILABLE, "storage is unavailable; retry later")
        return
    # First: the bet stands whatever happens below.
    sub.port.send(
        shapes.bet_accepted(
            receipt.table,
            receipt.round,
            receipt.bet_id,
            receipt.spot,
            receipt.amount,
            receipt.balance,
        )
    )
    ctx.metrics.bet_answered("ACCEPTED")
    await ctx.hub.settlements.bet_placed(sub, bet.table, receipt.round)


def reject(sub: Recipient, ctx: SessionContext, bet: Bet, code: RejectCode, message: str) -> None:
    ctx.metrics.bet_answered(code.value)
    sub.port.send(shapes.bet_rejected(bet.bet_id, bet.table, code.value, message))
