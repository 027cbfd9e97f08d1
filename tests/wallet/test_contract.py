"""The wallet contract, held over both engines: the internal wallet (over the memory and the
Redis store) and the HTTP wallet (the reference wallet over real HTTP on loopback).

Every player starts with START; each test names its own players, so engines never share them.
"""

from __future__ import annotations

import pytest

from server.wallet.base import Answer, Cancel, Credit, Debit, Unknown, WalletUnknown
from server.wallet.protocol import Status
from tests.wallet.conftest import START, Engine

TABLE = "t1"


def debit(player: str, bet_id: str, amount: int, round_no: int = 7) -> Debit:
    return Debit(TABLE, round_no, player, bet_id, "banker", amount)


async def test_the_engines_say_who_moves_the_bets_money(engine: Engine) -> None:
    """The internal wallet's bets are moved by the store; the HTTP wallet's by its calls."""
    assert engine.wallet.in_store is (engine.name != "http")
    assert engine.wallet.currency == "EUR"


async def test_balance_of_a_funded_player(engine: Engine) -> None:
    await engine.fund("ann")
    assert await engine.wallet.balance("ann") == Answer(Status.OK, START)


async def test_a_debit_takes_the_stake_and_says_the_balance_after(engine: Engine) -> None:
    await engine.fund("bea")
    answer = await engine.wallet.debit(debit("bea", "b1", 300))
    assert answer == Answer(Status.OK, START - 300) and answer.ok
    assert (await engine.wallet.balance("bea")).balance == START - 300


async def test_a_repeated_debit_gets_its_first_answer_and_moves_nothing(engine: Engine) -> None:
    """Same id again, even after other money moved: the first answer, the stake taken once."""
    await engine.fund("cid")
    first = await engine.wallet.debit(debit("cid", "b1", 300))
    await engine.wallet.debit(debit("cid", "b2", 200))
    again = await engine.wallet.debit(debit("cid", "b1", 300))
    assert again == first == Answer(Status.OK, START - 300)
    assert (await engine.wallet.balance("cid")).balance == START - 500


async def test_a_debit_beyond_the_balance_is_refused_and_moves_nothing(engine: Engine) -> None:
    await engine.fund("dan")
    refused = await engine.wallet.debit(debit("dan", "b1", START + 1))
    assert refused == Answer(Status.INSUFFICIENT_FUNDS, START) and not refused.ok
    assert await engine.wallet.debit(debit("dan", "b1", START + 1)) == refused
    assert (await engine.wallet.balance("dan")).balance == START
    # A refused debit took nothing: its cancel is OK and gives nothing back.
    cancelled = await engine.wallet.cancel(debit("dan", "b1", START + 1).cancel())
    assert cancelled == Answer(Status.OK, START)


async def test_cancel_of_a_never_booked_debit_is_ok_and_refuses_it_later(engine: Engine) -> None:
    """A cancel that overtook its debit: OK, nothing moves; the debit then comes CANCELLED."""
    await engine.fund("eve")
    late = debit("eve", "b1", 400)
    assert await engine.wallet.cancel(late.cancel()) == Answer(Status.OK, START)
    assert await engine.wallet.debit(late) == Answer(Status.CANCELLED, START)
    assert await engine.wallet.debit(late) == Answer(Status.CANCELLED, START)
    assert (await engine.wallet.balance("eve")).balance == START


async def test_cancel_gives_a_booked_stake_back_once(engine: Engine) -> None:
    await engine.fund("fay")
    bet = debit("fay", "b1", 400)
    assert (await engine.wallet.debit(bet)).balance == START - 400
    cancelled = await engine.wallet.cancel(bet.cancel())
    assert cancelled == Answer(Status.OK, START)
    assert await engine.wallet.cancel(bet.cancel()) == cancelled
    # Idempotency is per call and id: the debit sent again gets its own first answer back.
    assert await engine.wallet.debit(bet) == Answer(Status.OK, START - 400)
    assert (await engine.wallet.balance("fay")).balance == START


async def test_a_credit_pays_the_round_back_once(engine: Engine) -> None:
    await engine.fund("gus")
    bets = [debit("gus", "b1", 100), debit("gus", "b2", 50)]
    for bet in bets:
        await engine.wallet.debit(bet)
    credit = Credit(TABLE, 7, "gus", 295, tuple(bet.transaction_id for bet in bets))
    assert credit.transaction_id == "c:t1:7:gus"
    paid = await engine.wallet.credit(credit)
    assert paid == Answer(Status.OK, START - 150 + 295)
    assert await engine.wallet.credit(credit) == paid
    assert (await engine.wallet.balance("gus")).balance == START + 145


