"""The operator money API over real HTTP on loopback: tokens, credits and debits, the player's
view, bad input and request bodies (issue 8: "One wallet per player")."""

from __future__ import annotations

import asyncio
import json

import pytest

from server.app import Node
from server.transport.operator_api import MAX_BODY_BYTES, WALLET_IS_EXTERNAL
from tests.transport.conftest import ClientFactory, NodeFactory, ServerLog, within
from tests.transport.http_client import (
    call,
    parse_answer,
    request_bytes,
    send_raw,
    token_for,
)
from tests.transport.test_wallet_bets import bet, open_round
from tests.wallet.conftest import SECRET as WALLET_SECRET
from tests.wallet.conftest import START, MakeDemo

SECRET = "operator-api-test-secret-0123456789abcdef"
CREDIT = "/api/players/alice/credit"
DEBIT = "/api/players/alice/debit"


def _move(amount: object, key: object = "k-1") -> dict[str, object]:
    return {"amount": amount, "idempotency_key": key}


async def _balanced(node: Node) -> None:
    ledger = await node.store.ledger()
    assert ledger.balanced, ledger


# --- who may ---------------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("method", "path", "body"),
    [
        ("GET", "/api/players/alice", None),
        ("POST", CREDIT, _move(5)),
        ("POST", DEBIT, _move(5)),
        ("GET", "/api/tables", None),
        ("POST", "/api/tables/t1/pause", b""),
        ("POST", "/api/tables/t1/resume", b""),
    ],
)
async def test_every_route_needs_an_operator_token(
    make_node: NodeFactory, method: str, path: str, body: object
) -> None:
    """No token or a bad one: 401 (with WWW-Authenticate); a valid player token: 403. Nothing
    moves either way."""
    node = await make_node(secret=SECRET)
    missing = await call(node, method, path, body)
    assert missing.status == 401 and missing.json()["error"] == "unauthorized"
    assert missing.headers["www-authenticate"].startswith("Bearer")
    forged = token_for(node).rsplit(".", 1)[0] + ".AAAA"
    bad = await call(node, method, path, body, token=forged)
    assert bad.status == 401 and "signature" in bad.json()["message"]
    player = await call(node, method, path, body, token=token_for(node, "bob", role="player"))
    assert player.status == 403 and player.json()["error"] == "forbidden"
    assert await node.store.balance("alice") is None
    assert await node.store.paused("t1") is False


async def test_a_token_of_another_secret_is_refused(make_node: NodeFactory) -> None:
    """Operator tokens are checked against the node's secret."""
    node = await make_node(secret=SECRET)
    other = await make_node(secret=SECRET.upper(), node_id="other")
    answer = await call(node, "GET", "/api/tables", token=token_for(other))
    assert answer.status == 401


async def test_repeated_headers_other_than_authorization_are_not_refused(
    make_node: NodeFactory,
) -> None:
    """Two Cookie or X-Forwarded-For lines (a proxy adds its own) do not make the token
    unreadable (they were 401 "the Authorization header must be one 'Bearer <token>'");
    two Authorization lines still are, even with the same token."""
    node = await make_node(secret=SECRET)
    token = token_for(node)
    repeated = [
        ("Cookie", "a=1"),
        ("Cookie", "b=2"),
        ("X-Forwarded-For", "10.0.0.1"),
        ("X-Forwarded-For", "10.0.0.2"),
    ]
    for method, path, body in (("GET", "/api/tables", None), ("POST", CREDIT, _move(5))):
        raw = json.dumps(body).encode() if body else None
        answer = parse_answer(
            await send_raw(node, request_bytes(method, path, raw, token, repeated), admin=True)
        )
        assert answer.status == 200, answer
    twice = request_bytes("GET", "/api/tables", None, token, [("Authorization", f"Bearer {token}")])
    answer = parse_answer(await send_raw(node, twice, admin=True))
    assert answer.status == 401 and "one 'Bearer <token>'" in answer.json()["message"]
    assert await node.store.balance("alice") == 5


# --- money -----------------------------------------------------------------------------------


