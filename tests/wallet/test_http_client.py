"""The HTTP wallet against the reference wallet over real HTTP on loopback: what goes on the
wire, keep-alive, signatures both ways, and every fault giving an unknown outcome, never a
guess; then a retry or a cancel with the same id settles it."""

from __future__ import annotations

import json
import socket
import time
from collections.abc import AsyncIterator, Callable

import pytest
from aiohttp import web

from server.wallet.base import Answer, Cancel, Credit, Debit, Unknown, WalletUnknown
from server.wallet.demo import Fault, start_wallet
from server.wallet.http_client import HttpWallet
from server.wallet.protocol import Call, Status, encode, sign, signed_headers
from tests.wallet.conftest import SECRET, START, DemoWallet

MakeClient = Callable[..., HttpWallet]
BET = Debit("classic8", 3, "ann", "b-1", "banker", 250)


async def test_calls_post_to_the_url_and_path_then_the_call_name(
    demo: DemoWallet, client: MakeClient
) -> None:
    """`http://h/wallet` -> `http://h/wallet/debit`, the body exactly the call's fields, the
    two headers a valid signature of it."""
    wallet = client()
    assert await wallet.debit(BET) == Answer(Status.OK, START - 250)
    (seen,) = demo.seen
    assert seen.path == "/wallet/debit"
    assert json.loads(seen.body) == {
        "transaction_id": "d:classic8:3:ann:b-1",
        "player": "ann",
        "amount": 250,
        "currency": "EUR",
        "table": "classic8",
        "round": 3,
        "bet_id": "b-1",
        "spot": "banker",
    }
    timestamp = seen.headers["X-Baccarat-Timestamp"]
    assert abs(int(timestamp) - time.time()) < 5
    assert seen.headers["X-Baccarat-Signature"] == sign(SECRET, timestamp, seen.body)
    assert seen.headers["Content-Type"] == "application/json"
    await wallet.balance("ann")
    await wallet.cancel(BET.cancel())
    with pytest.raises(WalletUnknown):  # 409: bob has no such debit
        await wallet.credit(Credit("classic8", 3, "bob", 0, ("d:classic8:3:bob:x",)))
    assert [s.path for s in demo.seen] == [
        "/wallet/debit", "/wallet/balance", "/wallet/cancel", "/wallet/credit",
    ]  # fmt: skip
    assert json.loads(demo.seen[1].body) == {"player": "ann", "currency": "EUR"}


async def test_connections_are_kept_alive_and_pooled(demo: DemoWallet, client: MakeClient) -> None:
    """Ten calls one after another ride one connection."""
    wallet = client()
    for number in range(10):
        await wallet.debit(Debit("t", 1, "ann", f"b{number}", "player", 10))
    assert len(demo.seen) == 10
    assert len(demo.client_ports()) == 1


async def test_a_badly_signed_request_is_refused_401_and_books_nothing(
    demo: DemoWallet, client: MakeClient
) -> None:
    wallet = client(secret=b"another secret of at least 32 bytes!!")
    with pytest.raises(WalletUnknown) as unknown:
        await wallet.debit(BET)
    assert unknown.value.reason is Unknown.HTTP_STATUS
    assert "HTTP 401" in unknown.value.detail and "BAD_SIGNATURE" in unknown.value.detail
    assert demo.book.debits() == [] and demo.book.balance_of("ann") is None


@pytest.mark.parametrize("off", [-31, 31, -3600])
async def test_a_request_more_than_30_s_off_is_refused_and_books_nothing(
    demo: DemoWallet, client: MakeClient, off: float
) -> None:
    wallet = client(clock=lambda: time.time() + off)
    with pytest.raises(WalletUnknown) as unknown:
        await wallet.debit(BET)
    assert "HTTP 401" in unknown.value.detail and "30 s" in unknown.value.detail
    assert demo.book.debits() == []


@pytest.mark.parametrize("off", [-29, 29])
async def test_a_request_within_30_s_is_taken(
    demo: DemoWallet, client: MakeClient, off: float
) -> None:
    assert (await client(clock=lambda: time.time() + off).debit(BET)).ok


