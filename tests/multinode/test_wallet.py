"""A site of real `baccarat serve` processes on one Redis against the reference wallet
(`baccarat wallet-demo`, a process of its own, SQLite) over HTTP, with the bots playing:
wallet calls failing 10 % of the time and a node killed with SIGKILL mid-round; then, at the
wallet, the books must match every round exactly (docs/wallet.md)."""

from __future__ import annotations

import asyncio
import json
import os
import re
import secrets
import signal
import sys
from collections.abc import AsyncIterator
from pathlib import Path

import pytest

from server.wallet.demo import Book
from tests.multinode.conftest import StartNode
from tests.multinode.nodes import SCALE

START = 1_000_000  # what the wallet gives a player it has not seen
_SERVING = re.compile(r"serving on http://[\d.]+:(\d+)")


async def start_wallet(
    db: Path, secret: str, *extra: str
) -> tuple[asyncio.subprocess.Process, str]:
    argv = [sys.executable, "-m", "server.cli", "wallet-demo", "--port", "0", "--db", str(db)]
    env = {**os.environ, "BACCARAT_WALLET_SECRET": secret}
    proc = await asyncio.create_subprocess_exec(
        *argv, *extra, env=env, stderr=asyncio.subprocess.PIPE, stdout=asyncio.subprocess.DEVNULL
    )
    assert proc.stderr is not None
    async with asyncio.timeout(15 * SCALE):
        while not (match := _SERVING.search((await proc.stderr.readline()).decode())):
            pass
    return proc, f"http://127.0.0.1:{match.group(1)}"


@pytest.fixture
async def wallet_secret() -> AsyncIterator[str]:
    secret = secrets.token_hex(32)
    previous = os.environ.get("BACCARAT_WALLET_SECRET")
    os.environ["BACCARAT_WALLET_SECRET"] = secret  # the nodes read it from their environment
    yield secret
    if previous is None:
        os.environ.pop("BACCARAT_WALLET_SECRET", None)
    else:
        os.environ["BACCARAT_WALLET_SECRET"] = previous


def check_books(book: Book) -> list[str]:
    """What the wallet's books must say once every round is settled: each debit in exactly
    one credit or cancelled, and each balance START - standing stakes + credits."""
    problems = []
    credits = book.credits()
    players: dict[str, int] = {}
    for debit in book.debits():
        players.setdefault(debit.player, START)
        if debit.state == "credited":
            assert debit.credit_id is not None
            if debit.credit_id not in credits:
                problems.append(f"{debit.transaction_id} is in no credit")
            players[debit.player] -= debit.amount
        elif debit.state != "cancelled":
            problems.append(f"{debit.transaction_id} is {debit.state}")
    for credit, amount in credits.items():
        players[credit.split(":")[3]] += amount
    for player, expected in players.items():
        if book.balance_of(player) != expected:
            problems.append(
                f"{player}: balance {book.balance_of(player)}, the books say {expected}"
            )
    return problems


async def settled(book: Book, seconds: float) -> None:
    async with asyncio.timeout(seconds * SCALE):
        while any(d.state == "standing" for d in book.debits()):  # noqa: ASYNC110 - SQLite
            await asyncio.sleep(0.2)


async def test_faults_and_a_killed_sender_leave_exact_books(
    start_node: StartNode, tmp_path: Path, wallet_secret: str
) -> None:
    """2 nodes, bots on one, wallet calls failing 10 % of the time (every fault kind), and
    the table's owner (which also sends the outbox) killed with SIGKILL mid-round: the bots see
    0 mismatches (payouts and balances), and the wallet's books match every round."""
    db = tmp_path / "wallet.sqlite3"
    faults = ("--fault-rate", "0.1", "--fault-seed", "19", "--fault-late", "1")
    wallet, url = await start_wallet(db, wallet_secret, *faults)
    options = {"--wallet-url": url, "--wallet-timeout": "0.5", "--betting-window": "1.0"}
    try:
        owner = await start_node("n1", **options)
        await owner.wait_for_log("table_owned")
        server = await start_node("n2", **options)
        report = tmp_path / "bots.json"
        bots = await asyncio.create_subprocess_exec(
            sys.executable, "-m", "server.cli", "bots", "--url", server.url, "--bots", "4",
            "--rounds", "8", "--wallet", "--quiet", "--grace", "40", "--seed", "5",
            "--report", str(report), stdout=asyncio.subprocess.DEVNULL,
        )  # fmt: skip
        await asyncio.sleep(4 * SCALE)  # a few rounds, with credits going out
        owner.signal(signal.SIGKILL)
        async with asyncio.timeout(90 * SCALE):
            await bots.wait()
        outcome = json.loads(report.read_text())
        assert outcome["mismatches"] == 0, outcome["problems"]
        assert outcome["settlements"] > 0 and outcome["payouts_checked"] > 0
        await settled(Book(db), 30)
        assert check_books(Book(db)) == []
        assert any(d.state == "cancelled" for d in Book(db).debits())  # faults were met
    finally:
        wallet.send_signal(signal.SIGTERM)
        await wallet.wait()
