"""Bets over the wire: acceptance, idempotent retries and every rejection code."""

from __future__ import annotations

import asyncio
from typing import Any

import pytest
from redis.asyncio import Redis

from server.app import Node
from server.store.redis import RedisStore
from tests.transport.conftest import SCALE, TABLE, Client, ClientFactory, NodeFactory, bet_message


def _bet(round_no: object, bet_id: str, spot: object = "player", amount: object = 500) -> Any:
    return bet_message(round_no, bet_id, spot, amount)


async def _fresh_window(client: Client) -> int:
    """Join and wait for the next round to open: a whole betting window lies ahead."""
    snap = await client.join()
    opened = await client.event("round_opened", snap["round"])
    return int(opened["round"])


async def test_same_bet_id_twice_is_answered_identically_and_debited_once(
    node: Node, open_client: ClientFactory
) -> None:
    """A retried bet_id gets the first answer again and moves no money."""
    client = await open_client(node)
    start = client.welcome["balance"]
    round_no = await _fresh_window(client)
    await client.send(_bet(round_no, "once", "banker", 700))
    first = await client.reply("bet_accepted")
    await client.send(_bet(round_no, "once", "banker", 700))
    second = await client.reply("bet_accepted")
    assert first == second
    assert first["balance"] == start - 700
    await client.send(_bet(round_no, "another", "banker", 100))
    assert (await client.reply("bet_accepted"))["balance"] == start - 800
    settlement = await client.reply("settlement")
    assert sorted(p["bet_id"] for p in settlement["payouts"]) == ["another", "once"]
    shown = [e for e in client.round_events(round_no) if e["kind"] == "bet_totals"]
    assert (shown[-1]["totals"], shown[-1]["bets"]) == ({"banker": 800}, 2)


async def test_a_retry_after_the_window_still_gets_the_first_answer(
    node: Node, open_client: ClientFactory
) -> None:
    """Idempotency outlives the window: a late retry is not turned into BETTING_CLOSED."""
    client = await open_client(node)
    round_no = await _fresh_window(client)
    await client.send(_bet(round_no, "late-retry"))
    first = await client.reply("bet_accepted")
    await client.event("betting_closed", round_no - 1)
    await client.send(_bet(round_no, "late-retry"))
    assert await client.reply("bet_accepted") == first


async def test_every_reject_code_over_the_wire(
    make_node: NodeFactory, open_client: ClientFactory
) -> None:
    """Each refused bet answers bet_rejected with its code and debits nothing."""
    node = await make_node(initial_balance=1_000)
    client = await open_client(node)
    assert client.welcome["balance"] == 1_000
    round_no = await _fresh_window(client)
    cases = [
        (_bet(round_no + 1, "r-round"), "WRONG_ROUND"),
        (_bet(round_no - 1, "r-old-round"), "WRONG_ROUND"),
        (_bet(str(round_no), "r-round-text"), "WRONG_ROUND"),
        (_bet(round_no, "r-funds", "player", 5_000), "INSUFFICIENT_FUNDS"),
        (_bet(round_no, "r-min", "player", 50), "LIMIT"),
        (_bet(round_no, "r-max", "tie", 60_000), "LIMIT"),
        (_bet(round_no, "r-spot", "dragon"), "UNKNOWN_SPOT"),
        (_bet(round_no, "r-spot-type", 7), "UNKNOWN_SPOT"),
        (_bet(round_no, "r-zero", "player", 0), "BAD_AMOUNT"),
        (_bet(round_no, "r-negative", "player", -500), "BAD_AMOUNT"),
        (_bet(round_no, "r-text", "player", "500"), "BAD_AMOUNT"),
        (_bet(round_no, "r-float", "player", 500.0), "BAD_AMOUNT"),
        (_bet(round_no, "r-bool", "player", True), "BAD_AMOUNT"),
        ({**_bet(round_no, "r-table"), "table": "nope"}, "UNKNOWN_TABLE"),
    ]
    for message, _ in cases:  # pipelined: all inside the window
        await client.send(message)
    await client.send(_bet(round_no, "ok", "player", 100))
    for message, code in cases:
        rejected = await client.reply("bet_rejected")
        assert (rejected["bet_id"], rejected["code"]) == (message["bet_id"], code)
        assert rejected["message"]
    accepted = await client.reply("bet_accepted")
    assert accepted["balance"] == 900  # no refused bet took money

    await client.event("betting_closed", round_no - 1)
    await client.send(_bet(round_no, "r-closed", "player", 100))
    closed = await client.reply("bet_rejected")
    assert closed["code"] == "BETTING_CLOSED"
    await client.send(_bet(round_no + 1, "r-closed-next", "player", 100))
    assert (await client.reply("bet_rejected"))["code"] == "BETTING_CLOSED"


