"""The audit log's contract on both engines: one entry per movement of a player's money, in
the same atomic step, in order, none for a movement refused; kept by age and by count; and
every balance and the ledger rebuilt from it."""

from __future__ import annotations

from collections import defaultdict

import pytest

from server.core.errors import BetRejected
from server.store.audit import AuditEntry, parse_seq
from server.store.base import Store
from server.store.wallet import InsufficientFunds
from tests.store import TABLE, Owner, bet
from tests.store.conftest import Advance, StoreFactory

FAR = 10**12  # ms: later than any guest's expiry made here


def fields(entry: AuditEntry) -> tuple[object, ...]:
    """What an entry says but its sequence and time."""
    e = entry
    return (e.kind, e.player, e.table, e.round, e.bet_id, e.key, e.amount, e.balance)


async def test_a_new_player_is_issued_its_balance_once(store: Store) -> None:
    before = await store.now_ms()
    await store.ensure_player("p", 1_000)
    await store.ensure_player("p", 5_000)  # known: nothing issued, nothing logged
    await store.ensure_player("zero", 0)
    entries = await store.audit("p")
    assert [fields(e) for e in entries] == [("issue", "p", None, None, None, None, 1_000, 1_000)]
    assert entries[0].ts >= before and parse_seq(entries[0].seq)[0] >= before
    assert [fields(e) for e in await store.audit("zero")] == [
        ("issue", "zero", None, None, None, None, 0, 0)
    ]
    assert await store.audit("nobody") == []


async def test_a_bet_and_its_settlement(table: Store) -> None:
    """A bet is one debit entry with its table, round and bet_id; a retry of its bet_id logs
    nothing; the settlement is one entry of the player's whole credit, 0 for a loss too."""
    owner = await Owner(table).start()
    await owner.open()
    receipt = await bet(table, "alice", 300, "player", bet_id="a-1")
    assert await bet(table, "alice", 300, "player", bet_id="a-1") == receipt
    await bet(table, "alice", 200, "banker", bet_id="a-2")
    await bet(table, "bob", 100, "tie", bet_id="b-1")
    await owner.close()
    await owner.deal()
    _, payouts = await owner.settle()
    credits = {p: sum(x.credit for x in payouts if x.player == p) for p in ("alice", "bob")}
    alice = await table.audit("alice")
    assert [fields(e) for e in alice[1:]] == [
        ("bet", "alice", TABLE, 1, "a-1", None, -300, 9_700),
        ("bet", "alice", TABLE, 1, "a-2", None, -200, 9_500),
        ("settle", "alice", TABLE, 1, None, None, credits["alice"], 9_500 + credits["alice"]),
    ]
    bob = await table.audit("bob")
    assert [fields(e) for e in bob[1:]] == [
        ("bet", "bob", TABLE, 1, "b-1", None, -100, 4_900),
        ("settle", "bob", TABLE, 1, None, None, credits["bob"], 4_900 + credits["bob"]),
    ]
    for player in ("alice", "bob"):
        assert (await table.audit(player))[-1].balance == await table.balance(player)
        settlement = await table.settlement(TABLE, 1, player)
        assert (
            settlement is not None and settlement.balance == (await table.audit(player))[-1].balance
        )
    # The same payouts again (a new owner redoing the round's slices): nobody credited twice.
    await table.commit(TABLE, owner.fence, owner.state.version, owner.state, [], payouts)
    assert len(await table.audit("alice")) == 4


async def test_a_void_refunds_each_player_in_one_entry(table: Store) -> None:
    owner = await Owner(table).start()
    await owner.open()
    await bet(table, "alice", 300, "player", bet_id="a-1")
    await bet(table, "alice", 100, "banker", bet_id="a-2")
    await owner.close()
    await owner.void()
    assert [fields(e) for e in (await table.audit("alice"))[-1:]] == [
        ("refund", "alice", TABLE, 1, None, None, 400, 10_000)
    ]
    assert len(await table.audit("bob")) == 1  # its issue: bob did not bet


