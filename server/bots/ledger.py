"""A player bot's own books: its bets, the payouts the rules owe it, and its balance.

Pure. The bot plays one table, where the store applies its money in a fixed order: the debits
of round r in the order they were acknowledged, then round r's credits when r settles (before
round r + 1 opens). So every balance the server reports is known in advance, whatever order
the messages arrive in (a settlement may come after the next round's first acknowledgements):

    bet_accepted (round r, k-th bet)  = origin - sum(D q - C q, q < r) - (first k debits of r)
    settlement (round r)               = origin - sum(D q - C q, q <= r)

A report whose credits are not known yet waits until they are. After a reconnect as the same
player (a token), bets in flight are unknown: balances are not judged again until a bet of a
round after all of those, whose balance then becomes the new origin.

With an operator's wallet (`wallet`) the wallet applies a round's credit when the server's
outbox gets it through, whenever that is, so no single report is known in advance: payouts
are judged as always, and the balance once at the end, when every settlement and `balance`
message has arrived: the first welcome's balance plus every settled round's credits less its
stakes (a debit cancelled moved nothing in the end).
"""

from __future__ import annotations

from collections import deque
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from typing import Any

from server.core.bets import Bet, Paytable, Spot, settle_bet
from server.core.coup import Coup

__all__ = ["Ledger", "RoundMoney"]

Message = Mapping[str, Any]
# What the bot's own stream said about a round: its coup, "voided", or None if it cannot tell.
OutcomeLookup = Callable[[int], Coup | str | None]


@dataclass(slots=True)
class RoundMoney:
    bets: dict[str, tuple[str, int]] = field(default_factory=dict)  # bet_id -> (spot, amount)
    debits: int = 0
    credit: int | None = None  # None until its settlement arrives
    settled_seen: bool = False  # the stream said the round ended (a settlement is due)
    carried: bool = False  # from before a reconnect: its payouts are judged, not its balance
    maybe: dict[str, tuple[str, int]] = field(default_factory=dict)  # in flight at a reconnect


@dataclass(slots=True)
class _Report:
    round: int
    debits_before: int | None  # an ack: this round's debits up to and including it
    balance: int


@dataclass(slots=True)
class _Sent:
    round: int
    spot: str
    amount: int


