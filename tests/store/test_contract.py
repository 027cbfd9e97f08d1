"""The store contract: every engine behaves the same through the public interface."""

from __future__ import annotations

import asyncio
import contextlib
import random

import pytest

from server.core.bets import BetTotals, Spot
from server.core.errors import BetRejected, RejectCode
from server.core.recall import round_summary
from server.core.rules import PRESETS
from server.core.table import Phase, TableState, close_betting, settle_round
from server.store.base import StaleWrite, StateUnreadable, Store
from server.store.codec import STATE_FORMAT, packb, state_to_bytes, unpackb
from server.wire import shapes
from tests.store import (
    RULES,
    TABLE,
    Owner,
    accepted_message,
    bet,
    read_blob,
    settlement_message,
    take,
    write_blob,
)
from tests.store.conftest import Advance, StoreFactory


async def rejected(store: Store, player: str, amount: object, spot: object, **kw: object) -> str:
    with pytest.raises(BetRejected) as info:
        await bet(store, player, amount, spot, **kw)  # type: ignore[arg-type]
    return info.value.code


async def balanced(store: Store) -> None:
    ledger = await store.ledger()
    assert ledger.balanced, ledger


# --- tables and players ------------------------------------------------------------------


async def test_create_table_is_idempotent(table: Store) -> None:
    """Creating an existing table again keeps its rules and its state."""
    owner = await Owner(table).start()
    await owner.open()
    await table.create_table(TABLE, PRESETS["classic8"])
    await table.create_table("t2", PRESETS["fourdeck"])
    assert await table.rules(TABLE) == RULES
    assert await table.rules("t2") == PRESETS["fourdeck"]
    state = await table.load_state(TABLE)
    assert state is not None and state.round == 1 and state.phase is Phase.BETTING
    assert await table.table_ids() == [TABLE, "t2"]


async def test_new_table_is_idle(store: Store) -> None:
    """A new table is idle at round 0 with no events."""
    await store.create_table(TABLE, RULES)
    state = await store.load_state(TABLE)
    assert state is not None
    assert (state.phase, state.round, state.version) == (Phase.IDLE, 0, 0)
    assert await store.last_seq(TABLE) == 0
    assert await store.events_after(TABLE, 0) == []


async def test_unknown_table(store: Store) -> None:
    """Reads of an unknown table give None; everything else is UNKNOWN_TABLE."""
    assert await store.rules("nope") is None
    assert await store.load_state("nope") is None
    assert await store.snapshot("nope", "alice") is None
    calls = [
        store.place_bet("nope", "alice", 1, "b1", "player", 100),
        store.last_seq("nope"),
        store.events_after("nope", 0),
        store.round_events("nope", 1),
        store.round_bets("nope", 1),
        store.settlement("nope", 1, "alice"),
        store.acquire_lease("nope", "node-a", 1000),
        store.release_lease("nope", "node-a", 1),
        store.lease("nope"),
        store.commit("nope", 1, 0, TableState("nope"), []),
        anext(store.follow("nope", 0)),
    ]
    for call in calls:
        with pytest.raises(BetRejected) as info:
            await call
        assert info.value.code is RejectCode.UNKNOWN_TABLE


async def test_ensure_player_creates_once(store: Store) -> None:
    """ensure_player grants the initial balance once and then returns the balance."""
    assert await store.balance("carol") is None
    assert await store.ensure_player("carol", 1_000) == 1_000
    assert await store.ensure_player("carol", 9_999) == 1_000
    assert await store.balance("carol") == 1_000
    ledger = await store.ledger()
    assert (ledger.issued, ledger.balances, ledger.in_play, ledger.house) == (1_000, 1_000, 0, 0)


# --- placing bets --------------------------------------------------------------------------


async def test_place_bet_debits_and_returns_receipt(table: Store) -> None:
    """An accepted bet debits the balance and answers with a receipt."""
    await (await Owner(table).start()).open()
    receipt = await bet(table, "alice", 300, "banker", bet_id="b1")
    assert accepted_message(receipt) == {
        "type": "bet_accepted",
        "table": TABLE,
        "round": 1,
        "bet_id": "b1",
        "spot": "banker",
        "amount": 300,
        "balance": 9_700,
    }
    assert await table.balance("alice") == 9_700
    [placed] = await table.round_bets(TABLE, 1)
    assert (placed.bet_id, placed.player, placed.spot, placed.amount) == (
        "b1",
        "alice",
        Spot.BANKER,
        300,
    )
    assert (await table.ledger()).in_play == 300
    await balanced(table)


async def test_repeated_bet_id_returns_first_receipt(table: Store) -> None:
    """The same bet_id twice returns the identical receipt and debits once."""
    await (await Owner(table).start()).open()
    first = await bet(table, "alice", 200, "player", bet_id="same")
    again = await bet(table, "alice", 900, "tie", bet_id="same")
    assert again == first
    assert await table.balance("alice") == 9_800
    assert len(await table.round_bets(TABLE, 1)) == 1
    assert await table.bet_totals(TABLE, 1) == BetTotals({"player": 200}, 1, 1)