async def test_a_stale_answer_is_no_answer_and_the_retry_gets_the_first_one(
    demo: DemoWallet, client: MakeClient
) -> None:
    """This node's clock jumps 40 s ahead while the call is in flight: the wallet's (booked)
    answer is stale when it arrives and counts as none; the retry, same id, gets the first
    answer and the stake is taken once."""
    jump = [0.0, 40.0]  # signing the request, then checking the answer
    wallet = client(clock=lambda: time.time() + (jump.pop(0) if jump else 0.0))
    with pytest.raises(WalletUnknown) as unknown:
        await wallet.debit(BET)
    assert unknown.value.reason is Unknown.SIGNATURE and "30 s" in unknown.value.detail
    assert await wallet.debit(BET) == Answer(Status.OK, START - 250)
    assert demo.book.balance_of("ann") == START - 250


# --- faults -----------------------------------------------------------------------------------


async def test_a_timeout_is_unknown_and_a_cancel_undoes_it(
    demo: DemoWallet, client: MakeClient
) -> None:
    """The wallet booked the debit and never answered: unknown, within the timeout; the
    cancel (same id) gives the stake back."""
    wallet = client(timeout=0.3)
    demo.faults.plan(Call.DEBIT, Fault.TIMEOUT)
    started = time.monotonic()
    with pytest.raises(WalletUnknown) as unknown:
        await wallet.debit(BET)
    assert unknown.value.reason is Unknown.TIMEOUT
    assert unknown.value.call is Call.DEBIT
    assert unknown.value.transaction_id == BET.transaction_id
    assert time.monotonic() - started < 2
    assert demo.book.balance_of("ann") == START - 250  # booked: why the outcome is unknown
    assert await wallet.cancel(BET.cancel()) == Answer(Status.OK, START)
    assert demo.book.balance_of("ann") == START


async def test_a_500_is_unknown_and_the_retry_books_once(
    demo: DemoWallet, client: MakeClient
) -> None:
    wallet = client()
    demo.faults.plan(Call.DEBIT, Fault.ERROR, key=BET.transaction_id)
    with pytest.raises(WalletUnknown) as unknown:
        await wallet.debit(BET)
    assert unknown.value.reason is Unknown.HTTP_STATUS and "HTTP 500" in unknown.value.detail
    assert demo.book.debits() == []  # a 500 before booking
    assert await wallet.debit(BET) == Answer(Status.OK, START - 250)
    assert demo.faults.attempts[(Call.DEBIT, BET.transaction_id)] == 2


async def test_a_late_answer_within_the_timeout_counts(
    demo: DemoWallet, client: MakeClient
) -> None:
    demo.faults.late_s = 0.05
    demo.faults.plan(Call.DEBIT, Fault.LATE)
    assert await client(timeout=2).debit(BET) == Answer(Status.OK, START - 250)


async def test_a_late_answer_past_the_timeout_is_unknown(
    demo: DemoWallet, client: MakeClient
) -> None:
    demo.faults.late_s = 1.0
    demo.faults.plan(Call.CREDIT, Fault.LATE)
    wallet = client(timeout=0.2)
    await wallet.debit(BET)
    credit = Credit("classic8", 3, "ann", 500, (BET.transaction_id,))
    with pytest.raises(WalletUnknown) as unknown:
        await wallet.credit(credit)
    assert unknown.value.reason is Unknown.TIMEOUT
    assert demo.book.credits() == {"c:classic8:3:ann": 500}  # booked, answered too late
    assert await wallet.credit(credit) == Answer(Status.OK, START + 250)
    assert demo.book.balance_of("ann") == START + 250


async def test_a_connection_dropped_after_booking_is_unknown(
    demo: DemoWallet, client: MakeClient
) -> None:
    wallet = client()
    demo.faults.plan(Call.DEBIT, Fault.DROP)
    with pytest.raises(WalletUnknown) as unknown:
        await wallet.debit(BET)
    assert unknown.value.reason is Unknown.CONNECTION
    assert demo.book.balance_of("ann") == START - 250
    assert await wallet.debit(BET) == Answer(Status.OK, START - 250)  # the first answer
    assert demo.book.balance_of("ann") == START - 250