class Ledger:
    def __init__(
        self, table: str, paytable: Paytable, player: str, balance: int, wallet: bool = False
    ) -> None:
        self.table = table
        self.paytable = paytable
        self.player = player
        self.origin = balance  # the balance before every round still in `rounds`
        self.synced = True
        self.balance = balance  # the last balance the server reported
        self.rounds: dict[int, RoundMoney] = {}
        self.sent: dict[str, _Sent] = {}
        self.waiting: list[_Report] = []
        self.resync_after = -1  # while not synced: a bet of a later round becomes the origin
        self.payouts_checked = 0
        self.settlements = 0
        self.settled_rounds: deque[int] = deque(maxlen=64)  # to know a settlement sent again
        self.wallet = wallet
        self.start = balance  # with a wallet: the first welcome's, kept across reconnects
        self.net: dict[int, int] = {}  # with a wallet: round -> its credits less its stakes

    # --- what the bot does --------------------------------------------------------------
    def on_sent(self, bet_id: str, round_no: int, spot: str, amount: int) -> None:
        self.sent[bet_id] = _Sent(round_no, spot, amount)

    def on_rejected(self, bet_id: object) -> None:
        self.sent.pop(str(bet_id), None)

    def reconnected(self, player: str, balance: int) -> None:
        """A new welcome: a new guest starts new books; the same player (a token) keeps its
        bets for the payout checks but its balance is judged again only from a later round."""
        if player != self.player:
            self.__init__(self.table, self.paytable, player, balance, self.wallet)  # type: ignore[misc]
            return
        for bet_id, sent in self.sent.items():  # accepted or not: no answer will tell now
            money = self.rounds.setdefault(sent.round, RoundMoney())
            money.maybe[bet_id] = (sent.spot, sent.amount)
        for money in self.rounds.values():
            money.carried = True
        self.resync_after = max(self.rounds, default=-1)
        self.synced = False
        self.waiting.clear()
        self.sent.clear()
        self.balance = balance

    @property
    def outstanding(self) -> int:
        """Bets sent and not answered, plus rounds with accepted bets not yet settled."""
        return len(self.sent) + sum(1 for money in self.rounds.values() if money.credit is None)

    # --- what the server says -------------------------------------------------------------
    def on_accepted(self, message: Message) -> list[str]:
        bet_id = str(message.get("bet_id"))
        sent = self.sent.pop(bet_id, None)
        problems = []
        if sent is None:
            return [f"{self.table}: bet_accepted for a bet not sent or already answered: {bet_id}"]
        said = (message.get("round"), message.get("spot"), message.get("amount"))
        if said != (sent.round, sent.spot, sent.amount):
            problems.append(f"{self.table}: bet {bet_id} sent as {sent} accepted as {said}")
        money = self.rounds.setdefault(sent.round, RoundMoney(carried=not self.synced))
        money.bets[bet_id] = (sent.spot, sent.amount)
        money.debits += sent.amount
        balance = message.get("balance")
        if type(balance) is not int:
            return [*problems, f"{self.table}: bet_accepted balance {balance!r}"]
        self.balance = balance
        if not self.synced and sent.round > self.resync_after:
            self._resync(sent.round, balance + money.debits)
            # The new origin is the balance before this round's bets: the round is judged.
            money.carried = False
        if self.synced and not self.wallet:
            self.waiting.append(_Report(sent.round, money.debits, balance))
        return problems + self._judge()

    def on_settlement(self, message: Message, outcome_of: OutcomeLookup) -> list[str]:
        round_no = message.get("round")
        payouts = message.get("payouts")
        balance = message.get("balance")
        if type(round_no) is not int or not isinstance(payouts, list) or type(balance) is not int:
            return [f"{self.table}: malformed settlement {dict(message)!r}"]
        self.settlements += 1
        self.balance = balance
        money = self.rounds.get(round_no)
        credit = sum(p.get("credit", 0) for p in payouts if isinstance(p, dict))
        staked = sum(p.get("amount", 0) for p in payouts if isinstance(p, dict))
        self.net[round_no] = credit - staked
        if money is None:
            if not self.synced or round_no in self.settled_rounds:
                return []  # a resent settlement, or one of bets from before a reconnect
            return [f"{self.table}: round {round_no}: settlement without bets"]
        if money.credit is not None:
            if money.credit == credit:
                return []
            return [f"{self.table}: round {round_no}: a second settlement pays {credit}"]
        problems = self._check_payouts(round_no, money, payouts, outcome_of(round_no))
        money.credit = credit
        self.settled_rounds.append(round_no)
        if self.synced and not money.carried and not self.wallet:
            self.waiting.append(_Report(round_no, None, balance))
        return problems + self._judge()

    def on_round_ended(self, round_no: int) -> None:
        money = self.rounds.get(round_no)
        if money is not None:
            money.settled_seen = True

    def missing_settlements(self) -> list[int]:
        """Rounds the stream said ended, with bets of ours, and no settlement for them."""
        return [
            r
            for r, m in self.rounds.items()
            if m.settled_seen and m.credit is None and not m.carried
        ]

    def on_balance(self, balance: object) -> None:
        """The wallet acknowledged a credit or a cancel: the player's balance now."""
        if type(balance) is int:
            self.balance = balance

    def wallet_settled(self) -> bool:
        """With a wallet: the last balance is what the settlements add up to (the last
        `balance` message has come). Always True without one."""
        return not self.wallet or self.balance == self.start + sum(self.net.values())

    def wallet_problems(self) -> list[str]:
        """At the end, with a wallet: the balance if it is not what the settlements add to."""
        if self.wallet_settled():
            return []
        expected = self.start + sum(self.net.values())
        return [f"{self.table}: the wallet's balance is {self.balance}, the books say {expected}"]

    # --- checks ---------------------------------------------------------------------------
    def _check_payouts(
        self, round_no: int, money: RoundMoney, payouts: list[Any], outcome: Coup | str | None
    ) -> list[str]:
        problems = []
        got = {p.get("bet_id"): p for p in payouts if isinstance(p, dict)}
        if not set(money.bets) <= set(got) <= set(money.bets) | set(money.maybe):
            problems.append(f"round {round_no}: settlement pays {sorted(map(str, got))}")
        for bet_id, (spot, amount) in (money.maybe | money.bets).items():
            payout = got.get(bet_id)
            if payout is None:
                continue
            if outcome == "voided":
                expected = {"outcome": "push", "credit": amount}
            elif isinstance(outcome, Coup):
                bet = Bet(bet_id, self.player, Spot(spot), amount)
                due = settle_bet(self.paytable, bet, outcome)
                expected = {"outcome": due.outcome.value, "credit": due.credit}
            else:
                continue  # the round's cards were not all seen: the payout cannot be judged
            expected |= {"spot": spot, "amount": amount}
            said = {name: payout.get(name) for name in expected}
            if said != expected:
                problems.append(f"round {round_no}: bet {bet_id} paid {said}, due {expected}")
            self.payouts_checked += 1
        return [f"{self.table}: {p}" for p in problems]

    def _resync(self, round_no: int, balance_before: int) -> None:
        # Every round before this one is carried and already in the balance: the store
        # credits a round before the next one opens.
        self.synced = True
        self.origin = balance_before

    def _expected(self, report: _Report) -> int | None:
        """The balance this report must show, or None while a credit it includes is unknown."""
        net = 0
        for r, money in self.rounds.items():
            if money.carried:
                continue
            if r < report.round or (r == report.round and report.debits_before is None):
                if money.credit is None:
                    return None
                net += money.credit - money.debits
        if report.debits_before is not None:
            net -= report.debits_before
        return self.origin + net

    def _judge(self) -> list[str]:
        problems = []
        still = []
        for report in self.waiting:
            expected = self._expected(report)
            if expected is None:
                still.append(report)
            elif expected != report.balance:
                what = "settlement" if report.debits_before is None else "bet_accepted"
                problems.append(
                    f"{self.table}: round {report.round}: {what} balance {report.balance}, "
                    f"the books say {expected}"
                )
        self.waiting = still
        self._fold()
        return problems

    def _fold(self) -> None:
        """Settled rounds no report waits on move into the origin, so the books stay small."""
        first_waiting = min((r.round for r in self.waiting), default=None)
        pending = [s.round for s in self.sent.values()]
        for r in sorted(self.rounds):
            money = self.rounds[r]
            if money.carried:
                if money.credit is not None:
                    del self.rounds[r]
                continue
            if money.credit is None or (first_waiting is not None and r >= first_waiting):
                break
            if pending and r >= min(pending):
                break
            self.origin += money.credit - money.debits
            del self.rounds[r]