async def test_bet_before_open_is_betting_closed(table: Store) -> None:
    """No round open yet: BETTING_CLOSED."""
    assert await rejected(table, "alice", 100, "player", round_no=0) == RejectCode.BETTING_CLOSED
    assert await rejected(table, "alice", 100, "player") == RejectCode.BETTING_CLOSED


async def test_bet_after_close_is_betting_closed(table: Store) -> None:
    """Once close_betting commits, bets are refused even inside the window."""
    owner = await Owner(table).start()
    await owner.open()
    await owner.close()
    assert await rejected(table, "alice", 100, "player") == RejectCode.BETTING_CLOSED


async def test_bet_after_deadline_is_betting_closed(table: Store) -> None:
    """A round whose deadline has passed on the store's clock refuses bets before closing."""
    owner = await Owner(table).start()
    await owner.open(window_ms=1_000, now_ms=await table.now_ms() - 10_000)
    assert await rejected(table, "alice", 100, "player") == RejectCode.BETTING_CLOSED


async def test_bet_inside_deadline_is_accepted(table: Store) -> None:
    """A bet before closes_at is accepted (the deadline is judged by the store's clock)."""
    owner = await Owner(table).start()
    await owner.open(window_ms=5_000)
    assert (await bet(table, "alice", 100, "player")).round == 1


@pytest.mark.parametrize("round_no", [0, 2, "1", None, 1.0, True])
async def test_bet_for_other_round_is_wrong_round(table: Store, round_no: object) -> None:
    """A bet naming a round other than the open one (or not as an int): WRONG_ROUND."""
    await (await Owner(table).start()).open()
    assert await rejected(table, "alice", 100, "player", round_no=round_no) == "WRONG_ROUND"


async def test_bet_above_balance_is_insufficient_funds(table: Store) -> None:
    """A bet above the balance is refused and nothing is debited."""
    await table.ensure_player("poor", 150)
    await (await Owner(table).start()).open()
    assert await rejected(table, "poor", 200, "player") == RejectCode.INSUFFICIENT_FUNDS
    assert await rejected(table, "stranger", 100, "player") == RejectCode.INSUFFICIENT_FUNDS
    assert await table.balance("poor") == 150
    assert await table.balance("stranger") is None


async def test_limits_per_spot_are_cumulative(table: Store) -> None:
    """Minimum and maximum apply to the player's total on the spot this round."""
    await (await Owner(table).start()).open()
    assert await rejected(table, "alice", 99, "player") == RejectCode.LIMIT
    assert await rejected(table, "alice", 1_001, "player") == RejectCode.LIMIT
    await bet(table, "alice", 600, "player")
    assert await rejected(table, "alice", 401, "player") == RejectCode.LIMIT
    await bet(table, "alice", 400, "player")  # exactly the maximum
    await bet(table, "bob", 1_000, "player")  # limits are per player
    await bet(table, "alice", 50, "tie")  # each spot has its own
    assert await rejected(table, "bob", 49, "tie") == RejectCode.LIMIT
    await bet(table, "alice", 49, "tie")  # alice's total on tie, 99, is over the minimum
    assert await table.balance("alice") == 10_000 - 1_000 - 99


async def test_limit_messages_name_the_rule(table: Store) -> None:
    """LIMIT messages say which bound and what the player already has on the spot."""
    await (await Owner(table).start()).open()
    with pytest.raises(BetRejected) as low:
        await bet(table, "alice", 99, "player")
    await bet(table, "alice", 700, "player")
    with pytest.raises(BetRejected) as high:
        await bet(table, "alice", 400, "player")
    assert low.value.message == "player minimum is 100"
    assert high.value.message == "player maximum is 1000; you have 700 on it"


@pytest.mark.parametrize("spot", ["dragon", "", None, 3, "player_pair"])
async def test_unknown_or_unoffered_spot(table: Store, spot: object) -> None:
    """A spot that does not exist, or that the table does not offer: UNKNOWN_SPOT."""
    await (await Owner(table).start()).open()
    assert await rejected(table, "alice", 100, spot) == RejectCode.UNKNOWN_SPOT


@pytest.mark.parametrize("amount", [0, -100, 100.0, True, "100", None, 10**30])
async def test_bad_amount(table: Store, amount: object) -> None:
    """An amount that is not a positive int is BAD_AMOUNT (a huge one is over the LIMIT)."""
    await (await Owner(table).start()).open()
    code = await rejected(table, "alice", amount, "player")
    assert code == (RejectCode.LIMIT if amount == 10**30 else RejectCode.BAD_AMOUNT)


async def test_checks_run_in_the_core_order(table: Store) -> None:
    """Window, then round, then spot, then amount: the first failing check names the code."""
    assert await rejected(table, "alice", -1, "dragon", round_no=7) == RejectCode.BETTING_CLOSED
    await (await Owner(table).start()).open()
    assert await rejected(table, "alice", -1, "dragon", round_no=7) == RejectCode.WRONG_ROUND
    assert await rejected(table, "alice", -1, "dragon") == RejectCode.UNKNOWN_SPOT
    assert await rejected(table, "alice", -1, "player_pair") == RejectCode.BAD_AMOUNT
    assert await rejected(table, "alice", 20_000, "tie") == RejectCode.LIMIT


