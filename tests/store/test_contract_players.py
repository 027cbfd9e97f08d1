"""The wallet's contract on both engines: guests that expire, and operator movements.

Expiry is judged by the store's clock. Instead of waiting for a TTL to pass, most tests ask
expire_guests to judge at a later time (`now_ms`); the Redis engine reads its own clock in the
script otherwise, which one test shows with a TTL of a few ms.
"""

from __future__ import annotations

import asyncio

import pytest

from server.store.base import Store
from server.store.wallet import (
    IDEMPOTENCY_KEYS_KEPT,
    LEDGER_LIMIT,
    MONEY_LIMIT,
    MOVEMENTS_KEPT,
    InsufficientFunds,
    LedgerLimit,
    Movement,
)
from tests.store import TABLE, Owner, bet
from tests.store.conftest import Advance

TTL = 60_000  # a guest's TTL in these tests, ms
FAR = 10**12  # ms: later than any expiry made here


async def balanced(store: Store) -> None:
    ledger = await store.ledger()
    assert ledger.balanced, ledger


async def expire_later(store: Store, ms: int) -> int:
    """expire_guests judged `ms` after the store's clock now."""
    return await store.expire_guests(now_ms=await store.now_ms() + ms)


# --- guests --------------------------------------------------------------------------------


async def test_a_guest_expires_after_its_ttl_unseen(store: Store) -> None:
    """A guest is kept until its TTL has passed since it was last seen, then forgotten: its
    balance leaves the ledger as `expired`, which stays balanced."""
    before = await store.now_ms()
    assert await store.ensure_player("g", 1_000, guest_ttl_ms=TTL) == 1_000
    after = await store.now_ms()
    assert await store.expire_guests(now_ms=before + TTL - 1) == 0
    assert await store.expire_guests() == 0  # by the store's own clock: far from due
    assert await store.balance("g") == 1_000
    assert await store.expire_guests(now_ms=after + TTL) == 1
    assert await store.balance("g") is None
    ledger = await store.ledger()
    assert (ledger.issued, ledger.balances, ledger.expired) == (1_000, 0, 1_000)
    await balanced(store)
    assert await store.expire_guests(now_ms=after + FAR) == 0  # gone once, counted once


async def test_a_guest_expires_by_the_stores_own_clock(store: Store, advance: Advance) -> None:
    """Without `now_ms`, expiry is judged by the store's clock (Redis's own TIME)."""
    await store.ensure_player("g", 500, guest_ttl_ms=5)
    await advance(6)
    assert await store.expire_guests() == 1
    assert await store.balance("g") is None
    await balanced(store)


async def test_a_player_created_without_ttl_never_expires(store: Store) -> None:
    """Only a player created with a TTL is a guest; a later TTL does not make one."""
    await store.ensure_player("p", 1_000)
    await store.ensure_player("p", 1_000, guest_ttl_ms=1)
    assert await expire_later(store, FAR) == 0
    assert await store.balance("p") == 1_000


async def test_ensure_player_refreshes_a_guest(store: Store, advance: Advance) -> None:
    """Every ensure_player of a guest pushes its expiry back by its TTL from then."""
    await store.ensure_player("g", 1_000, guest_ttl_ms=TTL)
    first_due = await store.now_ms() + TTL  # at or after the first expiry
    await advance(20)
    await store.ensure_player("g", 1_000)  # no TTL given: the guest's own
    assert await store.expire_guests(now_ms=first_due) == 0
    assert await store.balance("g") == 1_000
    assert await expire_later(store, TTL) == 1


async def test_keep_guests_is_a_sighting_that_never_creates(store: Store, advance: Advance) -> None:
    """keep_guests (a node keeping its connected guests, issue 16 item 3) pushes each guest's
    expiry back by its TTL from now; a player that is no guest, unknown, or already expired
    is left as it is: nobody is created, and nothing is issued."""
    await store.ensure_player("g", 1_000, guest_ttl_ms=TTL)
    await store.ensure_player("p", 1_000)
    first_due = await store.now_ms() + TTL
    await advance(20)
    await store.keep_guests(["g", "p", "nobody"])
    await store.keep_guests([])
    assert await store.expire_guests(now_ms=first_due) == 0
    assert await store.balance("g") == 1_000
    assert await store.balance("nobody") is None
    assert await expire_later(store, TTL) == 1
    await store.keep_guests(["g"])  # expired: not brought back
    assert await store.balance("g") is None
    assert await expire_later(store, FAR) == 0  # p was never a guest
    assert await store.balance("p") == 1_000
    ledger = await store.ledger()
    assert (ledger.issued, ledger.expired) == (2_000, 1_000)
    await balanced(store)


