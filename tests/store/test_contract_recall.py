"""Game recall on both engines: every settled or voided round leaves each bettor a record,
written in the commit that credits them, and history() returns them newest first."""

from __future__ import annotations

from typing import Any

import pytest

from server.core.table import Phase, deal_next_card, settle_round
from server.store.base import Event, Store
from tests.store import RULES, TABLE, Owner, bet
from tests.store.conftest import StoreFactory

RECORD_FIELDS = [
    "table",
    "round",
    "time",
    "bets",
    "cards",
    "player_total",
    "banker_total",
    "winner",
    "natural",
    "payouts",
    "balance_after",
]


def cards_of(events: list[Event]) -> list[dict[str, Any]]:
    return [
        {"hand": e["hand"], "rank": e["rank"], "suit": e["suit"]}
        for e in events
        if e["kind"] == "card"
    ]


async def play_round(owner: Owner, stakes: list[tuple[str, int, str]]) -> list[Event]:
    """Open a round, place (player, amount, spot) bets, then close, deal and settle it."""
    events = await owner.open()
    for player, amount, spot in stakes:
        await bet(
            owner.store, player, amount, spot, round_no=owner.state.round, table_id=owner.table_id
        )
    return events + await owner.finish()


async def test_a_settled_round_leaves_each_bettor_its_record(table: Store) -> None:
    """The record holds the player's bets, every card in deal order, the result, the player's
    payouts and balance after, at the settlement's time, in the documented field order."""
    owner = await Owner(table).start()
    await owner.open()
    await bet(table, "alice", 300, "banker", bet_id="a1")
    await bet(table, "alice", 50, "tie", bet_id="a2")
    await bet(table, "bob", 200, "player", bet_id="b1")
    events = await owner.finish()
    result = next(e for e in events if e["kind"] == "round_result")
    settled = next(e for e in events if e["kind"] == "round_settled")
    for player, bets in {
        "alice": [
            {"bet_id": "a1", "spot": "banker", "amount": 300},
            {"bet_id": "a2", "spot": "tie", "amount": 50},
        ],
        "bob": [{"bet_id": "b1", "spot": "player", "amount": 200}],
    }.items():
        [record] = await table.history(player)
        settlement = await table.settlement(TABLE, 1, player)
        assert settlement is not None
        assert list(record) == RECORD_FIELDS
        assert record == {
            "table": TABLE,
            "round": 1,
            "time": settled["ts"],
            "bets": bets,
            "cards": cards_of(events),
            "player_total": result["player_total"],
            "banker_total": result["banker_total"],
            "winner": result["winner"],
            "natural": result["natural"],
            "payouts": settlement.payouts,
            "balance_after": settlement.balance,
        }
        assert record["balance_after"] == await table.balance(player)
    assert 4 <= len(cards_of(events)) <= 6


async def test_a_round_voided_while_dealing_records_the_cards_dealt(table: Store) -> None:
    """A voided round's record: the cards dealt so far, no result, the refunds; every bettor
    has a settlement too."""
    owner = await Owner(table).start()
    await owner.open()
    await bet(table, "alice", 300, "banker", bet_id="a1")
    await bet(table, "bob", 200, "player", bet_id="b1")
    await owner.close()
    dealt = await owner.apply(deal_next_card(owner.state))
    dealt += await owner.apply(deal_next_card(owner.state))
    _, refunds = await owner.void()
    assert len(cards_of(dealt)) == 2
    for player, start in (("alice", 10_000), ("bob", 5_000)):
        [record] = await table.history(player)
        assert record["cards"] == cards_of(dealt)
        assert (record["player_total"], record["banker_total"]) == (None, None)
        assert (record["winner"], record["natural"]) == (None, None)
        mine = [p.to_dict() for p in refunds if p.player == player]
        assert record["payouts"] == mine and {p["outcome"] for p in mine} == {"push"}
        assert record["balance_after"] == start
        settlement = await table.settlement(TABLE, 1, player)
        assert settlement is not None and settlement.payouts == mine