async def test_a_players_bets_in_one_round_stop_at_max_bets_per_round(
    make_store: StoreFactory,
) -> None:
    """Issue 16, item 4: past max_bets_per_round accepted bets of a player in one round, the
    next is TOO_MANY_BETS (after the window and spot checks, before the amount and balance),
    debiting nothing; a retry of a placed bet_id still gets its receipt; other players and
    the next round are not affected. Bets sent together (one Redis batch) count one by one."""
    store = await make_store(max_bets_per_round=3)
    await store.create_table(TABLE, RULES)
    await store.ensure_player("alice", 10_000)
    await store.ensure_player("bob", 10_000)
    owner = await Owner(store).start()
    await owner.open()
    spots = ("player", "player", "banker", "banker")
    sent = [bet(store, "alice", 100, spot, bet_id=f"a{i}") for i, spot in enumerate(spots)]
    results = await asyncio.gather(*sent, return_exceptions=True)  # together
    assert [r.bet_id for r in results[:3]] == ["a0", "a1", "a2"]  # type: ignore[union-attr]
    refused = results[3]
    assert isinstance(refused, BetRejected) and refused.code is RejectCode.TOO_MANY_BETS
    assert refused.message == "at most 3 bets per player in one round"
    assert await rejected(store, "alice", 100, "dragon") == RejectCode.UNKNOWN_SPOT
    assert await rejected(store, "alice", 100, "player", round_no=7) == RejectCode.WRONG_ROUND
    assert await rejected(store, "alice", 10**9, "tie") == RejectCode.TOO_MANY_BETS
    assert await rejected(store, "alice", -1, "tie") == RejectCode.TOO_MANY_BETS
    assert await bet(store, "alice", 100, "player", bet_id="a0") == results[0]  # a retry
    assert await store.balance("alice") == 9_700
    assert len(await store.round_bets(TABLE, 1)) == 3
    assert (await bet(store, "bob", 100, bet_id="b0")).balance == 9_900
    await owner.close()
    await owner.deal()
    await owner.settle()
    await owner.open()
    assert (await bet(store, "alice", 100, round_no=2, bet_id="next")).round == 2
    assert (await store.ledger()).balanced


async def test_rejected_bet_changes_nothing(table: Store) -> None:
    """A refused bet leaves balances, the ledger and the event history untouched."""
    await (await Owner(table).start()).open()
    before = (await table.ledger(), await table.last_seq(TABLE), await table.balance("alice"))
    for amount, spot in [(5, "player"), (100, "dragon"), (0, "banker"), (20_000, "player")]:
        with pytest.raises(BetRejected):
            await bet(table, "alice", amount, spot)
    after = (await table.ledger(), await table.last_seq(TABLE), await table.balance("alice"))
    assert after == before
    assert await table.round_bets(TABLE, 1) == []


# --- commits and events --------------------------------------------------------------------


async def test_commit_with_wrong_fence_is_stale(table: Store) -> None:
    """A commit whose fencing token is not the holder's is StaleWrite and changes nothing."""
    owner = await Owner(table).start()
    await owner.open()
    transition = close_betting(owner.state)
    with pytest.raises(StaleWrite):
        await table.commit(TABLE, owner.fence + 1, owner.state.version, transition.state, [])
    state = await table.load_state(TABLE)
    assert state is not None and state.phase is Phase.BETTING


async def test_commit_with_wrong_version_is_stale(table: Store) -> None:
    """A commit against a version that is no longer current is StaleWrite."""
    owner = await Owner(table).start()
    await owner.open()
    seq = await table.last_seq(TABLE)
    transition = close_betting(owner.state)
    with pytest.raises(StaleWrite):
        await table.commit(
            TABLE, owner.fence, owner.state.version - 1, transition.state, transition.events
        )
    assert await table.last_seq(TABLE) == seq


async def test_commit_before_any_lease_is_stale(table: Store) -> None:
    """No lease was ever taken: every fence is stale."""
    state = await table.load_state(TABLE)
    assert state is not None
    with pytest.raises(StaleWrite):
        await table.commit(TABLE, 0, 0, state, [])
    with pytest.raises(StaleWrite):
        await table.commit(TABLE, 1, 0, state, [])


