"""Bets and settlements against a real operator's wallet over HTTP (the reference wallet,
server/wallet/demo.py, with faults per call and per attempt), on both store engines: the
bet's answers, then, at the wallet, the books as they must end (docs/wallet.md)."""

from __future__ import annotations

import asyncio
from pathlib import Path
from typing import Any

import pytest

from server.app import Node
from server.cli import main
from server.core.errors import NotEnoughCards
from server.core.table import TableState
from server.runtime import table_loop
from server.store.pending import wallet_pending
from server.wallet.demo import Book, Fault, Faults, start_wallet, wallet_app
from server.wallet.protocol import Call, debit_id
from tests.transport.conftest import (
    TABLE,
    Client,
    ClientFactory,
    NodeFactory,
    bet_message,
    within,
)
from tests.wallet.conftest import SECRET, START, DemoWallet, MakeDemo

TIMEOUT = 0.5  # --wallet-timeout of these nodes: a hung call is unknown this soon


async def wallet_node(make_node: NodeFactory, demo: DemoWallet, engine: str, **over: Any) -> Node:
    return await make_node(
        engine=engine,
        wallet_url=demo.url,
        wallet_secret=SECRET.decode(),
        wallet_timeout=TIMEOUT,
        **over,
    )


async def open_round(client: Client) -> int:
    """Join and wait for a round to open; its number."""
    await client.join()
    opened = await client.event("round_opened")
    return int(opened["round"])


async def bet(client: Client, round_no: int, bet_id: str, amount: int = 1_000) -> dict[str, Any]:
    await client.send(bet_message(round_no, bet_id, "banker", amount))
    return await client.expect(
        lambda m: m["type"] in ("bet_accepted", "bet_rejected") and m["bet_id"] == bet_id
    )


async def settled_books(node: Node, book: Book, player: str, seconds: float = 10.0) -> None:
    """Wait until the node's outbox is empty and every debit of the player is credited or
    cancelled at the wallet."""
    async with asyncio.timeout(within(seconds)):
        while await node.store.outbox_entries() or any(  # noqa: ASYNC110 - books, no event
            d.state == "standing" for d in book.debits() if d.player == player
        ):
            await asyncio.sleep(0.05)


def expected_balance(book: Book, player: str) -> int:
    """START - stakes of standing (credited) debits + their credits."""
    debits = [d for d in book.debits() if d.player == player]
    staked = sum(d.amount for d in debits if d.booked and d.state == "credited")
    credits = {d.credit_id for d in debits if d.credit_id}
    return START - staked + sum(book.credits()[c] for c in credits)


async def test_a_bet_is_debited_recorded_and_credited(
    make_node: NodeFactory, make_demo: MakeDemo, open_client: ClientFactory, engine: str
) -> None:
    """welcome has the wallet's balance; the bet is debited (bet_accepted with the wallet's
    balance), the round's one credit lists it, and a balance message follows the settlement."""
    demo = await make_demo()
    node = await wallet_node(make_node, demo, engine)
    client = await open_client(node)
    player = client.welcome["player"]
    assert client.welcome["balance"] == START
    round_no = await open_round(client)
    accepted = await bet(client, round_no, "b-1")
    assert accepted["type"] == "bet_accepted" and accepted["balance"] == START - 1_000
    settlement = await client.expect(lambda m: m["type"] == "settlement")
    balance = await client.reply("balance")
    await settled_books(node, demo.book, player)
    assert balance["balance"] == demo.book.balance_of(player) == expected_balance(demo.book, player)
    credit = f"c:{TABLE}:{round_no}:{player}"
    assert demo.book.credits()[credit] == sum(p["credit"] for p in settlement["payouts"])
    assert await node.store.outbox_entries() == []


