"""The reference wallet on its own: raw signed HTTP requests, its refusals, its durable and
idempotent books, and `baccarat wallet-demo` as a process."""

from __future__ import annotations

import asyncio
import json
import os
import signal
import sys
import time
from pathlib import Path
from typing import Any

import aiohttp
import pytest

from server.wallet.base import Answer, Debit
from server.wallet.demo import Book, Fault, Faults
from server.wallet.http_client import HttpWallet
from server.wallet.protocol import Call, Status, signed_headers
from tests.wallet.conftest import SECRET, START, DemoWallet

BACCARAT = Path(sys.executable).parent / "baccarat"
DEBIT: dict[str, Any] = {
    "transaction_id": "d:t1:5:ann:b1", "player": "ann", "amount": 100, "currency": "EUR",
    "table": "t1", "round": 5, "bet_id": "b1", "spot": "player",
}  # fmt: skip


async def post(
    demo: DemoWallet, call: str, body: object, headers: dict[str, str] | None = None
) -> tuple[int, dict[str, Any]]:
    raw = body if isinstance(body, bytes) else json.dumps(body).encode()
    sent = signed_headers(SECRET, raw, time.time()) if headers is None else headers
    async with (
        aiohttp.ClientSession() as session,
        session.post(f"{demo.url}/{call}", data=raw, headers=sent) as answer,
    ):
        return answer.status, json.loads(await answer.read())


async def test_a_repeated_call_gets_the_first_answer_byte_for_byte(demo: DemoWallet) -> None:
    assert await post(demo, "debit", DEBIT) == (200, {"status": "OK", "balance": START - 100})
    await post(demo, "debit", {**DEBIT, "transaction_id": "d:t1:5:ann:b2", "bet_id": "b2"})
    assert await post(demo, "debit", DEBIT) == (200, {"status": "OK", "balance": START - 100})
    assert demo.book.balance_of("ann") == START - 200


@pytest.mark.parametrize(
    ("call", "body", "status", "error"),
    [
        ("debit", {**DEBIT, "amount": 101}, 409, "TRANSACTION_MISMATCH"),
        ("debit", b"{not json", 400, "BAD_JSON"),
        ("debit", [1, 2], 400, "BAD_JSON"),
        ("debit", {**DEBIT, "extra": 1}, 400, "UNKNOWN_FIELD"),
        ("debit", {k: v for k, v in DEBIT.items() if k != "spot"}, 400, "MISSING_FIELD"),
        ("debit", {**DEBIT, "amount": 1.5}, 400, "BAD_AMOUNT"),
        ("debit", {**DEBIT, "amount": "100"}, 400, "BAD_AMOUNT"),
        ("debit", {**DEBIT, "amount": 0}, 400, "BAD_AMOUNT"),
        ("debit", {**DEBIT, "spot": "dragon"}, 400, "BAD_FIELD"),
        ("debit", {**DEBIT, "currency": "USD"}, 400, "BAD_CURRENCY"),
        ("debit", {**DEBIT, "currency": "eur"}, 400, "BAD_CURRENCY"),
        ("debit", {**DEBIT, "transaction_id": "d:t1:5:ann:b9"}, 400, "BAD_TRANSACTION_ID"),
        ("cancel", {k: v for k, v in DEBIT.items() if k not in ("bet_id", "spot")} | {
            "amount": 99}, 409, "TRANSACTION_MISMATCH"),
        ("cancel", DEBIT, 400, "UNKNOWN_FIELD"),  # a debit's signed body replayed as a cancel
        ("refund", DEBIT, 404, "UNKNOWN_CALL"),
    ],
)  # fmt: skip
async def test_a_request_it_cannot_take_is_refused_and_books_nothing(
    demo: DemoWallet, call: str, body: object, status: int, error: str
) -> None:
    await post(demo, "debit", DEBIT)
    got = await post(demo, call, body)
    assert got[0] == status and got[1]["error"] == error and got[1]["message"]
    assert demo.book.balance_of("ann") == START - 100
    assert [d.transaction_id for d in demo.book.debits()] == [DEBIT["transaction_id"]]


@pytest.mark.parametrize(
    "headers",
    [
        {},
        {"X-Baccarat-Timestamp": str(int(time.time()))},
        {"X-Baccarat-Timestamp": "soon", "X-Baccarat-Signature": "00"},
        {"X-Baccarat-Timestamp": str(int(time.time())), "X-Baccarat-Signature": "00" * 32},
    ],
)
async def test_an_unsigned_or_badly_signed_request_is_401(
    demo: DemoWallet, headers: dict[str, str]
) -> None:
    status, body = await post(demo, "debit", DEBIT, headers)
    assert (status, body["error"]) == (401, "BAD_SIGNATURE")
    assert demo.book.debits() == []


async def test_answers_are_signed(demo: DemoWallet) -> None:
    """Refusals too: the wallet signs every answer with the shared secret."""
    from server.wallet.protocol import check_signature

    async with (
        aiohttp.ClientSession() as session,
        session.post(f"{demo.url}/debit", data=b"{}", headers=signed_headers(
            SECRET, b"{}", time.time())) as answer,
    ):  # fmt: skip
        raw = await answer.read()
        check_signature(
            SECRET,
            answer.headers["X-Baccarat-Timestamp"],
            answer.headers["X-Baccarat-Signature"],
            raw,
            time.time(),
        )
        assert answer.status == 400