async def test_events_have_consecutive_seqs_from_one(table: Store) -> None:
    """Commits stamp type, table, seq (1, 2, ...), round, ts and keep the payload."""
    owner = await Owner(table).start()
    events = await owner.open()
    await bet(table, "alice", 200, "player")
    events += await owner.publish()
    events += await owner.finish()
    assert [e["seq"] for e in events] == list(range(1, len(events) + 1))
    for ev in events:
        assert ev["type"] == "event" and ev["table"] == TABLE and ev["round"] == 1
        assert isinstance(ev["ts"], int) and isinstance(ev["kind"], str)
    kinds = [e["kind"] for e in events]
    assert kinds[:2] == ["shoe_committed", "round_opened"]
    assert kinds.index("round_opened") < kinds.index("bet_totals") < kinds.index("betting_closed")
    assert kinds[-2:] == ["round_result", "round_settled"]
    shown = events[kinds.index("bet_totals")]
    assert (shown["totals"], shown["bettors"], shown["bets"]) == ({"player": 200}, 1, 1)
    assert list(shown)[:6] == ["type", "table", "seq", "round", "ts", "kind"]
    assert await table.last_seq(TABLE) == len(events)


async def test_a_bet_appends_no_event(table: Store) -> None:
    """Privacy: an accepted bet is in the round's bets and totals, never in the table's
    events (which every spectator gets); only its owner's receipt names it."""
    await (await Owner(table).start()).open()
    seq = await table.last_seq(TABLE)
    await bet(table, "alice", 300, "banker")
    await bet(table, "bob", 100, "tie")
    assert await table.last_seq(TABLE) == seq
    assert len(await table.round_events(TABLE, 1) or []) == seq
    assert len(await table.round_bets(TABLE, 1)) == 2


async def test_bet_totals_are_the_rounds_running_totals(table: Store) -> None:
    """bet_totals: per spot (only spots with money, in Spot order), distinct bettors, bets."""
    owner = await Owner(table).start()
    assert await table.bet_totals(TABLE, 1) == BetTotals()
    await owner.open()
    assert await table.bet_totals(TABLE, 1) == BetTotals({}, 0, 0)
    await bet(table, "alice", 60, "tie")
    await bet(table, "bob", 300, "banker")
    await bet(table, "alice", 200, "player")
    await bet(table, "alice", 100, "player")
    await rejected(table, "bob", 20_000, "player")  # refused bets count for nothing
    totals = await table.bet_totals(TABLE, 1)
    assert totals == BetTotals({"player": 300, "banker": 300, "tie": 60}, 2, 4)
    assert list(totals.totals) == ["player", "banker", "tie"]
    await owner.finish()
    await owner.open()
    await bet(table, "bob", 500, "player", round_no=2)
    assert await table.bet_totals(TABLE, 2) == BetTotals({"player": 500}, 1, 1)
    assert await table.bet_totals(TABLE, 1) == totals  # a held round keeps its totals


async def test_events_after_and_round_events_return_what_was_stored(table: Store) -> None:
    """events_after and round_events give back exactly the events commits returned."""
    owner = await Owner(table).start()
    round1 = await owner.open()
    await bet(table, "bob", 300, "banker")
    round1 += await owner.publish()
    round1 += await owner.finish()
    round2 = await owner.open()
    everything = round1 + round2
    assert await table.events_after(TABLE, 0) == everything
    assert await table.events_after(TABLE, 3, limit=2) == everything[3:5]
    assert await table.events_after(TABLE, len(everything)) == []
    assert await table.events_after(TABLE, len(everything) + 5) == []
    assert await table.round_events(TABLE, 1) == round1
    assert await table.round_events(TABLE, 2) == round2
    assert await table.round_events(TABLE, 3) is None


async def test_events_after_is_none_for_trimmed_history(make_store: StoreFactory) -> None:
    """Asking for events older than the history held gives None, not a gap."""
    store = await make_store(history_events=5)
    await store.create_table(TABLE, RULES)
    owner = await Owner(store).start()
    events = await owner.open()
    events += await owner.finish()
    last = events[-1]["seq"]
    assert last > 6
    assert await store.events_after(TABLE, last - 5) == events[-5:]
    assert await store.events_after(TABLE, last - 6) is None
    assert await store.events_after(TABLE, 0) is None
    assert await store.events_after(TABLE, -1) is None


async def test_round_events_outlive_stream_trimming(make_store: StoreFactory) -> None:
    """round_events keeps the last history_rounds rounds whole after the stream is trimmed."""
    store = await make_store(history_events=5, history_rounds=3)
    await store.create_table(TABLE, RULES)
    owner = await Owner(store).start()
    rounds = []
    for _ in range(4):
        events = await owner.open()
        rounds.append(events + await owner.finish())
    assert await store.round_events(TABLE, 1) is None
    for number, events in enumerate(rounds[1:], start=2):
        assert await store.round_events(TABLE, number) == events


async def test_follow_yields_old_and_new_events_in_order(table: Store) -> None:
    """follow yields held events, then each new one as it is appended, without gaps."""
    owner = await Owner(table).start()
    opened = await owner.open()
    follower = table.follow(TABLE, 1)
    try:
        assert await take(follower, len(opened) - 1) == opened[1:]
        # bet_totals, then betting_closed and the seal: shoe_sealed, shoe_shuffled, burn
        pending = asyncio.ensure_future(take(follower, 5))
        await asyncio.sleep(0)  # let the follower start waiting before the appends
        await bet(table, "alice", 100, "player")
        shown = await owner.publish()
        closed = await owner.close()
        assert await pending == [*shown, *closed]
    finally:
        await _aclose(follower)