async def test_a_rejected_bet_id_can_be_used_again(node: Node, open_client: ClientFactory) -> None:
    """Only accepted bets are remembered: fixing a refused bet and resending it works."""
    client = await open_client(node)
    round_no = await _fresh_window(client)
    await client.send(_bet(round_no, "fix-me", "player", 1))
    assert (await client.reply("bet_rejected"))["code"] == "LIMIT"
    await client.send(_bet(round_no, "fix-me", "player", 100))
    assert (await client.reply("bet_accepted"))["amount"] == 100


async def test_bets_past_max_bets_per_round_are_too_many_bets(
    make_node: NodeFactory, open_client: ClientFactory, engine: str
) -> None:
    """--max-bets-per-round 2: a player's third bet of the round, from any tab, is answered
    bet_rejected TOO_MANY_BETS and debits nothing; a retry of a placed bet_id is not."""
    node = await make_node(engine=engine, max_bets_per_round=2)
    client = await open_client(node)
    round_no = await _fresh_window(client)
    for bet_id in ("m-1", "m-2", "m-3", "m-1"):
        await client.send(_bet(round_no, bet_id, "player", 100))
    assert [(await client.reply("bet_accepted"))["bet_id"] for _ in range(2)] == ["m-1", "m-2"]
    refused = await client.reply("bet_rejected")
    assert (refused["bet_id"], refused["code"]) == ("m-3", "TOO_MANY_BETS")
    assert refused["message"] == "at most 2 bets per player in one round"
    again = await client.reply("bet_accepted")
    assert (again["bet_id"], again["balance"]) == ("m-1", client.welcome["balance"] - 100)


@pytest.mark.redis
async def test_a_bet_on_a_damaged_key_is_internal_alone_and_never_placed_twice(
    make_node: NodeFactory, open_client: ClientFactory
) -> None:
    """Issue 16, item 1, over the wire: ten players bet at once and the tenth's in_play key
    has the wrong type. The nine get bet_accepted; the tenth gets error INTERNAL (its ref)
    and nothing is debited, however often it resends; once the key is mended its resend is
    placed once and every resend after that gets the same bet_accepted."""
    node = await make_node(engine="redis", betting_window=600 * SCALE)  # rounds stand still
    store = node.store
    assert isinstance(store, RedisStore)
    clients = [await open_client(node) for _ in range(10)]
    snapshot = await clients[0].join()
    if snapshot["phase"] != "betting":
        await clients[0].event("round_opened")
    round_no = (await store.load_header(TABLE)).round  # type: ignore[union-attr]
    victim = clients[9]
    in_play = store._player_key(victim.welcome["player"], "in_play")
    raw = Redis.from_url(store._url)
    try:
        await raw.hset(in_play, "not", "a number")
        bets = [{**_bet(round_no, f"x-{i}", "player", 100), "ref": i} for i in range(10)]
        await asyncio.gather(*(c.send(b) for c, b in zip(clients, bets, strict=True)))
        for client in clients[:9]:
            assert (await client.reply("bet_accepted"))["balance"] == 999_900
        for _ in range(2):
            failed = await victim.reply("error")
            assert (failed["code"], failed["ref"]) == ("INTERNAL", 9)
            await victim.send(bets[9])
        assert (await victim.reply("error"))["code"] == "INTERNAL"
        assert await store.balance(victim.welcome["player"]) == victim.welcome["balance"]
        await raw.delete(in_play)
        await victim.send(bets[9])
        placed = await victim.reply("bet_accepted")
        await victim.send(bets[9])
        assert await victim.reply("bet_accepted") == placed
        assert placed["balance"] == victim.welcome["balance"] - 100
        assert len(await store.round_bets(TABLE, round_no)) == 10
        assert (await store.ledger()).balanced
    finally:
        await raw.aclose()