async def test_a_credit_of_zero_closes_a_lost_round(engine: Engine) -> None:
    await engine.fund("hal")
    bet = debit("hal", "b1", 100)
    await engine.wallet.debit(bet)
    lost = Credit(TABLE, 7, "hal", 0, (bet.transaction_id,))
    assert await engine.wallet.credit(lost) == Answer(Status.OK, START - 100)
    assert await engine.wallet.credit(lost) == Answer(Status.OK, START - 100)
    # Once in a credit a debit cannot be cancelled.
    with pytest.raises(WalletUnknown) as refused:
        await engine.wallet.cancel(bet.cancel())
    assert refused.value.reason is Unknown.CONFLICT
    assert (await engine.wallet.balance("hal")).balance == START - 100


async def test_a_credit_must_close_standing_debits_of_its_round(engine: Engine) -> None:
    """A cancelled debit, another player's, another round's, or an unknown one: refused, and
    nothing moves; the round can still be credited right afterwards."""
    await engine.fund("ida")
    await engine.fund("jon")
    kept, cancelled = debit("ida", "b1", 100), debit("ida", "b2", 100)
    other_round, others = debit("ida", "b3", 100, round_no=8), debit("jon", "b1", 100)
    for bet in (kept, cancelled, other_round, others):
        await engine.wallet.debit(bet)
    await engine.wallet.cancel(cancelled.cancel())
    for wrong in (cancelled, other_round, others, debit("ida", "never", 100)):
        credit = Credit(TABLE, 7, "ida", 500, (kept.transaction_id, wrong.transaction_id))
        with pytest.raises(WalletUnknown) as refused:
            await engine.wallet.credit(credit)
        assert refused.value.reason is Unknown.CONFLICT
        assert refused.value.transaction_id == "c:t1:7:ida"
    assert (await engine.wallet.balance("ida")).balance == START - 200  # b1 and b3 stand
    good = Credit(TABLE, 7, "ida", 200, (kept.transaction_id,))
    assert await engine.wallet.credit(good) == Answer(Status.OK, START)


async def test_the_same_id_with_other_data_is_refused(engine: Engine) -> None:
    """A credit sent again with another amount is no retry: refused, the first one stands."""
    await engine.fund("kim")
    bet = debit("kim", "b1", 100)
    await engine.wallet.debit(bet)
    await engine.wallet.credit(Credit(TABLE, 7, "kim", 200, (bet.transaction_id,)))
    with pytest.raises(WalletUnknown) as refused:
        await engine.wallet.credit(Credit(TABLE, 7, "kim", 900, (bet.transaction_id,)))
    assert refused.value.reason is Unknown.CONFLICT
    assert (await engine.wallet.balance("kim")).balance == START + 100


@pytest.mark.parametrize(
    "make",
    [
        lambda: Debit(TABLE, 1, "p", "b", "banker", 0),
        lambda: Debit(TABLE, 1, "p", "b", "banker", True),
        lambda: Debit(TABLE, 1, "p", "b", "banker", 2**53),
        lambda: Debit(TABLE, -1, "p", "b", "banker", 5),
        lambda: Credit(TABLE, 1, "p", -1, ("d:t1:1:p:b",)),
        lambda: Credit(TABLE, 1, "p", 1.5, ("d:t1:1:p:b",)),
        lambda: Credit(TABLE, 1, "p", 10, ()),
        lambda: Credit(TABLE, 1, "p", 10, ("d:t1:1:p:b", "d:t1:1:p:b")),
        lambda: Cancel(TABLE, 1, "p", 0, "d:t1:1:p:b"),
    ],
    ids=[
        "debit-0", "debit-bool", "debit-2**53", "round-negative", "credit-negative",
        "credit-float", "credit-no-debits", "credit-debit-twice", "cancel-0",
    ],
)  # fmt: skip
def test_a_transaction_no_wallet_could_take_is_refused_before_any_call(make: object) -> None:
    """Amounts are whole minor units (> 0 for a debit and a cancel, >= 0 for a credit), a
    credit lists its distinct debits: anything else is a ValueError, never sent."""
    with pytest.raises(ValueError):
        make()  # type: ignore[operator]


def test_transaction_ids_are_the_issues() -> None:
    bet = Debit("classic8", 42, "alice", "b-1", "tie", 100)
    assert bet.transaction_id == "d:classic8:42:alice:b-1"
    assert bet.cancel() == Cancel("classic8", 42, "alice", 100, "d:classic8:42:alice:b-1")
    assert Credit("classic8", 42, "alice", 0, (bet.transaction_id,)).transaction_id == (
        "c:classic8:42:alice"
    )