async def test_follow_raises_lookup_error_for_trimmed_history(make_store: StoreFactory) -> None:
    """follow from a seq the history no longer holds raises LookupError."""
    store = await make_store(history_events=1)
    await store.create_table(TABLE, RULES)
    owner = await Owner(store).start()
    events = await owner.open()
    assert len(events) == 2  # shoe_committed, round_opened
    held = store.follow(TABLE, 1)
    trimmed = store.follow(TABLE, 0)
    try:
        assert await take(held, 1) == events[1:]
        with pytest.raises(LookupError):
            await take(trimmed, 1)
    finally:
        await _aclose(held)
        await _aclose(trimmed)


async def _aclose(follower: object) -> None:
    aclose = getattr(follower, "aclose", None)
    if aclose is not None:
        with contextlib.suppress(RuntimeError):
            await aclose()


# --- settlement and money ------------------------------------------------------------------


async def test_settlement_per_player(table: Store) -> None:
    """Each player's settlement lists their payouts and the balance right after."""
    owner = await Owner(table).start()
    await owner.open()
    await bet(table, "alice", 500, "player")
    await bet(table, "alice", 100, "tie")
    await bet(table, "bob", 300, "banker")
    await owner.close()
    await owner.deal()
    _, payouts = await owner.settle()
    for player, start in [("alice", 10_000), ("bob", 5_000)]:
        mine = [p for p in payouts if p.player == player]
        expected = start - sum(p.amount for p in mine) + sum(p.credit for p in mine)
        settlement = await table.settlement(TABLE, 1, player)
        assert settlement is not None
        assert settlement_message(settlement) == {
            "type": "settlement",
            "table": TABLE,
            "round": 1,
            "payouts": [p.to_dict() for p in mine],
            "balance": expected,
        }
        assert await table.balance(player) == expected
    assert await table.settlement(TABLE, 1, "carol") is None
    assert await table.settlement(TABLE, 2, "alice") is None
    ledger = await table.ledger()
    assert ledger.in_play == 0 and ledger.balanced
    assert ledger.house == sum(p.amount - p.credit for p in payouts)


async def test_settlement_credits_exactly_once(table: Store) -> None:
    """Repeating a settle commit is StaleWrite and credits nothing."""
    owner = await Owner(table).start()
    await owner.open()
    await bet(table, "alice", 1_000, "banker")
    await owner.close()
    await owner.deal()
    bets = await table.round_bets(TABLE, 1)
    before = owner.state
    transition, payouts = settle_round(before, RULES, bets)
    await table.commit(
        TABLE, owner.fence, before.version, transition.state, transition.events, payouts
    )
    balance, ledger, seq = (
        await table.balance("alice"),
        await table.ledger(),
        await table.last_seq(TABLE),
    )
    with pytest.raises(StaleWrite):
        await table.commit(
            TABLE, owner.fence, before.version, transition.state, transition.events, payouts
        )
    assert await table.balance("alice") == balance
    assert await table.ledger() == ledger
    assert await table.last_seq(TABLE) == seq


async def test_a_round_settled_in_slices_credits_each_player_once(table: Store) -> None:
    """A round is settled in slices of whole players, each a commit of the unchanged state;
    a player already settled in the round is not credited again, whether a slice is repeated
    (a retry, a new owner redoing its predecessor's slices) or the round's last commit names
    it too. Each slice's notice names only the players it credited."""
    owner = await Owner(table).start()
    await owner.open()
    await bet(table, "alice", 500, "banker")
    await bet(table, "alice", 100, "tie")
    await bet(table, "bob", 300, "player")
    await owner.close()
    await owner.deal()
    dealing = owner.state
    transition, payouts = settle_round(dealing, RULES, await table.round_bets(TABLE, 1))
    summary = round_summary(transition.state)
    alices = [p for p in payouts if p.player == "alice"]
    async with table.settled_notices() as notices:
        for _ in range(2):  # the same slice twice: the second credits nobody
            events = await table.commit(
                TABLE, owner.fence, dealing.version, dealing, [], alices, summary
            )
            assert events == []
        after_slice = await table.balance("alice")
        assert after_slice == 10_000 - 600 + sum(p.credit for p in alices)
        # The round's end names every payout again: only bob is credited now.
        await table.commit(
            TABLE,
            owner.fence,
            dealing.version,
            transition.state,
            transition.events,
            payouts,
            summary,
        )
        heard = await take(notices, 2)  # type: ignore[arg-type] # notices, not events
    assert [n.players for n in heard] == [("alice",), ("bob",)]
    assert await table.balance("alice") == after_slice
    assert await table.balance("bob") == 5_000 - 300 + sum(
        p.credit for p in payouts if p.player == "bob"
    )
    for player in ("alice", "bob"):
        [record] = await table.history(player)  # one game-recall record each
        assert record["round"] == 1
    ledger = await table.ledger()
    assert ledger.balanced and ledger.in_play == 0
    assert ledger.house == sum(p.amount - p.credit for p in payouts)