@pytest.mark.parametrize(
    ("status", "setup"),
    [
        ("INSUFFICIENT_FUNDS", {"balance": 500}),
        ("PLAYER_BLOCKED", {"balance": START, "blocked": True}),
        ("LIMIT_EXCEEDED", {"balance": START, "stake_limit": 999}),
    ],
)
async def test_a_refused_debit_is_rejected_with_the_wallets_status(
    make_node: NodeFactory,
    make_demo: MakeDemo,
    open_client: ClientFactory,
    engine: str,
    status: str,
    setup: dict[str, Any],
) -> None:
    """The wallet's refusal is the bet_rejected code; nothing is held or cancelled."""
    demo = await make_demo()
    node = await wallet_node(make_node, demo, engine)
    client = await open_client(node)
    player = client.welcome["player"]
    demo.book.set_player(player, **setup)
    round_no = await open_round(client)
    rejected = await bet(client, round_no, "b-1")
    assert rejected["type"] == "bet_rejected" and rejected["code"] == status
    assert await node.store.outbox_entries() == []
    assert all(call != Call.CANCEL for call, _ in demo.faults.attempts)


@pytest.mark.parametrize("fault", [Fault.TIMEOUT, Fault.ERROR, Fault.DROP, Fault.BAD_SIGNATURE])
async def test_a_debit_without_answer_is_refused_and_cancelled(
    make_node: NodeFactory,
    make_demo: MakeDemo,
    open_client: ClientFactory,
    engine: str,
    fault: Fault,
) -> None:
    """No answer (a timeout, a 500, a dropped connection, a bad signature): the bet is
    WALLET_UNAVAILABLE, the same bet_id sent again in the round is CANCELLED, and the debit's
    cancel reaches the wallet: the stake is back if it was taken."""
    demo = await make_demo()
    demo.faults.hang_s = 3 * TIMEOUT
    node = await wallet_node(make_node, demo, engine, betting_window=3.0)
    client = await open_client(node)
    player = client.welcome["player"]
    round_no = await open_round(client)
    demo.faults.plan(Call.DEBIT, fault)
    rejected = await bet(client, round_no, "b-1")
    assert rejected["type"] == "bet_rejected" and rejected["code"] == "WALLET_UNAVAILABLE"
    again = await bet(client, round_no, "b-1")
    assert again["type"] == "bet_rejected" and again["code"] == "CANCELLED"
    await settled_books(node, demo.book, player)
    tx = debit_id(TABLE, round_no, player, "b-1")
    [debit] = [d for d in demo.book.debits() if d.transaction_id == tx]
    assert debit.state == "cancelled" and debit.booked is (fault is not Fault.ERROR)
    assert demo.book.balance_of(player) == START
    accepted = await bet(client, round_no, "b-2")  # the wallet is fine again
    assert accepted["type"] == "bet_accepted" and accepted["balance"] == START - 1_000


async def test_a_late_debit_is_cancelled_and_refused_as_late(
    make_node: NodeFactory, make_demo: MakeDemo, open_client: ClientFactory, engine: str
) -> None:
    """A debit answered OK after the window closed: BETTING_CLOSED, and cancelled."""
    demo = await make_demo()
    demo.faults.late_s = 0.45  # past the 0.4 s window, within the 0.5 s timeout
    node = await wallet_node(make_node, demo, engine)
    client = await open_client(node)
    player = client.welcome["player"]
    round_no = await open_round(client)
    demo.faults.plan(Call.DEBIT, Fault.LATE)
    rejected = await bet(client, round_no, "late")
    assert rejected["type"] == "bet_rejected" and rejected["code"] == "BETTING_CLOSED"
    await settled_books(node, demo.book, player)
    [debit] = demo.book.debits()
    assert debit.booked and debit.state == "cancelled"
    assert demo.book.balance_of(player) == START


async def test_credits_are_retried_until_acknowledged(
    make_node: NodeFactory, make_demo: MakeDemo, open_client: ClientFactory, engine: str
) -> None:
    """A credit that fails (500, then a timeout, then a dropped answer) is sent again with the
    same id until the wallet answers; it moves money once; then the balance message comes."""
    demo = await make_demo()
    demo.faults.hang_s = 3 * TIMEOUT
    demo.faults.plan(Call.CREDIT, Fault.ERROR, Fault.TIMEOUT, Fault.DROP)
    node = await wallet_node(make_node, demo, engine)
    client = await open_client(node)
    player = client.welcome["player"]
    round_no = await open_round(client)
    assert (await bet(client, round_no, "b-1"))["type"] == "bet_accepted"
    await client.expect(lambda m: m["type"] == "settlement")
    balance = await client.reply("balance", seconds=15)
    assert balance["balance"] == demo.book.balance_of(player) == expected_balance(demo.book, player)
    credit = f"c:{TABLE}:{round_no}:{player}"
    assert demo.faults.attempts[(Call.CREDIT, credit)] == 4