async def test_a_credit_creates_the_player_at_zero_and_a_key_moves_money_once(
    make_node: NodeFactory, engine: str
) -> None:
    """The first credit creates alice with 0 and credits her; the same key again answers the
    same movement and moves nothing; the ledger counts operator money in and stays balanced."""
    node = await make_node(engine=engine, secret=SECRET)
    token = token_for(node)
    first = await call(node, "POST", CREDIT, _move(500), token)
    assert first.status == 200
    body = first.json()
    assert (body["player"], body["balance"]) == ("alice", 500)
    assert body["movement"]["amount"] == 500 and body["movement"]["idempotency_key"] == "k-1"
    again = await call(node, "POST", CREDIT, _move(500), token)
    assert again.status == 200 and again.json()["balance"] == 500
    assert again.json()["movement"] == body["movement"]
    ledger = await node.store.ledger()
    assert (ledger.operator_in, ledger.operator_out, ledger.issued) == (500, 0, 0)
    await _balanced(node)
    second = await call(node, "POST", CREDIT, _move(250, "k-2"), token)
    assert second.json()["balance"] == 750


async def test_a_debit_beyond_the_balance_is_409_and_moves_nothing(
    make_node: NodeFactory, engine: str
) -> None:
    """A debit past the balance answers 409 with the balance; a smaller one goes through and
    the ledger counts it as operator money out."""
    node = await make_node(engine=engine, secret=SECRET)
    token = token_for(node)
    await call(node, "POST", CREDIT, _move(500, "in"), token)
    short = await call(node, "POST", DEBIT, _move(800, "out-1"), token)
    assert short.status == 409
    assert short.json() == {
        "error": "insufficient_funds",
        "message": short.json()["message"],
        "player": "alice",
        "balance": 500,
    }
    assert await node.store.balance("alice") == 500
    done = await call(node, "POST", DEBIT, _move(200, "out-1"), token)  # the key was not used up
    assert done.status == 200 and done.json()["balance"] == 300
    assert done.json()["movement"]["amount"] == -200
    ledger = await node.store.ledger()
    assert (ledger.operator_in, ledger.operator_out) == (500, 200)
    await _balanced(node)


async def test_credits_that_would_overflow_the_ledger_are_409_on_both_engines(
    make_node: NodeFactory, engine: str
) -> None:
    """Issue 16, item 2: 1,025 credit/debit pairs of 2**53-1 over HTTP. The first 1,024 go
    through; the 1,025th credit would take operator_in past 2**63-1: 409 ledger_limit with a
    one-line reason, the balance untouched and no movement recorded (the same answer on both
    engines), its debit is 409 insufficient_funds, and the ledger stays balanced."""
    node = await make_node(engine=engine, secret=SECRET)
    token = token_for(node)
    top = 2**53 - 1
    for i in range(1024):
        credit = await call(node, "POST", CREDIT, _move(top, f"in-{i}"), token)
        debit = await call(node, "POST", DEBIT, _move(top, f"out-{i}"), token)
        assert (credit.status, debit.status) == (200, 200), (i, credit.body, debit.body)
    refused = await call(node, "POST", CREDIT, _move(top, "in-1024"), token)
    assert refused.status == 409
    assert refused.json() == {
        "error": "ledger_limit",
        "message": "the ledger's operator_in would pass 2**63 - 1; nothing moved",
        "counter": "operator_in",
    }
    short = await call(node, "POST", DEBIT, _move(top, "out-1024"), token)
    assert short.status == 409 and short.json()["error"] == "insufficient_funds"
    player = (await call(node, "GET", "/api/players/alice", token=token)).json()
    assert player["balance"] == 0 and player["movements"][0]["idempotency_key"] == "out-1023"
    ledger = await node.store.ledger()
    assert ledger.operator_in == ledger.operator_out == 1024 * top
    await _balanced(node)