async def test_a_badly_signed_answer_is_no_answer(demo: DemoWallet, client: MakeClient) -> None:
    wallet = client()
    demo.faults.plan(Call.CANCEL, Fault.BAD_SIGNATURE)
    with pytest.raises(WalletUnknown) as unknown:
        await wallet.cancel(BET.cancel())
    assert unknown.value.reason is Unknown.SIGNATURE
    # The wallet booked the cancel (of a debit it never saw): the debit is refused now.
    assert await wallet.debit(BET) == Answer(Status.CANCELLED, START)


async def test_faults_are_planned_per_call_and_per_attempt(
    demo: DemoWallet, client: MakeClient
) -> None:
    """Attempts 1-3 of this debit: 500, dropped, fine; another debit is untouched."""
    wallet = client()
    demo.faults.plan(Call.DEBIT, Fault.ERROR, Fault.DROP, None, key=BET.transaction_id)
    reasons = []
    for _ in range(2):
        with pytest.raises(WalletUnknown) as unknown:
            await wallet.debit(BET)
        reasons.append(unknown.value.reason)
    other = Debit("classic8", 3, "ann", "b-2", "tie", 10)
    assert (await wallet.debit(other)).ok
    assert await wallet.debit(BET) == Answer(Status.OK, START - 250)  # booked by the drop
    assert reasons == [Unknown.HTTP_STATUS, Unknown.CONNECTION]
    assert demo.faults.injected == [
        (Call.DEBIT, BET.transaction_id, Fault.ERROR),
        (Call.DEBIT, BET.transaction_id, Fault.DROP),
    ]
    assert demo.book.balance_of("ann") == START - 260


async def test_a_fault_rate_fails_that_share_of_calls(demo: DemoWallet, client: MakeClient) -> None:
    demo.faults.rate, demo.faults.kinds = 1.0, (Fault.ERROR,)
    with pytest.raises(WalletUnknown):
        await client().balance("ann")
    demo.faults.rate = 0.0
    assert await client().balance("ann") == Answer(Status.OK, START)


async def test_a_wallet_that_is_not_there_is_unknown(client: MakeClient) -> None:
    """Connection refused: unknown, at once (a closed port on loopback)."""
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        port = probe.getsockname()[1]
    wallet = HttpWallet(f"http://127.0.0.1:{port}/w", SECRET)
    try:
        with pytest.raises(WalletUnknown) as unknown:
            await wallet.balance("ann")
        assert unknown.value.reason is Unknown.CONNECTION
    finally:
        await wallet.close()


# --- answers the client cannot know ----------------------------------------------------------


@pytest.fixture
async def scripted() -> AsyncIterator[tuple[str, list[tuple[int, bytes, dict[str, str]]]]]:
    """A wallet that answers what the test lists (status, body, headers), one per call."""
    answers: list[tuple[int, bytes, dict[str, str]]] = []

    async def answer(request: web.Request) -> web.Response:
        await request.read()
        status, body, headers = answers.pop(0)
        return web.Response(status=status, body=body, headers=headers)

    app = web.Application()
    app.router.add_post("/w/{call}", answer)
    runner, port = await start_wallet(app)
    yield f"http://127.0.0.1:{port}/w", answers
    await runner.cleanup()


def _signed(body: object, secret: bytes = SECRET) -> tuple[int, bytes, dict[str, str]]:
    raw = json.dumps(body).encode()
    return 200, raw, signed_headers(secret, raw, time.time())


