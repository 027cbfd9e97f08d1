"""Bets: the paytable, verify / can / do for placing, and settlement that conserves money."""

from __future__ import annotations

from fractions import Fraction

import pytest
from hypothesis import given
from hypothesis import strategies as st

from server.core.bets import (
    Bet,
    Outcome,
    Payout,
    Paytable,
    Spot,
    SpotLimit,
    TableLimits,
    can_place_bet,
    parse_spot,
    place_bet,
    settle_bet,
    settle_bets,
    verify_bet,
)
from server.core.cards import RANKS, Card, Suit, parse_card
from server.core.coup import Coup, Winner, resolve_coup
from server.core.errors import BetRejected, RejectCode


def coup(*codes: str) -> Coup:
    return resolve_coup([parse_card(code) for code in codes])


# Golden coups, cards in shoe order P1 B1 P2 B2 P3 B3.
PLAYER_WINS = coup("9h", "7c", "Kd", "Ks")  # 9 v 7, naturals stand
BANKER_WINS = coup("7h", "9c", "Kd", "Ks")  # 7 v 9
BANKER_WINS_ON_6 = coup("Kh", "Kc", "5d", "6s", "Qh")  # Player 5 draws 0; Banker 6 stands
TIE = coup("7h", "7c", "Kd", "Qs")  # 7 v 7
PLAYER_PAIR = coup("4h", "2c", "4d", "Ks")  # Player 4-4 = 8 natural
BANKER_PAIR_TIE = coup("8h", "4c", "Kd", "4s")  # 8 v 8 with a Banker pair

DEFAULT = Paytable()


def test_golden_coups_are_what_their_names_say() -> None:
    """The coups used below have the winners and pairs the tests rely on."""
    assert PLAYER_WINS.winner is Winner.PLAYER
    assert BANKER_WINS.winner is Winner.BANKER and BANKER_WINS.banker_total == 9
    assert BANKER_WINS_ON_6.winner is Winner.BANKER and BANKER_WINS_ON_6.banker_total == 6
    assert TIE.winner is Winner.TIE and not (TIE.player_pair or TIE.banker_pair)
    assert PLAYER_PAIR.player_pair and not PLAYER_PAIR.banker_pair
    assert BANKER_PAIR_TIE.banker_pair and BANKER_PAIR_TIE.winner is Winner.TIE


@pytest.mark.parametrize(
    ("spot", "result", "stake", "winnings"),
    [
        # Player 1:1
        (Spot.PLAYER, PLAYER_WINS, 100, 100),
        (Spot.PLAYER, BANKER_WINS, 100, None),
        (Spot.PLAYER, TIE, 100, 0),  # push on a Tie
        # Banker 0.95:1, winnings rounded down to a minor unit
        (Spot.BANKER, BANKER_WINS, 100, 95),
        (Spot.BANKER, BANKER_WINS, 150, 142),  # 142.5 -> 142
        (Spot.BANKER, BANKER_WINS, 101, 95),  # 95.95 -> 95
        (Spot.BANKER, BANKER_WINS_ON_6, 1000, 950),  # commission game: 6 is no different
        (Spot.BANKER, PLAYER_WINS, 100, None),
        (Spot.BANKER, TIE, 100, 0),  # push on a Tie
        # Tie 8:1
        (Spot.TIE, TIE, 100, 800),
        (Spot.TIE, BANKER_PAIR_TIE, 250, 2000),
        (Spot.TIE, PLAYER_WINS, 100, None),
        # Pairs 11:1 on the first two cards of their hand, whoever wins
        (Spot.PLAYER_PAIR, PLAYER_PAIR, 100, 1100),
        (Spot.PLAYER_PAIR, BANKER_PAIR_TIE, 100, None),
        (Spot.BANKER_PAIR, BANKER_PAIR_TIE, 300, 3300),
        (Spot.BANKER_PAIR, PLAYER_PAIR, 100, None),
        (Spot.PLAYER_PAIR, TIE, 100, None),  # a pair bet does not push on a Tie
    ],
)
def test_default_paytable(spot: Spot, result: Coup, stake: int, winnings: int | None) -> None:
    """The default paytable pays each spot as the reference sheet says."""
    assert DEFAULT.winnings(spot, stake, result) == winnings