async def test_void_refunds_every_stake(table: Store) -> None:
    """Voiding a round returns every stake once and records push settlements."""
    owner = await Owner(table).start()
    await owner.open()
    await bet(table, "alice", 400, "player")
    await bet(table, "alice", 200, "banker")
    await bet(table, "bob", 100, "tie")
    events, refunds = await owner.void("dealer error")
    assert [e["kind"] for e in events] == ["round_voided", "shoe_revealed"]
    assert events[0]["refunded"] == 700 and events[0]["reason"] == "dealer error"
    assert await table.balance("alice") == 10_000
    assert await table.balance("bob") == 5_000
    settlement = await table.settlement(TABLE, 1, "alice")
    assert settlement is not None and settlement.balance == 10_000
    assert [p["outcome"] for p in settlement.payouts] == ["push", "push"]
    ledger = await table.ledger()
    assert (ledger.in_play, ledger.house, ledger.balanced) == (0, 0, True)
    assert len(refunds) == 3


async def test_ledger_balances_after_every_step(table: Store) -> None:
    """issued == balances + in_play + house after each bet and transition of two rounds."""
    owner = await Owner(table).start()
    await balanced(table)
    for _ in range(2):
        await owner.open()
        for player, amount, spot in [("alice", 700, "banker"), ("bob", 250, "player")]:
            await bet(table, player, amount, spot, round_no=owner.state.round)
            await balanced(table)
        await owner.close()
        await balanced(table)
        await owner.deal()
        await balanced(table)
        await owner.settle()
        await balanced(table)
    ledger = await table.ledger()
    assert ledger.issued == 15_000 and ledger.in_play == 0


async def test_running_totals_match_the_rounds_bets(table: Store) -> None:
    """After a mix of accepted and refused bets (seeded), the running totals are exactly what
    the round's bets add up to, on both engines."""
    rng = random.Random(7)
    players = [f"r{i}" for i in range(8)]
    for player in players:
        await table.ensure_player(player, 3_000)
    await (await Owner(table).start()).open()
    for number in range(120):
        with contextlib.suppress(BetRejected):  # limits and balances refuse some
            spot = rng.choice(["player", "banker", "tie"])
            await bet(
                table, rng.choice(players), rng.choice([50, 100, 250]), spot, bet_id=f"x{number}"
            )
    placed = await table.round_bets(TABLE, 1)
    expected: dict[str, int] = {}
    for one in placed:
        expected[one.spot.value] = expected.get(one.spot.value, 0) + one.amount
    totals = await table.bet_totals(TABLE, 1)
    assert totals == BetTotals.of(expected, len({b.player for b in placed}), len(placed))
    assert 20 < totals.bets < 120
    assert (await table.ledger()).in_play == sum(expected.values())


async def test_round_records_are_kept_while_the_round_is_held(make_store: StoreFactory) -> None:
    """A round's bets (in order), totals, settlements and events are kept as long as the round
    is held for replay (history_rounds), then forgotten together."""
    store = await make_store(history_rounds=3)
    await store.create_table(TABLE, RULES)
    await store.ensure_player("alice", 10_000)
    await store.ensure_player("bob", 10_000)
    owner = await Owner(store).start()
    for round_no in (1, 2, 3):
        await owner.open()
        await bet(
            store, "alice", 100 * round_no, "player", round_no=round_no, bet_id=f"a{round_no}"
        )
        await bet(store, "bob", 100, "banker", round_no=round_no, bet_id=f"b{round_no}")
        await owner.finish()
    for round_no in (1, 2, 3):
        held = await store.round_bets(TABLE, round_no)
        assert [(b.bet_id, b.amount) for b in held] == [
            (f"a{round_no}", 100 * round_no),
            (f"b{round_no}", 100),
        ]
        assert (await store.bet_totals(TABLE, round_no)).bets == 2
        assert await store.settlement(TABLE, round_no, "alice") is not None
    await owner.open()  # round 4: round 1 is no longer held
    assert await store.round_events(TABLE, 1) is None
    assert await store.round_bets(TABLE, 1) == []
    assert await store.bet_totals(TABLE, 1) == BetTotals()
    assert await store.settlement(TABLE, 1, "alice") is None
    assert len(await store.round_bets(TABLE, 2)) == 2
    assert await balanced_ledger(store)


async def balanced_ledger(store: Store) -> bool:
    return (await store.ledger()).balanced