async def test_a_round_voided_while_betting_records_no_cards(table: Store) -> None:
    owner = await Owner(table).start()
    await owner.open()
    await bet(table, "alice", 300, "banker", bet_id="a1")
    await owner.void()
    [record] = await table.history("alice")
    assert record["cards"] == [] and record["winner"] is None
    assert record["bets"] == [{"bet_id": "a1", "spot": "banker", "amount": 300}]
    assert record["balance_after"] == 10_000


async def test_only_bettors_get_records(table: Store) -> None:
    """A player who did not bet in a round has no record of it; a round nobody bet in
    writes none."""
    owner = await Owner(table).start()
    await play_round(owner, [])
    await play_round(owner, [("alice", 100, "player")])
    assert [r["round"] for r in await table.history("alice")] == [2]
    assert await table.history("bob") == []
    assert await table.history("nobody") == []


async def test_history_is_newest_first_with_a_limit(table: Store) -> None:
    owner = await Owner(table).start()
    for _ in range(4):
        await play_round(owner, [("alice", 100, "banker")])
    assert [r["round"] for r in await table.history("alice")] == [4, 3, 2, 1]
    assert [r["round"] for r in await table.history("alice", limit=2)] == [4, 3]
    assert await table.history("alice", limit=0) == []
    times = [r["time"] for r in await table.history("alice")]
    assert times == sorted(times, reverse=True)


async def test_history_filters_by_table(table: Store) -> None:
    """With a table, only that table's rounds, still newest first and limited."""
    await table.create_table("t2", RULES)
    first, second = await Owner(table).start(), await Owner(table, "t2").start()
    for _ in range(3):
        await play_round(first, [("alice", 100, "player")])
        await play_round(second, [("alice", 200, "banker")])
    both = await table.history("alice")
    assert [(r["table"], r["round"]) for r in both] == [
        ("t2", 3),
        (TABLE, 3),
        ("t2", 2),
        (TABLE, 2),
        ("t2", 1),
        (TABLE, 1),
    ]
    assert [r["round"] for r in await table.history("alice", "t2")] == [3, 2, 1]
    assert [r["round"] for r in await table.history("alice", TABLE, limit=2)] == [3, 2]
    assert await table.history("alice", "elsewhere") == []


async def test_history_keeps_the_last_recall_rounds_per_player(
    make_store: StoreFactory,
) -> None:
    """Each player keeps its last `recall_rounds` records, whatever the table keeps of its
    rounds (settlements go with the round; the recall stays)."""
    store = await make_store(history_rounds=2, recall_rounds=3)
    await store.create_table(TABLE, RULES)
    await store.ensure_player("alice", 10_000)
    owner = await Owner(store).start()
    for _ in range(5):
        await play_round(owner, [("alice", 100, "banker")])
    assert [r["round"] for r in await store.history("alice", limit=100)] == [5, 4, 3]
    assert await store.settlement(TABLE, 3, "alice") is None  # the table forgot round 3
    assert await store.settlement(TABLE, 5, "alice") is not None


async def test_a_commit_without_summary_records_no_cards(table: Store) -> None:
    """A paying commit without a summary still records bets, payouts and balance."""
    owner = await Owner(table).start()
    await owner.open()
    await bet(table, "alice", 300, "banker", bet_id="a1")
    await owner.close()
    await owner.deal()
    bets = await table.round_bets(TABLE, 1)
    transition, payouts = settle_round(owner.state, owner.rules, bets)
    await table.commit(TABLE, owner.fence, owner.state.version, transition.state, [], payouts)
    [record] = await table.history("alice")
    assert record["cards"] == [] and record["winner"] is None
    assert record["payouts"] == [p.to_dict() for p in payouts]
    assert transition.state.phase is Phase.SETTLED


@pytest.mark.parametrize("limit", [1, 20, 100])
async def test_history_limit_caps_the_answer(table: Store, limit: int) -> None:
    owner = await Owner(table).start()
    for _ in range(3):
        await play_round(owner, [("bob", 100, "player")])
    assert len(await table.history("bob", limit=limit)) == min(limit, 3)