@pytest.mark.parametrize(("tie_pays", "winnings"), [(8, 800), (9, 900)])
def test_tie_pays_8_or_9_to_1(tie_pays: int, winnings: int) -> None:
    """A Tie bet pays tie_pays to 1: 8:1 by default, 9:1 where configured."""
    assert Paytable(tie_pays=tie_pays).winnings(Spot.TIE, 100, TIE) == winnings


@pytest.mark.parametrize(
    ("result", "stake", "winnings"),
    [
        (BANKER_WINS, 100, 100),  # 1:1 without commission
        (BANKER_WINS_ON_6, 100, 50),  # half on a winning 6
        (BANKER_WINS_ON_6, 101, 50),  # 50.5 -> 50: rounded down
        (PLAYER_WINS, 100, None),
        (TIE, 100, 0),
    ],
)
def test_no_commission_banker(result: Coup, stake: int, winnings: int | None) -> None:
    """No-commission Banker pays 1:1, except 1:2 (floored) when it wins with 6."""
    table = Paytable(no_commission=True)
    assert table.winnings(Spot.BANKER, stake, result) == winnings
    assert table.winnings(Spot.PLAYER, stake, PLAYER_WINS) == stake


def test_commission_rate_is_configurable() -> None:
    """banker_commission_bp sets the commission in basis points (0 = even money)."""
    assert Paytable(banker_commission_bp=0).winnings(Spot.BANKER, 150, BANKER_WINS) == 150
    assert Paytable(banker_commission_bp=1000).winnings(Spot.BANKER, 155, BANKER_WINS) == 139


@pytest.mark.parametrize(
    ("spot", "result", "outcome", "credit"),
    [
        (Spot.BANKER, BANKER_WINS, Outcome.WIN, 150 + 142),
        (Spot.PLAYER, TIE, Outcome.PUSH, 150),
        (Spot.TIE, PLAYER_WINS, Outcome.LOSE, 0),
    ],
)
def test_settle_bet_credit_and_outcome(
    spot: Spot, result: Coup, outcome: Outcome, credit: int
) -> None:
    """settle_bet credits stake + winnings on a win, the stake on a push, nothing on a loss."""
    payout = settle_bet(DEFAULT, Bet("b1", "alice", spot, 150), result)
    assert payout == Payout("b1", "alice", spot, 150, outcome, credit)
    assert payout.to_dict() == {
        "bet_id": "b1",
        "spot": spot.value,
        "amount": 150,
        "outcome": outcome.value,
        "credit": credit,
    }


def test_tiny_banker_win_is_still_a_win() -> None:
    """A Banker win whose floored winnings are 0 is a WIN returning the stake, not a push."""
    payout = settle_bet(DEFAULT, Bet("b1", "alice", Spot.BANKER, 1), BANKER_WINS)
    assert (payout.outcome, payout.credit) == (Outcome.WIN, 1)
    half = settle_bet(
        Paytable(no_commission=True), Bet("b2", "bo", Spot.BANKER, 1), BANKER_WINS_ON_6
    )
    assert (half.outcome, half.credit) == (Outcome.WIN, 1)


def test_settle_bets_keeps_order() -> None:
    """settle_bets returns one payout per bet, in the order given."""
    bets = [Bet(f"b{i}", "p", spot, 100) for i, spot in enumerate(Spot)]
    payouts = settle_bets(DEFAULT, bets, TIE)
    assert [p.bet_id for p in payouts] == [b.bet_id for b in bets]


# --- verify / can / do -----------------------------------------------------------------------

LIMITS = TableLimits()