async def test_operator_credits_and_debits(store: Store) -> None:
    """Each movement is one entry with its idempotency key; a retried key and a debit
    beyond the balance log nothing; a player not seen before starts with its credit."""
    await store.move_money("p", 500, "k-1")
    await store.move_money("p", 500, "k-1")
    await store.move_money("p", -200, "k-2")
    with pytest.raises(InsufficientFunds):
        await store.move_money("p", -1_000, "k-3")
    assert [fields(e) for e in await store.audit("p")] == [
        ("operator_credit", "p", None, None, None, "k-1", 500, 500),
        ("operator_debit", "p", None, None, None, "k-2", -200, 300),
    ]


async def test_a_guest_expiry_is_the_last_entry_and_outlives_the_guest(store: Store) -> None:
    await store.ensure_player("g", 1_000, guest_ttl_ms=60_000)
    await store.move_money("g", 50, "k-1")
    assert await store.expire_guests(now_ms=await store.now_ms() + FAR) == 1
    assert await store.balance("g") is None
    assert [fields(e) for e in await store.audit("g")] == [
        ("issue", "g", None, None, None, None, 1_000, 1_000),
        ("operator_credit", "g", None, None, None, "k-1", 50, 1_050),
        ("expire", "g", None, None, None, None, -1_050, 0),
    ]
    assert await store.expire_guests(now_ms=await store.now_ms() + FAR) == 0
    await store.ensure_player("g", 700, guest_ttl_ms=60_000)  # the name again: a new guest
    assert [e.kind for e in await store.audit("g")] == [
        "issue",
        "operator_credit",
        "expire",
        "issue",
    ]


async def test_a_refused_bet_logs_nothing(table: Store) -> None:
    owner = await Owner(table).start()
    await owner.open()
    with pytest.raises(BetRejected):
        await bet(table, "bob", 6_000)  # more than bob has... and past the limit
    with pytest.raises(BetRejected):
        await bet(table, "alice", 10, "player")  # below the minimum
    with pytest.raises(BetRejected):
        await bet(table, "alice", 100, "player", round_no=2)
    await owner.close()
    with pytest.raises(BetRejected):
        await bet(table, "alice", 100, "player")  # closed
    assert [e.kind for e in await table.audit("alice")] == ["issue"]
    assert [e.kind for e in await table.audit("bob")] == ["issue"]


async def test_entries_are_in_order_and_paged(table: Store) -> None:
    """Sequences grow strictly (several in one millisecond too); `after` reads the next page,
    `since_ms` the entries from a time on; `limit` bounds a page."""
    for i in range(12):
        await table.move_money("alice", 10 + i, f"k-{i}")
    entries = await table.audit("alice")
    seqs = [parse_seq(e.seq) for e in entries]
    assert seqs == sorted(seqs) and len(set(seqs)) == len(seqs) == 13
    assert [e.ts for e in entries] == sorted(e.ts for e in entries)
    assert [e.amount for e in entries[1:]] == [10 + i for i in range(12)]
    pages: list[AuditEntry] = []
    after = None
    while page := await table.audit("alice", limit=5, after=after):
        assert len(page) <= 5
        pages += page
        after = page[-1].seq
    assert pages == entries
    last_ms = parse_seq(entries[-1].seq)[0]
    since = await table.audit("alice", since_ms=last_ms)
    assert since and since[-1] == entries[-1]
    assert all(parse_seq(e.seq)[0] >= last_ms for e in since)
    assert await table.audit("alice", since_ms=last_ms + 1) == []
    assert await table.audit("alice", limit=0) == []