async def test_receipts_are_kept_while_the_round_is_held(make_store: StoreFactory) -> None:
    """One rule for both engines: a receipt is kept as long as its round is held
    (history_rounds). Within it a retry gets the first receipt, whatever round it names and
    after the window; once the round is forgotten the retry is WRONG_ROUND and debits nothing."""
    store = await make_store(history_rounds=2)
    await store.create_table(TABLE, RULES)
    await store.ensure_player("p", 10_000)
    owner = await Owner(store).start()
    await owner.open()
    first = await bet(store, "p", 100, round_no=1, bet_id="b1")
    await owner.finish()
    paid = await store.balance("p")  # 9_900 and what the round paid back
    await owner.open()  # round 2: round 1 is still held
    assert await bet(store, "p", 500, "tie", round_no=2, bet_id="b1") == first
    assert await bet(store, "p", 100, round_no=7, bet_id="b1") == first
    assert await store.balance("p") == paid
    await owner.finish()
    await owner.open()  # round 3: round 1 is forgotten, with its receipts
    with pytest.raises(BetRejected) as refused:
        await bet(store, "p", 100, round_no=1, bet_id="b1")
    assert refused.value.code is RejectCode.WRONG_ROUND
    assert await store.balance("p") == paid
    await balanced(store)


async def test_the_same_bet_id_at_another_table_is_another_bet(table: Store) -> None:
    """Receipts are per player and table: the same bet_id at another table is a new bet."""
    await table.create_table("t2", RULES)
    await (await Owner(table).start()).open()
    await (await Owner(table, "t2").start()).open()
    first = await bet(table, "alice", 100, bet_id="x")
    other = await bet(table, "alice", 100, bet_id="x", table_id="t2")
    assert (first.table, other.table, other.balance) == (TABLE, "t2", 9_800)
    assert await bet(table, "bob", 100, bet_id="x") != first  # and per player


async def test_snapshot_reads_state_seq_and_my_bets(table: Store) -> None:
    """snapshot gives the state, the seq of its last event, the rules and my bets this round."""
    owner = await Owner(table).start()
    await owner.open()
    await bet(table, "alice", 100, "player", bet_id="a1")
    await bet(table, "bob", 200, "banker", bet_id="b1")
    await bet(table, "alice", 300, "banker", bet_id="a2")
    snap = await table.snapshot(TABLE, "alice")
    assert snap is not None
    assert snap.state.to_dict() == owner.state.to_dict()
    assert snap.seq == await table.last_seq(TABLE)
    assert snap.rules == RULES
    assert [(b.bet_id, b.amount) for b in snap.bets] == [("a1", 100), ("a2", 300)]
    assert (snap.totals, snap.bettors) == ({"player": 100, "banker": 500}, 2)
    nobody = await table.snapshot(TABLE, None)
    assert nobody is not None and nobody.bets == []
    assert (nobody.totals, nobody.bettors) == (snap.totals, 2)
    await owner.finish()
    await owner.open()
    fresh = await table.snapshot(TABLE, "alice")
    assert fresh is not None and (fresh.bets, fresh.totals, fresh.bettors) == ([], {}, 0)


async def test_state_round_trips_with_the_shoe(table: Store) -> None:
    """load_state returns the committed state, shoe included."""
    owner = await Owner(table).start()
    await owner.open()
    await owner.close()
    await owner.deal()
    state = await table.load_state(TABLE)
    assert state is not None and state.shoe is not None and owner.state.shoe is not None
    assert state.to_dict() == owner.state.to_dict()
    assert state.dealt_cards() == owner.state.dealt_cards()


# --- the stored state: header, format versions, corruption ------------------------------


async def test_header_is_the_state_without_its_shoe(table: Store) -> None:
    """load_header gives phase, round, version, closes_at_ms and shoe number; None if unknown."""
    header = await table.load_header(TABLE)
    assert header is not None and (header.phase, header.round, header.version) == (
        Phase.IDLE,
        0,
        0,
    )
    owner = await Owner(table).start()
    await owner.open()
    header = await table.load_header(TABLE)
    state = owner.state
    assert header is not None and header.shoe is None
    assert (header.phase, header.round, header.version, header.closes_at_ms) == (
        state.phase,
        state.round,
        state.version,
        state.closes_at_ms,
    )
    assert header.shoe_number == state.shoe_number == 1
    assert await table.load_header("nope") is None


async def test_state_in_format_0_is_read(table: Store) -> None:
    """A blob written before formats were numbered (no `v`) is read: a rolling upgrade goes on."""
    owner = await Owner(table).start()
    await owner.open()
    await write_blob(table, TABLE, packb(owner.state.to_dict()))
    state = await table.load_state(TABLE)
    assert state is not None and state.to_dict() == owner.state.to_dict()
    await owner.close()  # and it steps on from there, written in the current format
    loaded = await table.load_state(TABLE)
    assert loaded is not None and loaded.to_dict() == owner.state.to_dict()
    assert unpackb(await read_blob(table, TABLE))["v"] == STATE_FORMAT
    assert await read_blob(table, TABLE) == state_to_bytes(owner.state)