async def test_a_bet_id_with_a_colon_is_refused(
    make_node: NodeFactory, make_demo: MakeDemo, open_client: ClientFactory
) -> None:
    """With an HTTP wallet a bet_id may not contain ':' (its debit's id would be ambiguous)."""
    demo = await make_demo()
    node = await wallet_node(make_node, demo, "memory")
    client = await open_client(node)
    round_no = await open_round(client)
    rejected = await bet(client, round_no, "a:b")
    assert rejected["type"] == "bet_rejected" and rejected["code"] == "BAD_BET_ID"
    assert demo.seen == [s for s in demo.seen if not s.path.endswith("/debit")]


async def test_a_hold_left_by_a_dead_node_is_cancelled(
    make_node: NodeFactory, make_demo: MakeDemo, open_client: ClientFactory, engine: str
) -> None:
    """A debit held and sent, whose node never records nor releases it (it died), is
    cancelled by the outbox once the hold is due."""
    demo = await make_demo()
    node = await wallet_node(make_node, demo, engine)
    client = await open_client(node)
    player = client.welcome["player"]
    round_no = await open_round(client)
    held = await node.store.hold_debit(TABLE, player, round_no, "lost", "banker", 700, 300)
    assert held is None
    assert node.wallet is not None
    from server.wallet.base import Debit

    debit = Debit(TABLE, round_no, player, "lost", "banker", 700)
    assert (await node.wallet.wallet.debit(debit)).balance == START - 700
    await settled_books(node, demo.book, player)
    assert demo.book.balance_of(player) == START


def _void_round(monkeypatch: pytest.MonkeyPatch, how: str, round_no: int) -> None:
    """Make the table loop void `round_no` once betting closes: the shoe cannot finish its
    coup (TableLoop._void), or dealing fails until the table is restarted (_restart)."""
    name = "coup_of" if how == "shoe_short" else "deal_next_card"
    real = getattr(table_loop, name)

    def failing(state: TableState) -> Any:
        if state.round == round_no:
            raise NotEnoughCards("rigged by the test") if how == "shoe_short" else RuntimeError
        return real(state)

    monkeypatch.setattr(table_loop, name, failing)


@pytest.mark.parametrize("how", ["shoe_short", "wedged"])
async def test_a_voided_round_cancels_each_debit_and_credits_nothing(
    make_node: NodeFactory,
    make_demo: MakeDemo,
    open_client: ClientFactory,
    engine: str,
    monkeypatch: pytest.MonkeyPatch,
    how: str,
) -> None:
    """Issue 19: "A voided round gets a cancel per debit and no credit." Two players bet (one
    twice) through the wallet; the round is voided: at the wallet each of its debits is
    cancelled, sent once, no credit of the round is sent, every balance is back to its start
    and `wallet-pending` lists nothing."""
    demo = await make_demo()
    node = await wallet_node(make_node, demo, engine, betting_window=1.0)
    alice, bob = await open_client(node), await open_client(node)
    players = [alice.welcome["player"], bob.welcome["player"]]
    round_no = await open_round(alice)
    await bob.join()
    _void_round(monkeypatch, how, round_no)
    stakes = [(alice, "a-1", 1_000), (alice, "a-2", 300), (bob, "b-1", 700)]
    for client, bet_id, amount in stakes:
        assert (await bet(client, round_no, bet_id, amount))["type"] == "bet_accepted"
    voided = await alice.event("round_voided", round_no - 1, seconds=10)
    assert voided["round"] == round_no
    for player in players:
        await settled_books(node, demo.book, player)
    monkeypatch.undo()
    debits = {
        debit_id(TABLE, round_no, client.welcome["player"], bet_id): amount
        for client, bet_id, amount in stakes
    }
    booked = {d.transaction_id: d for d in demo.book.debits() if d.round == round_no}
    assert set(booked) == set(debits)
    for tx, amount in debits.items():
        debit = booked[tx]
        assert (debit.amount, debit.booked, debit.state) == (amount, True, "cancelled")
        assert demo.faults.attempts[(Call.CANCEL, tx)] == 1
    assert not [
        tx for call, tx in demo.faults.attempts if call is Call.CREDIT and f":{round_no}:" in tx
    ]
    assert demo.book.credits() == {}
    assert [demo.book.balance_of(p) for p in players] == [START, START]
    assert await wallet_pending(node.store, TABLE) == []
    assert await node.store.outbox_entries() == []