async def test_a_new_ttl_replaces_a_guests_ttl(store: Store) -> None:
    """A guest seen with another TTL keeps that one from then on."""
    await store.ensure_player("g", 1_000, guest_ttl_ms=TTL)
    await store.ensure_player("g", 1_000, guest_ttl_ms=10 * TTL)
    assert await expire_later(store, 9 * TTL) == 0
    assert await expire_later(store, 10 * TTL) == 1


async def test_a_bet_refreshes_a_guest(table: Store, advance: Advance) -> None:
    """A guest's bet is a sighting too: it pushes the expiry back as ensure_player does."""
    owner = await Owner(table).start()
    await owner.open()
    await table.ensure_player("g", 1_000, guest_ttl_ms=TTL)
    first_due = await table.now_ms() + TTL
    await advance(20)
    await bet(table, "g", 100)
    await owner.finish()
    assert await table.expire_guests(now_ms=first_due) == 0
    assert await expire_later(table, TTL) == 1
    await balanced(table)


@pytest.mark.parametrize("ending", ["settle", "void"])
async def test_a_guest_with_a_stake_in_play_waits_for_its_round(table: Store, ending: str) -> None:
    """A guest idle past its TTL with a bet not yet settled is kept; once the round is settled
    or voided it goes, with the balance the round left it."""
    owner = await Owner(table).start()
    await owner.open()
    await table.ensure_player("g", 1_000, guest_ttl_ms=TTL)
    await bet(table, "g", 300, "banker")
    assert await expire_later(table, FAR) == 0
    assert await table.balance("g") == 700
    if ending == "settle":
        await owner.finish()
    else:
        await owner.close()
        await owner.void()
    left = await table.balance("g")
    assert left is not None
    assert await expire_later(table, FAR) == 1
    ledger = await table.ledger()
    assert ledger.expired == left and ledger.in_play == 0
    await balanced(table)


async def test_expiry_forgets_everything_of_the_guest(table: Store) -> None:
    """An expired guest leaves no balance, movements or history; the same name later is a
    new guest with a fresh initial balance, issued again."""
    owner = await Owner(table).start()
    await owner.open()
    await table.ensure_player("g", 1_000, guest_ttl_ms=TTL)
    await bet(table, "g", 100)
    await owner.finish()
    await table.move_money("g", 50, "k-1")
    assert await table.history("g") and await table.movements("g")
    assert await expire_later(table, FAR) == 1
    assert await table.balance("g") is None
    assert await table.history("g") == []
    assert await table.movements("g") == []
    assert await table.ensure_player("g", 1_000, guest_ttl_ms=TTL) == 1_000
    movement = await table.move_money("g", 50, "k-1")  # the key is free again
    assert movement.balance == 1_050
    await balanced(table)


async def test_many_guests_expire_in_one_sweep(store: Store) -> None:
    """Every due guest goes in one call; guests not yet due and players stay."""
    for i in range(30):
        await store.ensure_player(f"g{i}", 100 + i, guest_ttl_ms=TTL)
    await store.ensure_player("late", 1_000, guest_ttl_ms=10 * TTL)
    await store.ensure_player("p", 1_000)
    assert await expire_later(store, 2 * TTL) == 30
    assert await store.balance("late") == 1_000 and await store.balance("p") == 1_000
    ledger = await store.ledger()
    assert ledger.expired == sum(100 + i for i in range(30))
    await balanced(store)


async def test_concurrent_sweeps_remove_each_guest_once(store: Store) -> None:
    """Several nodes may sweep at the same time: each guest is removed and counted once."""
    for i in range(40):
        await store.ensure_player(f"g{i}", 1_000, guest_ttl_ms=TTL)
    later = await store.now_ms() + 2 * TTL
    removed = await asyncio.gather(*(store.expire_guests(now_ms=later) for _ in range(4)))
    assert sum(removed) == 40
    assert (await store.ledger()).expired == 40_000
    await balanced(store)


# --- operator movements --------------------------------------------------------------------


async def test_credit_and_debit_move_money_and_count_in_the_ledger(store: Store) -> None:
    """A credit adds, a debit takes; each answers its Movement with the balance after and
    the store's time, and the ledger counts operator money in and out."""
    await store.ensure_player("alice", 1_000)
    before = await store.now_ms()
    credit = await store.move_money("alice", 500, "k-1")
    debit = await store.move_money("alice", -300, "k-2")
    after = await store.now_ms()
    assert (credit.player, credit.amount, credit.idempotency_key, credit.balance) == (
        "alice",
        500,
        "k-1",
        1_500,
    )
    assert (debit.amount, debit.balance) == (-300, 1_200)
    assert before <= credit.ts <= debit.ts <= after
    assert debit.to_dict() == {
        "amount": -300,
        "idempotency_key": "k-2",
        "balance": 1_200,
        "ts": debit.ts,
    }
    assert await store.balance("alice") == 1_200
    ledger = await store.ledger()
    assert (ledger.issued, ledger.operator_in, ledger.operator_out) == (1_000, 500, 300)
    await balanced(store)