async def test_get_player_shows_balance_and_movements_newest_first(
    make_node: NodeFactory, engine: str
) -> None:
    """GET /api/players/{id}: {"player", "balance", "movements"}; 404 for a player never seen."""
    node = await make_node(engine=engine, secret=SECRET)
    token = token_for(node)
    assert (await call(node, "GET", "/api/players/alice", token=token)).status == 404
    await call(node, "POST", CREDIT, _move(500, "a"), token)
    await call(node, "POST", DEBIT, _move(120, "b"), token)
    view = (await call(node, "GET", "/api/players/alice", token=token)).json()
    assert (view["player"], view["balance"], view["balance_source"]) == ("alice", 380, "store")
    assert [(m["amount"], m["idempotency_key"], m["balance"]) for m in view["movements"]] == [
        (-120, "b", 380),
        (500, "a", 500),
    ]


async def test_a_players_balance_is_the_one_a_connection_sees(
    make_node: NodeFactory,
) -> None:
    """An operator credit lands in the wallet that the player's connections use."""
    node = await make_node(secret=SECRET, initial_balance=1_000)
    await node.store.ensure_player("alice", 1_000)
    answer = await call(node, "POST", CREDIT, _move(500), token_for(node))
    assert answer.json()["balance"] == 1_500 == await node.store.balance("alice")
    await _balanced(node)


async def test_with_an_operators_wallet_money_is_moved_there_not_here(
    make_node: NodeFactory, make_demo: MakeDemo, open_client: ClientFactory, engine: str
) -> None:
    """With --wallet-url the operator's wallet holds the money: credit and debit are 409
    wallet_is_external and move nothing, here or at the wallet (nor create a player);
    GET /api/players/{id} shows the wallet's latest balance (null before any) and says so."""
    demo = await make_demo()
    node = await make_node(
        engine=engine,
        secret=SECRET,
        allow_guests=True,
        wallet_url=demo.url,
        wallet_secret=WALLET_SECRET.decode(),
    )
    token = token_for(node)
    client = await open_client(node)
    player = client.welcome["player"]
    view = (await call(node, "GET", f"/api/players/{player}", token=token)).json()
    assert view == {"player": player, "balance": None, "balance_source": "wallet", "movements": []}
    round_no = await open_round(client)
    assert (await bet(client, round_no, "b-1"))["balance"] == START - 1_000
    for who in (player, "nobody"):
        for kind in ("credit", "debit"):
            path = f"/api/players/{who}/{kind}"
            answer = await call(node, "POST", path, _move(500, f"k-{kind}"), token)
            assert answer.status == 409
            assert answer.json() == {"error": "wallet_is_external", "message": WALLET_IS_EXTERNAL}
    latest = (await client.reply("balance", seconds=10))["balance"]  # the round's credit
    view = (await call(node, "GET", f"/api/players/{player}", token=token)).json()
    assert (view["balance"], view["balance_source"], view["movements"]) == (latest, "wallet", [])
    assert latest == demo.book.balance_of(player)
    assert await node.store.balance(player) == 0 and await node.store.balance("nobody") is None
    assert demo.book.balance_of("nobody") is None
    await _balanced(node)