@pytest.mark.parametrize(
    ("call", "answer", "reason"),
    [
        ("debit", lambda: _signed({"status": "MAYBE", "balance": 5}), Unknown.ANSWER),
        ("credit", lambda: _signed({"status": "INSUFFICIENT_FUNDS", "balance": 5}), Unknown.ANSWER),
        ("cancel", lambda: _signed({"status": "CANCELLED"}), Unknown.ANSWER),
        ("balance", lambda: _signed({"status": "OK"}), Unknown.ANSWER),
        ("debit", lambda: _signed({"status": "OK", "balance": 5.5}), Unknown.ANSWER),
        ("debit", lambda: _signed({"status": "OK", "balance": "5"}), Unknown.ANSWER),
        ("debit", lambda: _signed({"status": "OK", "balance": -1}), Unknown.ANSWER),
        ("debit", lambda: _signed(["OK"]), Unknown.ANSWER),
        ("debit", lambda: (200, b"not json", signed_headers(SECRET, b"not json", time.time())),
         Unknown.ANSWER),
        ("debit", lambda: (200, encode({"status": "OK", "balance": 5}), {}), Unknown.SIGNATURE),
        ("debit", lambda: _signed({"status": "OK", "balance": 5}, b"x" * 32), Unknown.SIGNATURE),
        ("debit", lambda: (201, b"{}", {}), Unknown.HTTP_STATUS),
        ("debit", lambda: (503, b"busy", {}), Unknown.HTTP_STATUS),
        ("credit", lambda: (409, b"{}", {}), Unknown.CONFLICT),
    ],
)  # fmt: skip
async def test_any_answer_but_a_signed_200_with_a_known_status_is_unknown(
    scripted: tuple[str, list[tuple[int, bytes, dict[str, str]]]],
    call: str,
    answer: Callable[[], tuple[int, bytes, dict[str, str]]],
    reason: Unknown,
) -> None:
    url, answers = scripted
    answers.append(answer())  # signed now: a timestamp of collection time may be 30 s old
    wallet = HttpWallet(url, SECRET)
    calls = {
        "debit": lambda: wallet.debit(BET),
        "credit": lambda: wallet.credit(Credit("t", 1, "ann", 5, ("d:t:1:ann:b",))),
        "cancel": lambda: wallet.cancel(Cancel("t", 1, "ann", 5, "d:t:1:ann:b")),
        "balance": lambda: wallet.balance("ann"),
    }
    try:
        with pytest.raises(WalletUnknown) as unknown:
            await calls[call]()
        assert unknown.value.reason is reason
    finally:
        await wallet.close()


async def test_a_refusal_may_leave_the_balance_out(
    scripted: tuple[str, list[tuple[int, bytes, dict[str, str]]]],
) -> None:
    url, answers = scripted
    answers.append(_signed({"status": "PLAYER_BLOCKED"}))
    answers.append(_signed({"status": "LIMIT_EXCEEDED", "balance": None}))
    wallet = HttpWallet(url, SECRET)
    try:
        assert await wallet.debit(BET) == Answer(Status.PLAYER_BLOCKED, None)
        assert await wallet.debit(BET) == Answer(Status.LIMIT_EXCEEDED, None)
    finally:
        await wallet.close()


async def test_every_call_is_observed_with_its_outcome(
    demo: DemoWallet, client: MakeClient
) -> None:
    """The hook /metrics will count by: call, status or unknown reason, seconds."""
    seen: list[tuple[Call, str, float]] = []
    wallet = client(observe=lambda call, outcome, seconds: seen.append((call, outcome, seconds)))
    demo.faults.plan(Call.DEBIT, None, Fault.ERROR)
    await wallet.debit(BET)
    with pytest.raises(WalletUnknown):
        await wallet.debit(Debit("classic8", 3, "ann", "b-2", "banker", 10**9))
    await wallet.debit(Debit("classic8", 3, "ann", "b-3", "banker", 10**9))
    assert [(call, outcome) for call, outcome, _ in seen] == [
        (Call.DEBIT, "OK"), (Call.DEBIT, "http_status"), (Call.DEBIT, "INSUFFICIENT_FUNDS"),
    ]  # fmt: skip
    assert all(0 <= seconds < 5 for _, _, seconds in seen)


@pytest.mark.parametrize(
    ("url", "secret", "currency", "timeout"),
    [
        ("ftp://h/w", SECRET, "EUR", 2.0),
        ("http://h/w/", SECRET, "EUR", 2.0),
        ("http://h/w", b"short", "EUR", 2.0),
        ("http://h/w", SECRET, "eur", 2.0),
        ("http://h/w", SECRET, "EUR", 0.0),
    ],
)
def test_a_wallet_client_with_bad_settings_is_refused(
    url: str, secret: bytes, currency: str, timeout: float
) -> None:
    with pytest.raises(ValueError):
        HttpWallet(url, secret, currency, timeout)