async def test_blocked_and_limited_players_are_refused(demo: DemoWallet) -> None:
    wallet = HttpWallet(demo.url, SECRET)
    try:
        demo.book.set_player("ann", 500, blocked=True)
        demo.book.set_player("bob", 500, stake_limit=50)
        bet = Debit("t1", 1, "ann", "b1", "tie", 10)
        assert await wallet.debit(bet) == Answer(Status.PLAYER_BLOCKED, 500)
        assert await wallet.debit(Debit("t1", 1, "bob", "b1", "tie", 51)) == Answer(
            Status.LIMIT_EXCEEDED, 500
        )
        assert await wallet.debit(Debit("t1", 1, "bob", "b2", "tie", 50)) == Answer(Status.OK, 450)
    finally:
        await wallet.close()


def test_the_books_are_durable(tmp_path: Path) -> None:
    """Closed and opened again, the file has every balance, debit and first answer."""
    path = tmp_path / "books.sqlite3"
    book = Book(path, initial_balance=1_000)
    first = book.handle(Call.DEBIT, DEBIT)  # type: ignore[arg-type]
    book.close()
    again = Book(path, initial_balance=5)
    try:
        assert again.handle(Call.DEBIT, DEBIT) == first == {"status": "OK", "balance": 900}  # type: ignore[arg-type]
        assert again.balance_of("ann") == 900
        assert again.balance_of("new") is None
        assert again.handle(Call.BALANCE, {"player": "new", "currency": "EUR"}) == {
            "status": "OK", "balance": 5,
        }  # fmt: skip
    finally:
        again.close()


def test_faults_follow_the_plan_then_the_rate() -> None:
    faults = Faults(rate=0.5, kinds=(Fault.TIMEOUT,), seed=7)
    faults.plan(Call.CREDIT, Fault.ERROR, None, key="c:1")
    faults.plan(Call.CREDIT, Fault.LATE)
    picked = [faults.pick(Call.CREDIT, "c:1") for _ in range(3)]
    assert picked[:3] == [Fault.ERROR, None, Fault.LATE]
    rolled = [faults.pick(Call.DEBIT, f"d:{n}") for n in range(200)]
    assert set(rolled) == {None, Fault.TIMEOUT}
    assert 60 < rolled.count(Fault.TIMEOUT) < 140
    assert faults.attempts[(Call.CREDIT, "c:1")] == 3
    with pytest.raises(ValueError):
        Faults(rate=1.5)


# --- baccarat wallet-demo --------------------------------------------------------------------


async def test_the_command_serves_the_wallet_until_sigterm(tmp_path: Path) -> None:
    """`baccarat wallet-demo --port 0 ...` says where it serves, answers signed calls from its
    SQLite file, and stops on SIGTERM with status 0; the books stay in the file."""
    db = tmp_path / "w.sqlite3"
    env = {k: v for k, v in os.environ.items() if not k.startswith("BACCARAT_")}
    env["BACCARAT_WALLET_SECRET"] = SECRET.decode()
    process = await asyncio.create_subprocess_exec(
        str(BACCARAT), "wallet-demo", "--port", "0", "--db", str(db),
        "--initial-balance", "777", "--currency", "USD",
        env=env, stderr=asyncio.subprocess.PIPE,
    )  # fmt: skip
    assert process.stderr is not None
    try:
        async with asyncio.timeout(30):
            line = (await process.stderr.readline()).decode()
        assert line.startswith("baccarat wallet-demo: serving on http://127.0.0.1:"), line
        url = line.split()[4]
        wallet = HttpWallet(url, SECRET, currency="USD")
        try:
            assert await wallet.balance("zoe") == Answer(Status.OK, 777)
            assert await wallet.debit(Debit("t", 1, "zoe", "b", "tie", 7)) == Answer(Status.OK, 770)
        finally:
            await wallet.close()
    finally:
        process.send_signal(signal.SIGTERM)
        async with asyncio.timeout(30):
            status = await process.wait()
    assert status == 0
    book = Book(db)
    try:
        assert book.balance_of("zoe") == 770
    finally:
        book.close()


@pytest.mark.parametrize(
    ("args", "message"),
    [
        ([], "no secret"),
        (["--secret", "short"], "at least 32"),
        (["--secret", "./missing-secret-file"], "no wallet secret file"),
        (["--secret", "x" * 32, "--currency", "euro"], "--currency must be three"),
        (["--secret", "x" * 32, "--fault-rate", "2"], "fault rate"),
        (["--secret", "x" * 32, "--port", "70000"], "--port"),
    ],
)
def test_a_bad_setting_stops_the_command_in_one_line(
    args: list[str],
    message: str,
    capsys: pytest.CaptureFixture[str],
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    from server.cli import main

    monkeypatch.delenv("BACCARAT_WALLET_SECRET", raising=False)
    assert main(["wallet-demo", *args]) == 2
    out, err = capsys.readouterr()
    assert out == "" and len(err.splitlines()) == 1
    assert err.startswith("baccarat wallet-demo: ") and message in err