@pytest.mark.parametrize(
    ("path", "body", "code"),
    [
        (CREDIT, b"not json", "bad_json"),
        (CREDIT, b"[1, 2]", "bad_json"),
        (CREDIT, b"", "bad_json"),
        (CREDIT, b"\xff\xfe", "bad_json"),
        (CREDIT, _move(0), "bad_amount"),
        (CREDIT, _move(-5), "bad_amount"),
        (CREDIT, _move("5"), "bad_amount"),
        (CREDIT, _move(1.5), "bad_amount"),
        (CREDIT, _move(True), "bad_amount"),
        (CREDIT, _move(2**53), "bad_amount"),
        (CREDIT, b'{"amount": ' + b"9" * 5000 + b', "idempotency_key": "k"}', "bad_json"),
        (CREDIT, b'{"amount": -' + b"9" * 33 + b', "idempotency_key": "k"}', "bad_json"),
        (CREDIT, b'{"amount": NaN, "idempotency_key": "k"}', "bad_json"),
        (CREDIT, b'{"amount": Infinity, "idempotency_key": "k"}', "bad_json"),
        (CREDIT, b'{"amount": 1e999, "idempotency_key": "k"}', "bad_amount"),
        (CREDIT, b'{"amount": 5, "idempotency_key": "k", "x": 1' + b"0" * 4400 + b"}", "bad_json"),
        (DEBIT, {"amount": 5}, "bad_idempotency_key"),
        (CREDIT, _move(5, ""), "bad_idempotency_key"),
        (CREDIT, _move(5, 7), "bad_idempotency_key"),
        (CREDIT, _move(5, "k" * 129), "bad_idempotency_key"),
        (CREDIT, _move(5, "new\nline"), "bad_idempotency_key"),
        ("/api/players/a%20b/credit", _move(5), "bad_player"),
        ("/api/players/" + "a" * 65 + "/credit", _move(5), "bad_player"),
    ],
)
async def test_bad_requests_get_400_with_a_code_and_move_nothing(
    make_node: NodeFactory, server_log: ServerLog, path: str, body: object, code: str
) -> None:
    """A bad body, amount, key or player id: 400 {"error": code, "message": ...}, no money.
    An integer of 5,000 digits was a 500 and a traceback (Python's int() refuses more than
    4,300): any number too long to be an amount is a bad body, said in one line."""
    node = await make_node(secret=SECRET)
    answer = await call(node, "POST", path, body, token_for(node))
    assert answer.status == 400
    message = answer.json()["message"]
    assert answer.json()["error"] == code and message and "\n" not in message
    assert len(message) < 200, message
    ledger = await node.store.ledger()
    assert (ledger.operator_in, ledger.operator_out) == (0, 0)
    assert server_log.failures() == []


async def test_unknown_routes_and_wrong_methods(make_node: NodeFactory) -> None:
    """404 for a route that does not exist, 405 (naming the method) for the wrong method."""
    node = await make_node(secret=SECRET)
    token = token_for(node)
    assert (await call(node, "GET", "/api/nothing", token=token)).status == 404
    assert (await call(node, "GET", "/api/players/alice/x", token=token)).status == 404
    wrong = await call(node, "GET", CREDIT, token=token)
    assert wrong.status == 405 and wrong.json()["allow"] == wrong.headers["allow"] == "POST"
    assert (await call(node, "POST", "/api/tables", b"{}", token)).status == 405
    assert (await call(node, "DELETE", "/api/players/alice", token=token)).status == 405


# --- request bodies --------------------------------------------------------------------------


async def test_a_body_in_pieces_and_a_head_byte_by_byte_are_read(make_node: NodeFactory) -> None:
    """The body may arrive after the head, in several writes; so may the head."""
    node = await make_node(secret=SECRET)
    raw = request_bytes("POST", CREDIT, json.dumps(_move(500)).encode(), token_for(node))
    head_end = raw.index(b"\r\n\r\n") + 4
    pieces = [raw[i : i + 1] for i in range(8)] + [raw[8:head_end], raw[head_end:-3], raw[-3:]]
    answer = parse_answer(await send_raw(node, *pieces, admin=True))
    assert answer.status == 200 and answer.json()["balance"] == 500


async def test_a_body_of_the_limit_is_read_and_one_byte_more_is_413(
    make_node: NodeFactory,
) -> None:
    """16 KiB of body are read; a larger Content-Length is refused 413 without reading it."""
    node = await make_node(secret=SECRET)
    token = token_for(node)
    text = json.dumps(_move(500)).encode()
    exact = text + b" " * (MAX_BODY_BYTES - len(text))
    assert (await call(node, "POST", CREDIT, exact, token)).status == 200
    too_big = request_bytes("POST", CREDIT, exact + b" ", token)
    over = parse_answer(await send_raw(node, too_big, admin=True))
    assert over.status == 413 and over.json()["error"] == "body_too_large"
    # Refused on the head alone: the server does not wait for a body it will not read.
    head = request_bytes("POST", CREDIT, None, token, {"Content-Length": str(10**9)})
    assert parse_answer(await send_raw(node, head, admin=True)).status == 413
    assert await node.store.balance("alice") == 500


