"""Bets over the wire: acceptance, idempotent retries and every rejection code."""

from __future__ import annotations

from typing import Any

from server.app import Node
from tests.transport.conftest import Client, ClientFactory, NodeFactory, bet_message


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
