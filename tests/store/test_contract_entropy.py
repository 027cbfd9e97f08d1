"""The committed shoe through the store, on both engines: players' entropy (add_entropy,
shoe_entropy) and a shoe whose cards are the same whatever the bets (issue 18)."""

from __future__ import annotations

import pytest

from server.core.errors import BetRejected
from server.core.fair import client_seed, shuffle
from server.core.table import close_betting
from server.store.base import MAX_ENTROPY_PER_SHOE, EntropyRefused, Store
from server.wire.shape_check import message_problems
from tests.store import TABLE, Owner, bet
from tests.store.conftest import Advance, StoreFactory


async def refused(store: Store, player: str, value: str = "v") -> str:
    with pytest.raises(EntropyRefused) as info:
        await store.add_entropy(TABLE, player, value)
    return info.value.code


async def test_entropy_is_taken_once_per_player_in_the_first_window_only(table: Store) -> None:
    """Before any round, after the window, in a later round of the shoe: ENTROPY_CLOSED; a
    second value of a player: ENTROPY_ALREADY_SENT. Each value taken is an entropy_accepted
    event with the next seq, and the owner seals the shoe with them in the order taken."""
    assert await refused(table, "alice") == "ENTROPY_CLOSED"  # no round open
    owner = await Owner(table).start()
    opened = await owner.open()
    first = await table.add_entropy(TABLE, "bob", "héllo 🂡")
    second = await table.add_entropy(TABLE, "alice", "lucky 7")
    assert [first["seq"], second["seq"]] == [opened[-1]["seq"] + 1, opened[-1]["seq"] + 2]
    assert (first["kind"], first["shoe"], first["value"], first["round"]) == (
        "entropy_accepted",
        1,
        "héllo 🂡",
        1,
    )
    assert message_problems(first) == []
    assert await refused(table, "alice", "again") == "ENTROPY_ALREADY_SENT"
    assert await table.shoe_entropy(TABLE, 1) == ["héllo 🂡", "lucky 7"]
    assert await table.shoe_entropy(TABLE, 2) == []
    assert await table.round_events(TABLE, 1) == [*opened, first, second]
    events = await owner.apply(close_betting(owner.state, None, await table.shoe_entropy(TABLE, 1)))
    assert await refused(table, "carol") == "ENTROPY_CLOSED"  # the window is closed
    sealed = next(e for e in events if e["kind"] == "shoe_sealed")
    assert sealed["entropy"] == ["héllo 🂡", "lucky 7"]
    assert sealed["client_seed"] == client_seed(["héllo 🂡", "lucky 7"]).hex()
    await owner.deal()
    await owner.settle()
    await owner.open()  # round 2, same shoe: no window for entropy
    assert not owner.state.last_hand and owner.state.shoe_number == 1
    assert await refused(table, "carol") == "ENTROPY_CLOSED"


async def test_entropy_closes_with_the_window_by_the_stores_clock(
    table: Store, advance: Advance
) -> None:
    """The window is judged by the store's clock, as a bet's: at closes_at it is shut."""
    owner = await Owner(table).start()
    await owner.open(window_ms=50)
    await advance(60)
    assert await refused(table, "alice") == "ENTROPY_CLOSED"
    assert await table.shoe_entropy(TABLE, 1) == []


async def test_a_shoe_takes_a_bounded_number_of_values(table: Store) -> None:
    owner = await Owner(table).start()
    await owner.open()
    for number in range(MAX_ENTROPY_PER_SHOE):
        await table.add_entropy(TABLE, f"p{number}", str(number))
    assert await refused(table, "one-more") == "ENTROPY_FULL"
    assert len(await table.shoe_entropy(TABLE, 1)) == MAX_ENTROPY_PER_SHOE


async def test_entropy_for_an_unknown_table(table: Store) -> None:
    with pytest.raises(BetRejected):
        await table.add_entropy("nope", "alice", "x")


async def test_the_cards_are_the_same_whatever_the_bets(make_store: StoreFactory) -> None:
    """Two stores, the same seeds and the same entropy; heavy bets on one, none on the other:
    every card event (rank, suit, position, salt, proof) is the same, and the shoe is the one
    the seed and the client seed fix."""
    cards = []
    for betting in (True, False):
        store = await make_store()
        await store.create_table(TABLE, Owner(store).rules)
        await store.ensure_player("alice", 10_000_000)
        owner = await Owner(store, seed=11).start()
        dealt: list[dict[str, object]] = []
        for number in range(1, 9):
            await owner.open()
            if number == 1:
                await store.add_entropy(TABLE, "alice", "mine")
            if betting:
                for spot in ("player", "banker", "tie"):
                    await bet(store, "alice", 100, spot, round_no=number)
            entropy = await store.shoe_entropy(TABLE, owner.state.shoe_number)
            await owner.apply(close_betting(owner.state, None, entropy))
            dealt += [
                {k: v for k, v in e.items() if k not in ("seq", "ts")}
                for e in await owner.deal()
                if e["kind"] == "card"
            ]
            await owner.settle()
        cards.append(dealt)
        assert owner.state.fair is not None
        fair = owner.state.fair
        assert owner.state.shoe_number == 1, "one shoe: the seed is the first shoe's"
        shoe = shuffle(fair.seed, client_seed(["mine"]), fair.decks, fair.cut_from_end)
        assert [(e["position"], e["rank"]) for e in dealt] == [
            (p, shoe.cards[p].rank) for p in range(shoe.first_dealt, shoe.first_dealt + len(dealt))
        ]
    assert cards[0] == cards[1] and len(cards[0]) >= 32