@pytest.mark.parametrize(
    ("headers", "status"),
    [
        ({"Transfer-Encoding": "chunked"}, 411),
        ({"Content-Length": "ten"}, 400),
        ({"Content-Length": "-1"}, 400),
    ],
)
async def test_chunked_or_unmeasured_bodies_are_refused(
    make_node: NodeFactory, server_log: ServerLog, headers: dict[str, str], status: int
) -> None:
    """A chunked body: 411 in JSON; a malformed Content-Length: 400, from aiohttp's parser
    (in plain text: the request never reaches the API). No log error."""
    node = await make_node(secret=SECRET)
    raw = request_bytes("POST", CREDIT, None, token_for(node), headers) + b"5\r\nhello\r\n0\r\n\r\n"
    answer = parse_answer(await send_raw(node, raw, admin=True))
    assert answer.status == status and answer.body
    if status == 411:
        assert answer.json()["error"] == "length_required"
    assert await node.store.balance("alice") is None
    assert server_log.failures() == []


async def test_a_post_without_a_length_has_no_body(
    make_node: NodeFactory, server_log: ServerLog
) -> None:
    """No Content-Length and no Transfer-Encoding is a bodiless POST (RFC 9112, 6.3), as
    `curl -X POST` sends one: a pause works; a credit is refused for its missing JSON, and
    bytes sent after the head are not read as a body (aiohttp takes them for a malformed next
    request and answers 400)."""
    node = await make_node(secret=SECRET)
    token = token_for(node)
    pause = request_bytes("POST", "/api/tables/t1/pause", None, token)
    assert b"Content-Length" not in pause
    answer = parse_answer(await send_raw(node, pause, admin=True))
    assert answer.status == 200 and answer.json()["paused"] is True
    assert await node.store.paused("t1") is True
    credit = await call(node, "POST", CREDIT, None, token)
    assert credit.status == 400 and credit.json()["error"] == "bad_json"
    raw = request_bytes("POST", CREDIT, None, token) + json.dumps(_move(500)).encode()
    assert parse_answer(await send_raw(node, raw, admin=True)).status == 400
    assert await node.store.balance("alice") is None
    assert server_log.failures() == []


async def test_a_body_that_never_completes_is_cut_off_by_the_handshake_timeout(
    make_node: NodeFactory,
) -> None:
    """A slow body is bounded like a slow handshake (--handshake-timeout): 408, and closed."""
    node = await make_node(secret=SECRET, handshake_timeout=0.2)
    raw = request_bytes("POST", CREDIT, json.dumps(_move(500)).encode(), token_for(node))
    reader, writer = await asyncio.open_connection("127.0.0.1", node.admin_port)
    try:
        writer.write(raw[:-5])  # all but the body's last bytes
        await writer.drain()
        answer = parse_answer(await asyncio.wait_for(reader.read(), within()))
    finally:
        writer.close()
    assert answer.status == 408 and answer.json()["error"] == "body_timeout"
    assert await node.store.balance("alice") is None


async def test_other_posts_and_websockets_are_untouched(
    make_node: NodeFactory, server_log: ServerLog
) -> None:
    """The public port reads no bodies: a GET still works and a POST is refused by websockets
    as before (no answer body of ours, no error logged)."""
    node = await make_node(secret=SECRET)
    assert (await call(node, "GET", "/healthz", admin=False)).status == 200
    raw = await send_raw(node, request_bytes("POST", "/healthz", b"{}"))
    assert b"200 OK" not in raw.split(b"\r\n", 1)[0]
    assert server_log.failures() == []


async def test_operator_requests_are_counted(make_node: NodeFactory) -> None:
    """baccarat_operator_requests{action, status} counts every answer."""
    node = await make_node(secret=SECRET)
    token = token_for(node)
    await call(node, "POST", CREDIT, _move(5), token)
    await call(node, "POST", DEBIT, _move(50, "k-2"), token)
    await call(node, "POST", CREDIT, _move(5))
    text = node.metrics.render().decode()
    assert 'baccarat_operator_requests_total{action="credit",status="200"} 1.0' in text
    assert 'baccarat_operator_requests_total{action="debit",status="409"} 1.0' in text
    assert 'baccarat_operator_requests_total{action="credit",status="401"} 1.0' in text
