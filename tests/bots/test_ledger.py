"""A player bot's books: payouts by the rules, balances in the store's order, reconnects."""

from __future__ import annotations

from typing import Any

from server.bots.ledger import Ledger
from server.core.bets import Paytable
from server.core.cards import parse_card
from server.core.coup import Coup, resolve_coup
from tests.bots.streams import BANKER_WINS, TIE

START = 1_000_000


def coup(cards: str) -> Coup:
    return resolve_coup([parse_card(word) for word in cards.split()])


class Books:
    """A ledger and the messages a correct server would send it."""

    def __init__(self, player: str = "p1") -> None:
        self.ledger = Ledger("t1", Paytable(), player, START)
        self.balance = START
        self.outcomes: dict[int, Coup | str] = {}

    def bet(self, round_no: int, bet_id: str, spot: str, amount: int) -> dict[str, Any]:
        self.ledger.on_sent(bet_id, round_no, spot, amount)
        self.balance -= amount
        return {
            "type": "bet_accepted",
            "table": "t1",
            "round": round_no,
            "bet_id": bet_id,
            "spot": spot,
            "amount": amount,
            "balance": self.balance,
        }

    def settle(self, round_no: int, payouts: list[dict[str, Any]]) -> dict[str, Any]:
        self.balance += sum(p["credit"] for p in payouts)
        return {
            "type": "settlement",
            "table": "t1",
            "round": round_no,
            "payouts": payouts,
            "balance": self.balance,
        }

    def accept(self, message: dict[str, Any]) -> list[str]:
        return self.ledger.on_accepted(message)

    def settled(self, message: dict[str, Any]) -> list[str]:
        return self.ledger.on_settlement(message, self.outcomes.get)


def pay(bet_id: str, spot: str, amount: int, outcome: str, credit: int) -> dict[str, Any]:
    return {"bet_id": bet_id, "spot": spot, "amount": amount, "outcome": outcome, "credit": credit}


def test_correct_payouts_and_balances_pass() -> None:
    """Banker 1000 wins 950 less nothing more; a lost tie pays 0; balances follow."""
    books = Books()
    books.outcomes[1] = coup(BANKER_WINS)
    assert books.accept(books.bet(1, "a", "banker", 1000)) == []
    assert books.accept(books.bet(1, "b", "tie", 100)) == []
    payouts = [pay("a", "banker", 1000, "win", 1950), pay("b", "tie", 100, "lose", 0)]
    assert books.settled(books.settle(1, payouts)) == []
    assert books.ledger.payouts_checked == 2
    assert books.ledger.outstanding == 0
    assert books.ledger.rounds == {}  # folded into the origin


def test_a_wrong_payout_is_a_mismatch() -> None:
    """Paying a winning Banker bet without commission is caught, and so is its balance."""
    books = Books()
    books.outcomes[1] = coup(BANKER_WINS)
    books.accept(books.bet(1, "a", "banker", 1000))
    problems = books.settled(books.settle(1, [pay("a", "banker", 1000, "win", 2000)]))
    assert any("paid" in p and "due" in p for p in problems)


def test_a_tie_pushes_player_and_banker() -> None:
    """On a Tie, Player and Banker bets come back as a push; a tie bet wins 8:1."""
    books = Books()
    books.outcomes[2] = coup(TIE)
    books.accept(books.bet(2, "a", "player", 500))
    books.accept(books.bet(2, "b", "tie", 100))
    payouts = [pay("a", "player", 500, "push", 500), pay("b", "tie", 100, "win", 900)]
    assert books.settled(books.settle(2, payouts)) == []


def test_a_voided_round_refunds() -> None:
    """A voided round owes every stake back as a push."""
    books = Books()
    books.outcomes[3] = "voided"
    books.accept(books.bet(3, "a", "player", 500))
    assert books.settled(books.settle(3, [pay("a", "player", 500, "push", 500)])) == []
    books = Books()
    books.outcomes[3] = "voided"
    books.accept(books.bet(3, "a", "player", 500))
    assert books.settled(books.settle(3, [pay("a", "player", 500, "lose", 0)]))


def test_settlement_after_the_next_rounds_bets() -> None:
    """A settlement that arrives after the next round's acks is still judged right."""
    books = Books()
    books.outcomes[1] = coup(BANKER_WINS)
    books.outcomes[2] = coup(TIE)
    books.accept(books.bet(1, "a", "banker", 1000))
    settle_1 = books.settle(1, [pay("a", "banker", 1000, "win", 1950)])
    ack_2 = books.bet(2, "b", "tie", 100)  # the store credited round 1 before this bet
    assert books.accept(ack_2) == []  # its balance cannot be judged yet: it waits
    assert books.ledger.waiting
    assert books.settled(settle_1) == []
    assert not books.ledger.waiting
    assert books.settled(books.settle(2, [pay("b", "tie", 100, "win", 900)])) == []


def test_a_wrong_balance_is_a_mismatch() -> None:
    """An ack whose balance is not what the books say is caught."""
    books = Books()
    message = books.bet(1, "a", "banker", 1000)
    message["balance"] += 1
    assert any("the books say" in p for p in books.accept(message))


def test_acks_must_match_what_was_sent() -> None:
    """An ack for a bet never sent, or for another amount, is a mismatch."""
    books = Books()
    message = books.bet(1, "a", "banker", 1000)
    message["amount"] = 900
    assert any("accepted as" in p for p in books.accept(message))
    assert any("not sent" in p for p in books.accept({**message, "bet_id": "zzz"}))


def test_missing_and_unexpected_settlements() -> None:
    """A round that ended with our bets and no settlement is listed; one without bets is wrong."""
    books = Books()
    books.accept(books.bet(1, "a", "banker", 1000))
    books.ledger.on_round_ended(1)
    assert books.ledger.missing_settlements() == [1]
    assert books.settled(books.settle(7, [pay("x", "tie", 100, "lose", 0)]))


def test_reconnect_as_a_new_guest_starts_new_books() -> None:
    """Without a token a reconnect is a new player: old bets are forgotten."""
    books = Books()
    books.accept(books.bet(1, "a", "banker", 1000))
    books.ledger.reconnected("p2", START)
    assert books.ledger.player == "p2" and books.ledger.rounds == {}
    assert books.ledger.outstanding == 0


def test_reconnect_as_the_same_player_resyncs_on_a_later_round() -> None:
    """With a token: bets in flight are judged by payout; balances again from a later round."""
    books = Books()
    books.outcomes[1] = coup(BANKER_WINS)
    books.accept(books.bet(1, "a", "banker", 1000))
    books.ledger.on_sent("b", 1, "tie", 100)  # its answer is lost with the connection
    books.ledger.reconnected("p1", START - 1100)
    assert not books.ledger.synced
    books.balance -= 100  # it was accepted after all
    payouts = [pay("a", "banker", 1000, "win", 1950), pay("b", "tie", 100, "lose", 0)]
    assert books.settled(books.settle(1, payouts)) == []  # payouts judged, balance not
    assert books.accept(books.bet(2, "c", "player", 200)) == []
    assert books.ledger.synced
    books.outcomes[2] = coup(TIE)
    assert books.settled(books.settle(2, [pay("c", "player", 200, "push", 200)])) == []
    wrong = books.bet(3, "d", "player", 200)
    wrong["balance"] -= 5
    assert books.accept(wrong)