def reject_code(spot: Spot, amount: object, already: int = 0, balance: int = 10**9) -> RejectCode:
    """The code verify_bet raises, also checking can_place_bet and place_bet agree."""
    assert not can_place_bet(LIMITS, spot, amount, already, balance)
    with pytest.raises(BetRejected) as placed:
        place_bet(LIMITS, "b", "p", spot, amount, already, balance)  # type: ignore[arg-type]
    with pytest.raises(BetRejected) as verified:
        verify_bet(LIMITS, spot, amount, already, balance)
    assert placed.value.code is verified.value.code
    assert str(verified.value).startswith(verified.value.code.value)
    return verified.value.code


@pytest.mark.parametrize("amount", [0, -1, -100, 100.0, 150.5, True, False, "100", None, [100]])
def test_bad_amount(amount: object) -> None:
    """Amounts that are not a positive int (floats, bools, strings) are BAD_AMOUNT."""
    assert reject_code(Spot.PLAYER, amount) is RejectCode.BAD_AMOUNT


def test_bad_amount_is_checked_before_funds() -> None:
    """A bad amount is reported as BAD_AMOUNT even with no balance."""
    assert reject_code(Spot.PLAYER, -5, balance=0) is RejectCode.BAD_AMOUNT


@pytest.mark.parametrize(
    ("spot", "amount", "already"),
    [
        (Spot.PLAYER, 99, 0),  # below the minimum
        (Spot.TIE, 1, 0),
        (Spot.PLAYER, 500_001, 0),  # above the maximum
        (Spot.PLAYER, 100_001, 400_000),  # above the maximum with what is already there
        (Spot.TIE, 100, 49_950),
        (Spot.BANKER_PAIR, 25_100, 0),
    ],
)
def test_limit(spot: Spot, amount: int, already: int) -> None:
    """A stake outside the spot's min/max (counting what is already on it) is LIMIT."""
    assert reject_code(spot, amount, already) is RejectCode.LIMIT


@pytest.mark.parametrize(
    ("spot", "amount", "already"),
    [
        (Spot.PLAYER, 100, 0),  # exactly the minimum
        (Spot.PLAYER, 1, 100),  # tops up an existing stake above the minimum
        (Spot.PLAYER, 500_000, 0),  # exactly the maximum
        (Spot.PLAYER, 100_000, 400_000),
        (Spot.TIE, 50_000, 0),
    ],
)
def test_within_limits_is_accepted(spot: Spot, amount: int, already: int) -> None:
    """Stakes within the limits are accepted and place_bet returns the Bet record."""
    verify_bet(LIMITS, spot, amount, already, 10**9)
    assert can_place_bet(LIMITS, spot, amount, already, 10**9)
    assert place_bet(LIMITS, "b9", "alice", spot, amount, already, 10**9) == Bet(
        "b9", "alice", spot, amount
    )


def test_insufficient_funds() -> None:
    """A stake above the balance is INSUFFICIENT_FUNDS; exactly the balance is fine."""
    assert reject_code(Spot.BANKER, 1000, balance=999) is RejectCode.INSUFFICIENT_FUNDS
    assert can_place_bet(LIMITS, Spot.BANKER, 1000, 0, 1000)


def test_limit_is_checked_before_funds() -> None:
    """A stake over the maximum is LIMIT even if the balance is also too small."""
    assert reject_code(Spot.PLAYER, 600_000, balance=0) is RejectCode.LIMIT


@pytest.mark.parametrize("name", ["dragon", "PLAYER", "", None, 3, "tie "])
def test_parse_spot_unknown(name: object) -> None:
    """parse_spot rejects anything but a spot's exact name with UNKNOWN_SPOT, listing spots."""
    with pytest.raises(BetRejected) as rejected:
        parse_spot(name)
    assert rejected.value.code is RejectCode.UNKNOWN_SPOT
    assert "player_pair" in rejected.value.message


@pytest.mark.parametrize("spot", list(Spot))
def test_parse_spot_known(spot: Spot) -> None:
    """parse_spot returns the Spot for each spot's wire name."""
    assert parse_spot(spot.value) is spot