async def test_the_same_key_moves_money_once(store: Store) -> None:
    """A repeated key returns the first Movement and moves nothing, whatever it asks now;
    keys belong to one player."""
    await store.ensure_player("alice", 1_000)
    first = await store.move_money("alice", 500, "k-1")
    assert await store.move_money("alice", 500, "k-1") == first
    assert await store.move_money("alice", -900, "k-1") == first
    assert await store.balance("alice") == 1_500
    assert await store.movements("alice") == [first]
    other = await store.move_money("bob", 500, "k-1")
    assert other.balance == 500 and other.player == "bob"
    assert (await store.ledger()).operator_in == 1_000
    await balanced(store)


async def test_concurrent_retries_of_one_key_move_money_once(store: Store) -> None:
    """Retries racing each other (a client and its proxy, two nodes): one movement."""
    await store.ensure_player("alice", 1_000)
    movements = await asyncio.gather(*(store.move_money("alice", 250, "k-1") for _ in range(10)))
    assert len(set(movements)) == 1
    assert await store.balance("alice") == 1_250
    await balanced(store)


async def test_a_debit_beyond_the_balance_moves_nothing(store: Store) -> None:
    """InsufficientFunds names the balance; nothing moves and the key stays unused."""
    await store.ensure_player("alice", 1_000)
    with pytest.raises(InsufficientFunds) as info:
        await store.move_money("alice", -1_001, "k-1")
    assert (info.value.player, info.value.balance, info.value.amount) == ("alice", 1_000, 1_001)
    assert await store.balance("alice") == 1_000
    assert await store.movements("alice") == []
    assert (await store.move_money("alice", -1_000, "k-1")).balance == 0  # the whole balance
    ledger = await store.ledger()
    assert (ledger.operator_in, ledger.operator_out) == (0, 1_000)
    await balanced(store)


async def test_a_player_not_seen_before_starts_at_zero(store: Store) -> None:
    """An operator credit to an unknown player creates it with 0 first (nothing issued, not a
    guest); a debit to one is refused and creates nothing."""
    with pytest.raises(InsufficientFunds) as info:
        await store.move_money("new", -1, "k-0")
    assert info.value.balance == 0
    assert await store.balance("new") is None
    assert (await store.move_money("new", 700, "k-1")).balance == 700
    assert await store.ensure_player("new", 1_000) == 700  # exists: no initial balance
    ledger = await store.ledger()
    assert (ledger.issued, ledger.balances, ledger.operator_in) == (0, 700, 700)
    assert await expire_later(store, FAR) == 0
    await balanced(store)


@pytest.mark.parametrize(
    "amount",
    [0, 1.5, True, "500", None, MONEY_LIMIT, -MONEY_LIMIT],
    ids=["zero", "float", "bool", "str", "none", "limit", "minus-limit"],
)
async def test_bad_amounts_are_refused(store: Store, amount: object) -> None:
    """Amounts are non-zero whole numbers below 2**53: anything else is a ValueError."""
    await store.ensure_player("alice", 1_000)
    with pytest.raises(ValueError, match="amount"):
        await store.move_money("alice", amount, "k-1")  # type: ignore[arg-type]
    assert await store.balance("alice") == 1_000


async def test_bad_keys_and_balances_past_the_limit_are_refused(store: Store) -> None:
    """An empty key is a ValueError; so is a credit taking the balance to 2**53."""
    await store.ensure_player("alice", 1_000)
    with pytest.raises(ValueError, match="idempotency_key"):
        await store.move_money("alice", 5, "")
    with pytest.raises(ValueError, match="2\\*\\*53"):
        await store.move_money("alice", MONEY_LIMIT - 1_000, "k-1")
    top = await store.move_money("alice", MONEY_LIMIT - 1_001, "k-1")  # just below: fine
    assert top.balance == MONEY_LIMIT - 1
    assert await store.balance("alice") == MONEY_LIMIT - 1
    await balanced(store)


