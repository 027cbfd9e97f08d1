"""The core's small error tree: user outcomes carry a code, bugs are assertions."""

from __future__ import annotations

from enum import StrEnum

__all__ = ["BetRejected", "CardError", "NotEnoughCards", "RejectCode"]


class RejectCode(StrEnum):
    """Why a bet was refused; sent to the client verbatim."""

    BETTING_CLOSED = "BETTING_CLOSED"
    WRONG_ROUND = "WRONG_ROUND"
    INSUFFICIENT_FUNDS = "INSUFFICIENT_FUNDS"
    LIMIT = "LIMIT"
    UNKNOWN_SPOT = "UNKNOWN_SPOT"
    BAD_AMOUNT = "BAD_AMOUNT"
    UNKNOWN_TABLE = "UNKNOWN_TABLE"
    UNAVAILABLE = "UNAVAILABLE"
    RATE_LIMITED = "RATE_LIMITED"  # over the connection's bet rate (transport)
    NOT_A_PLAYER = "NOT_A_PLAYER"  # a spectator or operator connection: no wallet, no bets
    TOO_MANY_BETS = "TOO_MANY_BETS"  # the player's bets this round reached --max-bets-per-round
    # The operator's wallet (docs/wallet.md): its refusals of a debit, verbatim, ...
    PLAYER_BLOCKED = "PLAYER_BLOCKED"
    LIMIT_EXCEEDED = "LIMIT_EXCEEDED"
    CANCELLED = "CANCELLED"  # this bet's debit was cancelled before: use another bet_id
    # ... a debit whose outcome is unknown (cancelled), or no wallet to answer
    WALLET_UNAVAILABLE = "WALLET_UNAVAILABLE"
    BAD_BET_ID = "BAD_BET_ID"  # with an operator's wallet a bet_id must not contain ':'


class BetRejected(Exception):
    """A bet the rules refuse: data for the client, not a failure of the server."""

    def __init__(self, code: RejectCode, message: str) -> None:
        super().__init__(f"{code}: {message}")
        self.code = code
        self.message = message


class CardError(ValueError):
    """Text that does not name a card."""


class NotEnoughCards(ValueError):
    """A coup needs more cards than were given."""