async def test_the_log_keeps_the_last_entries(make_store: StoreFactory) -> None:
    store = await make_store(audit_entries=3)
    await store.ensure_player("p", 100)
    for i in range(5):
        await store.move_money("p", 1 + i, f"k-{i}")
    entries = await store.audit("p")
    assert [e.key for e in entries] == ["k-2", "k-3", "k-4"]
    # The first kept entry's balance before it, plus every amount kept, is the balance.
    first = entries[0]
    assert first.balance - first.amount + sum(e.amount for e in entries) == await store.balance("p")


async def test_the_log_keeps_entries_for_its_age(
    make_store: StoreFactory, advance: Advance
) -> None:
    """Entries older than audit_keep_ms by the store's clock are never read again, and are
    trimmed by the player's next entry."""
    store = await make_store(audit_keep_ms=200)
    await store.ensure_player("p", 100)
    await store.move_money("p", 5, "k-1")
    assert len(await store.audit("p")) == 2
    await advance(250)  # the memory engine's clock at once, Redis's really
    assert await store.audit("p") == []  # too old to read, though not yet trimmed
    await store.move_money("p", 7, "k-2")
    entries = await store.audit("p")
    assert [(e.kind, e.amount, e.balance) for e in entries] == [("operator_credit", 7, 112)]
    assert await store.audit("p", since_ms=0) == entries
    first = entries[0]  # what the trimmed entries left: the balance before the first kept
    assert first.balance - first.amount == 105


async def test_every_balance_and_the_ledger_rebuild_from_the_log(table: Store) -> None:
    """Rounds with bets, a settlement and a void, operator credits and debits, guests issued
    and one expired: every player's balance is the sum of its entries' amounts, and the
    ledger's counters are sums of the log's entries by kind."""
    owner = await Owner(table).start()
    await table.ensure_player("g1", 2_000, guest_ttl_ms=60_000)
    await table.ensure_player("g2", 3_000, guest_ttl_ms=10**13)
    await table.move_money("alice", 1_500, "top-up")
    await table.move_money("newcomer", 800, "first")
    for round_no in (1, 2, 3):
        await owner.open()
        await bet(table, "alice", 500, "player", round_no=round_no)
        await bet(table, "alice", 100, "tie", round_no=round_no)
        await bet(table, "bob", 400, "banker", round_no=round_no)
        await bet(table, "g1", 200, "player", round_no=round_no)
        await bet(table, "g2", 300, "banker", round_no=round_no)
        await bet(table, "newcomer", 100, "player", round_no=round_no)
        if round_no == 2:
            await owner.close()
            await owner.void()
        else:
            await owner.finish()
        await table.move_money("bob", -150, f"cash-out-{round_no}")
    await owner.open()
    await bet(table, "alice", 200, "banker", round_no=4)  # left in play
    assert await table.expire_guests(now_ms=await table.now_ms() + 120_000) == 1  # g1

    players = ["alice", "bob", "g1", "g2", "newcomer"]
    logs = {player: await table.audit(player) for player in players}
    by_kind: dict[str, int] = defaultdict(int)
    open_bets = 0
    for player, entries in logs.items():
        balance = 0
        closed = {(e.table, e.round) for e in entries if e.kind in ("settle", "refund")}
        for entry in entries:
            balance += entry.amount
            assert entry.balance == balance, entry  # each entry's balance after is the sum
            by_kind[entry.kind] += entry.amount
            if entry.kind == "bet" and (entry.table, entry.round) not in closed:
                open_bets -= entry.amount
        assert balance == (await table.balance(player) or 0), player
    ledger = await table.ledger()
    assert ledger.balanced
    assert ledger.issued == by_kind["issue"]
    assert ledger.operator_in == by_kind["operator_credit"]
    assert ledger.operator_out == -by_kind["operator_debit"]
    assert ledger.expired == -by_kind["expire"]
    assert ledger.balances == sum(by_kind.values())
    assert ledger.in_play == open_bets == 200
    assert ledger.house == -(by_kind["bet"] + by_kind["settle"] + by_kind["refund"]) - open_bets
    assert by_kind["refund"] == 500 + 100 + 400 + 200 + 300 + 100  # round 2's stakes