async def test_operator_movements_stop_before_a_ledger_counter_overflows(store: Store) -> None:
    """Issue 16, item 2: 1,024 credit/debit pairs of 2**53-1 take operator_in and operator_out
    to 2**63-1024; the 1,025th credit would take operator_in past 2**63-1, so both engines
    refuse it with LedgerLimit (nothing moves, no movement recorded), its debit is then short
    of funds, a credit that still fits goes through, and the ledger stays balanced."""
    top = MONEY_LIMIT - 1
    for i in range(1024):
        assert (await store.move_money("whale", top, f"in-{i}")).balance == top
        assert (await store.move_money("whale", -top, f"out-{i}")).balance == 0
    with pytest.raises(LedgerLimit) as full:
        await store.move_money("whale", top, "in-1024")
    assert full.value.counter == "operator_in"
    assert str(full.value) == "the ledger's operator_in would pass 2**63 - 1; nothing moved"
    with pytest.raises(InsufficientFunds):
        await store.move_money("whale", -top, "out-1024")
    ledger = await store.ledger()
    assert ledger.operator_in == ledger.operator_out == 1024 * top
    assert (await store.movements("whale", 1))[0].idempotency_key == "out-1023"
    assert await store.balance("whale") == 0
    await balanced(store)
    room = LEDGER_LIMIT - 1024 * top  # 1023
    assert (await store.move_money("whale", room, "in-last")).balance == room
    with pytest.raises(LedgerLimit):
        await store.move_money("whale", 1, "in-one-more")
    assert (await store.ledger()).operator_in == LEDGER_LIMIT
    await balanced(store)


async def test_a_new_player_that_would_overflow_the_ledger_is_refused(store: Store) -> None:
    """ensure_player refuses (LedgerLimit, nothing created) a new player whose balance would
    take the ledger's issued past 2**63-1."""
    await store.ensure_player("a", 2**62)
    with pytest.raises(LedgerLimit) as full:
        await store.ensure_player("b", 2**62)
    assert full.value.counter == "issued"
    assert await store.balance("b") is None
    assert await store.ensure_player("b", 2**62 - 1) == 2**62 - 1
    assert (await store.ledger()).issued == LEDGER_LIMIT
    await balanced(store)


async def test_movements_newest_first_the_last_hundred(store: Store) -> None:
    """movements() lists the latest first, at most `limit`, and keeps the last 100."""
    for i in range(MOVEMENTS_KEPT + 5):
        await store.move_money("alice", i + 1, f"k-{i}")
    kept = await store.movements("alice")
    assert [m.idempotency_key for m in kept] == [
        f"k-{i}" for i in reversed(range(5, MOVEMENTS_KEPT + 5))
    ]
    assert all(isinstance(m, Movement) for m in kept)
    assert [m.amount for m in await store.movements("alice", 3)] == [105, 104, 103]
    assert await store.movements("alice", 0) == []
    assert await store.movements("nobody") == []


async def test_keys_are_remembered_for_the_last_thousand(store: Store) -> None:
    """A key dedupes while it is among the player's last IDEMPOTENCY_KEYS_KEPT; an older one
    moves money again (documented window)."""
    first = await store.move_money("alice", 1, "k-0")
    for i in range(1, IDEMPOTENCY_KEYS_KEPT):
        await store.move_money("alice", 1, f"k-{i}")
    assert await store.move_money("alice", 1, "k-0") == first  # the 1000th newest: kept
    await store.move_money("alice", 1, "k-new")  # pushes k-0 out
    again = await store.move_money("alice", 1, "k-0")
    assert again != first and again.balance == IDEMPOTENCY_KEYS_KEPT + 2
    await balanced(store)


async def test_operator_money_of_an_expired_guest_leaves_as_expired(store: Store) -> None:
    """What an operator credited to a guest goes out with the guest; the ledger balances."""
    await store.ensure_player("g", 1_000, guest_ttl_ms=TTL)
    await store.move_money("g", 400, "k-1")
    await store.move_money("g", -100, "k-2")
    assert await expire_later(store, FAR) == 1
    ledger = await store.ledger()
    assert (ledger.operator_in, ledger.operator_out, ledger.expired) == (400, 100, 1_300)
    await balanced(store)


async def test_bets_and_settlements_leave_the_ledger_balanced_with_operator_money(
    table: Store,
) -> None:
    """Operator money, bets, settlement and an expiry together: still balanced."""
    owner = await Owner(table).start()
    await owner.open()
    await table.move_money("alice", 2_000, "top-up")
    await table.ensure_player("g", 3_000, guest_ttl_ms=TTL)
    await bet(table, "alice", 500, "player")
    await bet(table, "g", 400, "banker")
    await table.move_money("bob", -1_000, "cash-out")
    await balanced(table)
    await owner.finish()
    assert await expire_later(table, FAR) == 1
    await balanced(table)
    assert TABLE in await table.table_ids()