def test_spot_not_offered_at_table_is_unknown_spot() -> None:
    """A spot missing from the table's limits is refused with UNKNOWN_SPOT."""
    limits = TableLimits({Spot.PLAYER: SpotLimit(1, 10), Spot.BANKER: SpotLimit(1, 10)})
    with pytest.raises(BetRejected) as rejected:
        verify_bet(limits, Spot.TIE, 5, 0, 100)
    assert rejected.value.code is RejectCode.UNKNOWN_SPOT
    assert can_place_bet(limits, Spot.PLAYER, 5, 0, 100)


# --- settlement conserves money --------------------------------------------------------------


def expected_credit(table: Paytable, bet: Bet, result: Coup) -> int:
    """What the bet should return, computed from the rules with exact fractions."""
    winner = result.winner
    if bet.spot in (Spot.PLAYER, Spot.BANKER):
        if winner is Winner.TIE:
            return bet.amount
        if winner.value != bet.spot.value:
            return 0
        if bet.spot is Spot.PLAYER:
            odds = Fraction(1)
        elif table.no_commission:
            odds = Fraction(1, 2) if result.banker_total == 6 else Fraction(1)
        else:
            odds = 1 - Fraction(table.banker_commission_bp, 10_000)
        return bet.amount + int(bet.amount * odds)  # int() floors a non-negative Fraction
    if bet.spot is Spot.TIE:
        return bet.amount * (1 + table.tie_pays) if winner is Winner.TIE else 0
    pair = result.player_pair if bet.spot is Spot.PLAYER_PAIR else result.banker_pair
    return bet.amount * (1 + table.pair_pays) if pair else 0


card_st = st.builds(Card, st.sampled_from(RANKS), st.sampled_from(list(Suit)))
coup_st = st.lists(card_st, min_size=6, max_size=6).map(resolve_coup)
paytable_st = st.builds(
    Paytable,
    banker_commission_bp=st.integers(0, 10_000),
    no_commission=st.booleans(),
    tie_pays=st.sampled_from([8, 9]),
    pair_pays=st.sampled_from([11, 5, 25]),
)
bets_st = st.lists(
    st.builds(
        Bet,
        bet_id=st.uuids().map(str),
        player=st.sampled_from(["alice", "bob", "carol"]),
        spot=st.sampled_from(list(Spot)),
        amount=st.integers(1, 10**9),
    ),
    max_size=20,
)


@given(paytable_st, coup_st, bets_st)
def test_settlement_conserves_money(table: Paytable, result: Coup, bets: list[Bet]) -> None:
    """Every credit is 0, the stake or stake+winnings, and credits + house take == stakes."""
    payouts = settle_bets(table, bets, result)
    house_take = 0  # what the house keeps, from the rules: lost stakes less winnings paid
    for bet, payout in zip(bets, payouts, strict=True):
        winnings = table.winnings(bet.spot, bet.amount, result)
        assert type(payout.credit) is int and type(payout.amount) is int
        assert payout.credit == expected_credit(table, bet, result)
        if winnings is None:
            assert payout.credit == 0
        else:
            assert type(winnings) is int and winnings >= 0
            assert payout.credit == bet.amount + winnings
        assert (payout.bet_id, payout.player, payout.spot, payout.amount) == (
            bet.bet_id,
            bet.player,
            bet.spot,
            bet.amount,
        )
        push = bet.spot in (Spot.PLAYER, Spot.BANKER) and result.winner is Winner.TIE
        assert (payout.outcome is Outcome.PUSH) == push  # a push is decided by rule, not amount
        if payout.outcome is Outcome.LOSE:
            assert payout.credit == 0
            house_take += bet.amount
        elif payout.outcome is Outcome.PUSH:
            assert payout.credit == bet.amount
        else:
            assert payout.credit >= bet.amount  # commission can floor tiny winnings to 0
            house_take -= payout.credit - bet.amount
    assert sum(p.credit for p in payouts) + house_take == sum(b.amount for b in bets)