async def test_each_rounds_pairs_are_stored_and_a_state_without_them_loads(
    table: Store,
) -> None:
    """The pair codes are kept beside the results in the stored state, so the snapshot's
    roads show the pair dots on any node. A blob without them (an older node's) reads as no
    pairs so far, and the rounds after it line up again."""
    owner = await Owner(table).start()
    while not owner.state.pairs.strip("0"):  # the seed deals a pair within a few rounds
        await owner.open()
        await owner.finish()
        assert owner.state.round < 30
    snap = await table.snapshot(TABLE, None)
    assert snap is not None
    assert (snap.state.results, snap.state.pairs) == (owner.state.results, owner.state.pairs)
    roads = shapes.snapshot(TABLE, snap.seq, snap.epoch, snap.state, 0, snap.rules)["roads"]
    flags = "".join(
        str(int(c["player_pair"]) + 2 * int(c["banker_pair"])) for c in roads["bead_plate"]
    )
    assert flags == owner.state.pairs

    older = owner.state.to_dict()
    del older["pairs"]
    await write_blob(table, TABLE, packb({"v": STATE_FORMAT, **older}))
    loaded = await table.load_state(TABLE)
    assert loaded is not None and loaded.pairs == "0" * len(owner.state.results)
    owner.state = loaded
    await owner.open()
    await owner.finish()
    stored = await table.load_state(TABLE)
    assert stored is not None and stored.pairs == owner.state.pairs
    assert len(stored.pairs) == len(stored.results)
    if stored.shoe_number == loaded.shoe_number:
        assert stored.pairs.startswith(loaded.pairs)


@pytest.mark.parametrize(
    "blob",
    [
        b"junk",
        b"",
        packb([1, 2, 3]),
        packb({"v": 1, "table_id": TABLE}),
        packb({"v": STATE_FORMAT + 1, "table_id": TABLE, "phase": "betting"}),
        packb({"v": "1"}),
    ],
    ids=["junk", "empty", "list", "missing-fields", "future-format", "bad-format"],
)
async def test_unreadable_state_raises_but_its_header_stays_readable(
    table: Store, blob: bytes
) -> None:
    """A blob that is corrupt or of a newer format raises StateUnreadable from load_state and
    snapshot; the header (kept outside the blob) still reads, bets are still judged by it."""
    owner = await Owner(table).start()
    await owner.open()
    await write_blob(table, TABLE, blob)
    with pytest.raises(StateUnreadable):
        await table.load_state(TABLE)
    with pytest.raises(StateUnreadable):
        await table.snapshot(TABLE, "alice")
    header = await table.load_header(TABLE)
    assert header is not None and (header.phase, header.round) == (Phase.BETTING, 1)
    assert (await bet(table, "alice", 100)).round == 1


# --- leases --------------------------------------------------------------------------------


async def test_lease_renewal_keeps_the_token(table: Store) -> None:
    """The live holder renews with the same token; another node is refused meanwhile."""
    first = await table.acquire_lease(TABLE, "node-a", 10_000)
    assert first is not None and first.node == "node-a"
    now = await table.now_ms()
    assert now < first.expires_at_ms <= now + 10_000
    again = await table.acquire_lease(TABLE, "node-a", 20_000)
    assert again is not None and again.token == first.token
    assert again.expires_at_ms > first.expires_at_ms
    assert await table.acquire_lease(TABLE, "node-b", 10_000) is None
    held = await table.lease(TABLE)
    assert held is not None and (held.node, held.token) == ("node-a", first.token)


async def test_expired_lease_goes_to_a_new_holder_with_a_larger_token(
    table: Store, advance: Advance
) -> None:
    """After expiry another node takes the lease with a larger token; the old one is fenced."""
    owner = await Owner(table).start(ttl_ms=50)
    await owner.open()
    await advance(60)
    assert await table.lease(TABLE) is None
    taken = await table.acquire_lease(TABLE, "node-b", 10_000)
    assert taken is not None and taken.token > owner.fence
    with pytest.raises(StaleWrite):
        await owner.close()
    successor = Owner(table, node="node-b")
    await successor.start()
    assert successor.fence == taken.token
    assert (await successor.close())[0]["kind"] == "betting_closed"


async def test_expired_lease_renewed_by_its_holder_gets_a_new_token(
    table: Store, advance: Advance
) -> None:
    """A holder coming back after expiry is a new holder: it gets a new, larger token."""
    first = await table.acquire_lease(TABLE, "node-a", 50)
    assert first is not None
    await advance(60)
    again = await table.acquire_lease(TABLE, "node-a", 1_000)
    assert again is not None and again.token > first.token


async def test_release_needs_node_and_token(table: Store) -> None:
    """release_lease frees the lease only for its holder's node and token."""
    owner = await Owner(table).start()
    await table.release_lease(TABLE, "node-a", owner.fence + 1)
    await table.release_lease(TABLE, "node-b", owner.fence)
    assert await table.acquire_lease(TABLE, "node-b", 1_000) is None
    await table.release_lease(TABLE, "node-a", owner.fence)
    assert await table.lease(TABLE) is None
    with pytest.raises(StaleWrite):
        await owner.open()
    taken = await table.acquire_lease(TABLE, "node-b", 1_000)
    assert taken is not None and taken.token > owner.fence


async def test_now_ms_is_the_store_clock(store: Store) -> None:
    """now_ms is a plausible wall-clock time in milliseconds and does not go back."""
    first = await store.now_ms()
    second = await store.now_ms()
    assert 1_600_000_000_000 < first <= second
