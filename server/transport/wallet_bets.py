"""A bet with an operator's wallet (docs/wallet.md): the store checks it and holds its
debit, the wallet takes the stake, the store records it; and the wallet's balance at connect.

1. `Store.hold_debit` checks window, round, spot, bets this round and limits (never the
   balance: the wallet's) and writes the debit's hold, a "cancel unless recorded" entry of the
   outbox, in one atomic step. A bet_id recorded before returns its receipt: no second debit.
2. The wallet's `debit`, with the deterministic transaction id.
3. OK: `Store.record_debit` checks again and records the bet, dropping the hold, in one step;
   if the window closed meanwhile, the hold becomes a cancel and the bet is refused as late.
   A refusal: the hold is dropped (nothing was booked) and the wallet's status is the code.
   No answer (a timeout, a lost connection, anything but HTTP 200 signed with a known
   status): the hold becomes a cancel, due now, and the bet is WALLET_UNAVAILABLE.

If this node dies anywhere in between, the hold falls due and any node's outbox sender
cancels the debit (server/runtime/outbox.py). With an HTTP wallet a bet_id must not contain
`:` (BAD_BET_ID): the debit's id `d:{table}:{round}:{player}:{bet_id}` would then be one
that another player's bet could share (a player id may contain `:`).
"""

from __future__ import annotations

from dataclasses import dataclass

from server.core.bets import parse_spot
from server.core.errors import BetRejected, RejectCode
from server.store.base import BetReceipt, Store
from server.wallet.base import Debit, Wallet, WalletUnknown
from server.wire.messages import Bet

__all__ = ["HOLD_GRACE_MS", "WalletLink", "debit_and_record", "wallet_balance"]

# A debit's hold is cancelled this long after the wallet's timeout, if its node neither
# recorded nor released it by then (it died, or stalled): within 30 s of a node's death.
HOLD_GRACE_MS = 5_000


@dataclass(frozen=True, slots=True)
class WalletLink:
    """The operator's wallet of a node, and how long a debit's hold lasts."""

    wallet: Wallet
    hold_ms: int

    @classmethod
    def of(cls, wallet: Wallet, timeout_s: float) -> WalletLink:
        return cls(wallet, round(timeout_s * 1000) + HOLD_GRACE_MS)


async def debit_and_record(store: Store, link: WalletLink, player: str, bet: Bet) -> BetReceipt:
    """The bet's receipt, or BetRejected (see the module doc)."""
    if ":" in bet.bet_id:
        raise BetRejected(RejectCode.BAD_BET_ID, "with this site's wallet a bet_id has no ':'")
    receipt = await store.hold_debit(
        bet.table, player, bet.round, bet.bet_id, bet.spot, bet.amount, link.hold_ms
    )
    if receipt is not None:
        return receipt
    assert isinstance(bet.round, int) and isinstance(bet.amount, int)  # held: checked
    debit = Debit(bet.table, bet.round, player, bet.bet_id, parse_spot(bet.spot).value, bet.amount)
    try:
        answer = await link.wallet.debit(debit)
    except WalletUnknown:
        await store.release_debit(bet.table, player, bet.round, bet.bet_id, cancel=True)
        raise BetRejected(
            RejectCode.WALLET_UNAVAILABLE, "the wallet did not answer; the debit is cancelled"
        ) from None
    if not answer.ok or answer.balance is None:
        await store.release_debit(bet.table, player, bet.round, bet.bet_id, cancel=False)
        raise BetRejected(RejectCode(answer.status.value), "the wallet refused the debit")
    return await store.record_debit(
        bet.table, player, bet.round, bet.bet_id, bet.spot, bet.amount, answer.balance
    )


async def wallet_balance(link: WalletLink, player: str) -> int | None:
    """The player's balance for `welcome`; None when the wallet does not answer (the
    connection goes on: its first bet_accepted, settlement or balance message brings it)."""
    try:
        return (await link.wallet.balance(player)).balance
    except WalletUnknown:
        return None