DOWN_S = 10.0  # the "down for 2 minutes", shortened: the backoff reaches 8 s by then


async def test_a_wallet_down_for_a_while(
    make_node: NodeFactory, open_client: ClientFactory, engine: str, tmp_path: Path
) -> None:
    """While the wallet is down (DOWN_S) every bet is WALLET_UNAVAILABLE and rounds go on;
    once it is back, the credit owed from before arrives (and its balance message)."""
    book = Book(tmp_path / "wallet.sqlite3", START)
    runner, port = await start_wallet(wallet_app(book, SECRET))
    demo = DemoWallet(f"http://127.0.0.1:{port}", book, Faults())
    try:
        node = await wallet_node(make_node, demo, engine)
        client = await open_client(node, max_queue=None)  # it reads nothing for a while
        player = client.welcome["player"]
        round_no = await open_round(client)
        assert (await bet(client, round_no, "before"))["type"] == "bet_accepted"
        await runner.cleanup()
        down_at = asyncio.get_running_loop().time()
        settled = (await client.event("round_settled", round_no - 1))["round"]
        assert settled == round_no
        rejected = set()
        while asyncio.get_running_loop().time() - down_at < DOWN_S:
            opened = await client.event("round_opened", settled, seconds=10)
            answer = await bet(client, opened["round"], f"down-{opened['round']}")
            rejected.add(answer.get("code"))
            settled = (await client.event("round_settled", opened["round"] - 1))["round"]
        assert rejected == {"WALLET_UNAVAILABLE"}
        assert book.credits() == {}
        runner, _ = await start_wallet(wallet_app(book, SECRET), port=port)
        await settled_books(node, book, player, seconds=20)
        final = expected_balance(book, player)
        assert book.balance_of(player) == final
        assert list(book.credits()) == [f"c:{TABLE}:{round_no}:{player}"]
        await client.expect(lambda m: m["type"] == "balance" and m["balance"] == final)
    finally:
        await runner.cleanup()
        book.close()


@pytest.mark.redis
async def test_wallet_pending_lists_what_the_wallet_may_hold(
    make_node: NodeFactory,
    make_demo: MakeDemo,
    open_client: ClientFactory,
    redis_url: str,
    capsys: pytest.CaptureFixture[str],
) -> None:
    """`baccarat wallet-pending --redis` lists a debit in flight and one in play, by table;
    once the round is settled and its credit acknowledged, nothing."""
    demo = await make_demo()
    node = await wallet_node(make_node, demo, "redis", betting_window=2.0)
    client = await open_client(node)
    player = client.welcome["player"]
    round_no = await open_round(client)
    assert (await bet(client, round_no, "b-1"))["type"] == "bet_accepted"
    await node.store.hold_debit(TABLE, player, round_no, "b-2", "tie", 100, 60_000)
    prefix = node.store.key_prefix  # type: ignore[attr-defined]
    argv = ["wallet-pending", "--redis", redis_url, "--key-prefix", prefix, "--table", TABLE]
    assert await asyncio.to_thread(main, argv) == 0
    lines = [line for line in capsys.readouterr().out.splitlines() if line.startswith("d:")]
    assert sorted(line.split()[:2] for line in lines) == [
        [debit_id(TABLE, round_no, player, "b-1"), "in_play"],
        [debit_id(TABLE, round_no, player, "b-2"), "in_flight"],
    ]
    await node.store.release_debit(TABLE, player, round_no, "b-2", cancel=False)
    await client.expect(lambda m: m["type"] == "balance", seconds=10)
    assert await asyncio.to_thread(main, argv) == 0
    assert not [line for line in capsys.readouterr().out.splitlines() if line.startswith("d:")]
