"""Players who stay themselves (issue 8), over real WebSockets on both engines: tokens admitted
or refused at the handshake, guests who come back with their token, one wallet for every
connection of a player (and every node), resume after a drop, spectators, the per-player cap,
game recall, and guests that leave Redis no bigger once they expire."""

from __future__ import annotations

import asyncio
import contextlib
import uuid
from collections.abc import AsyncIterator, Awaitable, Callable
from typing import Any
from urllib.parse import urlencode

import pytest
from websockets.asyncio.client import connect
from websockets.datastructures import HeadersLike
from websockets.exceptions import InvalidStatus
from websockets.typing import Subprotocol

from server.app import Node
from server.auth import mint_token
from server.config import Settings
from server.wire.codec import Encoding
from server.wire.shape_check import message_problems
from tests.redis_server import delete_keys
from tests.transport.conftest import FAST, TABLE, Client, Message, NodeFactory, bet_message, within

pytestmark = pytest.mark.timeout(60)

SECRET = "s" * 40  # shared by every node of a test that configures one
FUNDS = 100_000


Dial = Callable[..., Awaitable[Client]]


@pytest.fixture
async def dial() -> AsyncIterator[Dial]:
    """Connect to a node's /ws with query parameters and headers; read the welcome."""
    async with contextlib.AsyncExitStack() as stack:

        async def factory(node: Node, headers: HeadersLike | None = None, **query: str) -> Client:
            url = f"ws://127.0.0.1:{node.port}/ws"
            if query:
                url += "?" + urlencode(query)
            ws = await stack.enter_async_context(
                connect(
                    url,
                    subprotocols=[Subprotocol(Encoding.JSON.value)],
                    additional_headers=headers,
                    open_timeout=within(),
                    # Never stop reading: a joined client left unread would fill a bounded
                    # queue, leave the server's close frame unread and make its close wait
                    # out the close timeout (10 s).
                    max_queue=None,
                )
            )
            client = Client(ws)
            client.welcome = await client.reply("welcome")
            return client

        yield factory


async def _refusal(node: Node, headers: dict[str, str] | None = None, **query: str) -> Any:
    url = f"ws://127.0.0.1:{node.port}/ws" + ("?" + urlencode(query) if query else "")
    with pytest.raises(InvalidStatus) as refused:
        async with connect(url, additional_headers=headers, open_timeout=within()):
            pass
    return refused.value.response


_bet = bet_message


async def _bet_next_round(client: Client, bet_id: str, amount: int = 1_000) -> Message:
    """On a joined client: wait for the next round to open and bet in it; the bet_accepted."""
    seen = max((e["round"] for e in client.events), default=0)
    opened = await client.event("round_opened", seen)
    await client.send(_bet(opened["round"], bet_id, amount=amount))
    return await client.reply("bet_accepted")


async def _settlement(client: Client, round_no: int) -> Message:
    return await client.expect(lambda m: m["type"] == "settlement" and m["round"] == round_no)


def _player_token(player: str, role: str = "player") -> str:
    return mint_token(SECRET, player, role=role, ttl_s=600)


# --- tokens at the handshake ------------------------------------------------------------------


async def test_no_token_where_one_is_required_is_401_with_a_reason(
    make_node: NodeFactory,
) -> None:
    """With a secret and no guests or anonymous spectators: no token, a bad token, one of
    another secret or an expired one get HTTP 401 and a one-line reason; no WebSocket. A
    malformed query is 400."""
    node = await make_node(secret=SECRET)
    cases: list[tuple[dict[str, str], dict[str, str] | None, int, str]] = [
        ({}, None, 401, "a token is required"),
        ({"role": "spectator"}, None, 401, "a token is required to watch"),
        ({"token": "junk"}, None, 401, "token is malformed"),
        ({"token": mint_token("o" * 40, "alice")}, None, 401, "signature does not match"),
        ({"token": mint_token(SECRET, "alice", ttl_s=1, now=1)}, None, 401, "token expired"),
        ({}, {"Authorization": "Basic xyz"}, 401, "Bearer"),
        ({"role": "dealer"}, None, 400, "must be player or spectator"),
    ]
    for query, headers, status, reason in cases:
        response = await _refusal(node, headers, **query)
        assert response.status_code == status, query
        body = response.body.decode()
        assert reason in body and body.count("\n") == 1, body
    assert not node.ctx.sessions


async def test_a_token_connects_as_its_player_by_query_or_header(
    make_node: NodeFactory, dial: Dial
) -> None:
    """`?token=` or `Authorization: Bearer`: welcome names the player, its display name and
    the role, with the initial balance; no welcome.token for a real (non-guest) player."""
    node = await make_node(secret=SECRET, initial_balance=FUNDS)
    by_query = await dial(node, token=_player_token("alice"))
    by_header = await dial(node, {"Authorization": f"Bearer {_player_token('bob')}"})
    named = await dial(node, token=mint_token(SECRET, "dora", name="Dora M.", ttl_s=600))
    assert named.welcome["name"] == "Dora M."
    for client, player in ((by_query, "alice"), (by_header, "bob")):
        welcome = client.welcome
        assert (welcome["player"], welcome["role"], welcome["balance"]) == (player, "player", FUNDS)
        assert "token" not in welcome
        assert message_problems(welcome) == []


def _handshake(token: str, *extra: tuple[str, str]) -> bytes:
    """A WebSocket handshake for /ws?token=..., with `extra` header lines as given (repeats
    and all): websockets' client will not send two lines of a header it sets itself."""
    lines = [
        f"GET /ws?token={token} HTTP/1.1",
        "Host: localhost",
        "Upgrade: websocket",
        "Connection: Upgrade",
        "Sec-WebSocket-Key: dGhlIHNhbXBsZSBub25jZQ==",
        "Sec-WebSocket-Version: 13",
        *(f"{name}: {value}" for name, value in extra),
    ]
    return ("\r\n".join(lines) + "\r\n\r\n").encode()


async def _handshake_answer(node: Node, request: bytes) -> tuple[int, dict[str, str], bytes]:
    """The status line's code, the headers and (for a refusal) the body of the answer to a raw
    handshake over loopback; the connection is closed after the head of a 101."""
    reader, writer = await asyncio.open_connection("127.0.0.1", node.port)
    try:
        writer.write(request)
        async with asyncio.timeout(within()):
            head = await reader.readuntil(b"\r\n\r\n")
            status_line, *lines = head.decode().strip().split("\r\n")
            headers = {
                k.strip().lower(): v.strip() for k, _, v in (h.partition(":") for h in lines)
            }
            body = b"" if status_line.split()[1] == "101" else await reader.read()
    finally:
        writer.close()
        with contextlib.suppress(ConnectionError):
            await writer.wait_closed()
    return int(status_line.split()[1]), headers, body


async def test_repeated_headers_other_than_authorization_are_not_refused(
    make_node: NodeFactory, dial: Dial
) -> None:
    """Two Cookie, X-Forwarded-For or Sec-WebSocket-Protocol lines are legal and a proxy or a
    browser sends them: the player is admitted (they were 401 "the Authorization header must
    be one 'Bearer <token>'"). Two Origin lines are refused by the WebSocket layer as what
    they are (400, RFC 6454 allows one); only two Authorization lines are a bad token."""
    node = await make_node(secret=SECRET, initial_balance=FUNDS)
    token = _player_token("alice")
    cookies = [("Cookie", "a=1"), ("Cookie", "b=2")]
    forwarded = [("X-Forwarded-For", "10.0.0.1"), ("X-Forwarded-For", "10.0.0.2")]
    client = await dial(node, [*cookies, *forwarded], token=token)
    assert client.welcome["player"] == "alice"
    offered = [
        ("Sec-WebSocket-Protocol", "chat.v9"),
        ("Sec-WebSocket-Protocol", "baccarat.v1.json"),
    ]
    status, headers, _ = await _handshake_answer(node, _handshake(token, *offered))
    assert (status, headers["sec-websocket-protocol"]) == (101, "baccarat.v1.json")
    origins = [("Origin", "https://a.example"), ("Origin", "https://b.example")]
    status, _, body = await _handshake_answer(node, _handshake(token, *origins))
    assert status == 400 and b"Origin" in body, body
    twice = [("Authorization", f"Bearer {token}"), ("Authorization", f"Bearer {token}")]
    status, _, body = await _handshake_answer(node, _handshake(token, *twice))
    assert (status, body) == (401, b"the Authorization header must be one 'Bearer <token>'\n")


@pytest.fixture
async def redis_pair(
    request: pytest.FixtureRequest,
) -> AsyncIterator[Callable[..., Awaitable[tuple[Node, Node]]]]:
    """Two in-process nodes on one Redis key space (a cluster of two), same secret."""
    url: str = request.getfixturevalue("redis_url")
    prefix = f"test-{uuid.uuid4().hex[:12]}"
    async with contextlib.AsyncExitStack() as stack:

        async def start(**overrides: Any) -> tuple[Node, Node]:
            from server.store.redis import RedisStore

            nodes = []
            for name in ("n1", "n2"):
                settings = Settings.from_options(port=0, **{**FAST, "node_id": name, **overrides})
                store = RedisStore.from_url(url, key_prefix=prefix)
                nodes.append(await stack.enter_async_context(Node(settings, store=store)))
            return nodes[0], nodes[1]

        yield start
    await delete_keys(url, [prefix])


@pytest.mark.redis
async def test_a_token_is_the_same_player_on_either_node(
    redis_pair: Callable[..., Awaitable[tuple[Node, Node]]], dial: Dial
) -> None:
    """A token from `baccarat token` (mint_token) connects as that player on both nodes of
    one Redis: the money bet on one node is gone on the other, and a connection of the player
    joined on the other node gets the settlement too."""
    first, second = await redis_pair(secret=SECRET, initial_balance=FUNDS)
    token = _player_token("carol")
    here = await dial(first, token=token)
    there = await dial(second, token=token)
    assert here.welcome["player"] == there.welcome["player"] == "carol"
    assert {here.welcome["node"], there.welcome["node"]} == {"n1", "n2"}
    await there.join()
    await here.join()
    accepted = await _bet_next_round(here, "b-1", 2_000)
    assert accepted["balance"] == FUNDS - 2_000
    third = await dial(second, {"Authorization": f"Bearer {token}"})
    assert third.welcome["balance"] == FUNDS - 2_000
    mine = await _settlement(here, accepted["round"])
    theirs = await _settlement(there, accepted["round"])
    assert mine == theirs
    assert await first.store.balance("carol") == mine["balance"]


@pytest.mark.redis
async def test_a_connection_on_a_node_away_from_the_table_gets_the_settlement_once(
    redis_pair: Callable[..., Awaitable[tuple[Node, Node]]], dial: Dial
) -> None:
    """Dave bets on node B; his other connection, on node A, joined no table (node A's hub
    does not even follow it): the store's settled notice brings it each round's settlement,
    once, as it does to the connection that bet."""
    first, second = await redis_pair(secret=SECRET, initial_balance=FUNDS)
    token = _player_token("dave")
    away = await dial(first, token=token)
    betting = await dial(second, token=token)
    await asyncio.wait_for(first.hub.settlements.notices_live.wait(), within())
    await betting.join()
    rounds = []
    for bet_id in ("d-1", "d-2"):
        accepted = await _bet_next_round(betting, bet_id, 1_000)
        rounds.append(accepted["round"])
        await _settlement(betting, accepted["round"])
    assert TABLE not in first.hub.feeds
    seen: list[Message] = []
    async with asyncio.timeout(within()):
        while not seen or seen[-1]["round"] != rounds[-1]:
            message = await away.recv()
            if message["type"] == "settlement":
                seen.append(message)
    assert [m["round"] for m in seen] == rounds
    assert seen[-1]["balance"] == await second.store.balance("dave")
    assert all(message_problems(m) == [] for m in seen)


# --- guests ------------------------------------------------------------------------------------


async def test_a_guest_comes_back_with_its_token(
    make_node: NodeFactory, dial: Dial, engine: str
) -> None:
    """Demo mode: welcome.token; reconnecting with it is the same player with the same
    balance (after a bet), and the token comes back renewed."""
    node = await make_node(engine)
    guest = await dial(node)
    welcome = guest.welcome
    assert welcome["role"] == "player" and welcome["token"]
    assert welcome["player"].startswith("guest-")
    await guest.join()
    accepted = await _bet_next_round(guest, "g-1")
    await guest.ws.close()
    again = await dial(node, token=welcome["token"])
    assert again.welcome["player"] == welcome["player"]
    # The balance after the bet, or after its settlement if the round settled meanwhile.
    assert again.welcome["balance"] == await node.store.balance(welcome["player"])
    assert again.welcome["balance"] >= accepted["balance"]
    assert again.welcome["token"] and message_problems(again.welcome) == []
    other = await dial(node)
    assert other.welcome["player"] != welcome["player"]


async def _store_clock_passes(node: Node, ms: int) -> None:
    """Let `ms` pass by the store's clock (Redis's own TIME on that engine: it cannot signal)."""
    target = await node.store.now_ms() + ms
    async with asyncio.timeout(within() + ms / 1000):
        while await node.store.now_ms() < target:  # noqa: ASYNC110 - a clock, not an event
            await asyncio.sleep(0.02)


async def test_a_guest_who_only_watches_is_kept_while_connected(
    make_node: NodeFactory, dial: Dial, engine: str
) -> None:
    """Issue 16, item 3: a connected guest that sent nothing for longer than --guest-ttl was
    swept (its balance to `expired`, its history gone; its next bet re-created the wallet).
    A live connection keeps its guest whatever it sends; the TTL runs from its last close."""
    ttl_ms = 1_000
    node = await make_node(engine, guest_ttl=ttl_ms // 1000)
    store = node.store
    guest = await dial(node)
    player = guest.welcome["player"]
    await guest.join()
    accepted = await _bet_next_round(guest, "w-1")
    balance = (await _settlement(guest, accepted["round"]))["balance"]
    await _store_clock_passes(node, 2 * ttl_ms)  # not a frame sent meanwhile
    assert await store.expire_guests() == 0
    assert await store.balance(player) == balance
    assert [r["round"] for r in await store.history(player)] == [accepted["round"]]
    closing = await store.now_ms()
    await guest.ws.close()
    async with asyncio.timeout(within()):
        while node.ctx.sessions:  # noqa: ASYNC110 - until the node has seen the close
            await asyncio.sleep(0.01)
    assert not node.ctx.guests
    assert await store.expire_guests(now_ms=closing + ttl_ms - 1) == 0  # kept a TTL from there
    assert await store.balance(player) == balance
    assert await store.expire_guests(now_ms=await store.now_ms() + ttl_ms) == 1
    assert await store.balance(player) is None and await store.history(player) == []
    assert (await store.ledger()).balanced


@pytest.mark.redis
async def test_a_thousand_guest_visits_leave_redis_no_bigger(
    make_node: NodeFactory, dial: Dial, redis_url: str
) -> None:
    """1,000 guests connect and go; once their TTL passed (judged by expire_guests at a later
    time, no waiting) Redis holds no more keys than before, and the ledger is balanced; but
    for each guest's audit log, which ends with its expiry and expires by itself once idle
    for --audit-days."""
    from redis.asyncio import Redis

    node = await make_node("redis", guest_ttl=1, betting_window=600)  # rounds stand still
    await (await dial(node)).join()  # the table's keys exist, its round is open
    store = node.store
    prefix = store.key_prefix  # type: ignore[attr-defined]
    await store.expire_guests(now_ms=await store.now_ms() + 5_000)
    redis = Redis.from_url(redis_url)
    try:

        async def keys() -> int:
            found = [k async for k in redis.scan_iter(match=f"{prefix}:*", count=1000)]
            return len([k for k in found if not k.endswith(b"}:audit")])

        before = await keys()
        for _ in range(1_000):
            url = f"ws://127.0.0.1:{node.port}/ws"
            async with connect(url, open_timeout=within()) as ws:
                await ws.recv()  # the welcome: the guest exists
        grown = await keys()
        assert grown > before
        assert await store.expire_guests(now_ms=await store.now_ms() + 5_000) >= 1_000
        assert await keys() <= before
        logs = [k async for k in redis.scan_iter(match=f"{prefix}:*}}:audit", count=1000)]
        assert len(logs) >= 1_000
        for log in logs[:10]:
            assert 0 < await redis.pttl(log) <= 90 * 86_400_000
    finally:
        await redis.aclose()
    ledger = await store.ledger()
    assert ledger.balanced and ledger.expired >= 1_000 * 1_000_000


# --- one wallet, every connection ---------------------------------------------------------------


async def test_two_connections_of_one_player_both_get_the_settlement(
    make_node: NodeFactory, dial: Dial, engine: str
) -> None:
    """Two tabs of one player: one joins and bets, the other only sits there; both see the
    same balance and both get the settlement."""
    node = await make_node(engine, secret=SECRET, initial_balance=FUNDS)
    token = _player_token("dave")
    tab1 = await dial(node, token=token)
    tab2 = await dial(node, token=token)
    await tab1.join()
    accepted = await _bet_next_round(tab1, "d-1", 5_000)
    third = await dial(node, token=token)
    assert third.welcome["balance"] == accepted["balance"] == FUNDS - 5_000
    first = await _settlement(tab1, accepted["round"])
    second = await _settlement(tab2, accepted["round"])
    assert first == second and message_problems(first) == []
    assert first["balance"] == await node.store.balance("dave")


async def test_a_bet_placed_before_a_drop_is_settled_after_the_reconnect(
    make_node: NodeFactory, dial: Dial, engine: str
) -> None:
    """The player bets and the connection drops before the result; reconnecting with the
    same token and `join` + `since`, it gets the missed events, `joined`, then the
    settlement of that round."""
    node = await make_node(engine, secret=SECRET, initial_balance=FUNDS)
    watcher = await dial(node, token=_player_token("eve-watch", "spectator"))
    await watcher.join()
    token = _player_token("eve")
    first = await dial(node, token=token)
    snap = await first.join()
    accepted = await _bet_next_round(first, "e-1", 3_000)
    last_seen = max((e["seq"] for e in first.events), default=snap["seq"])
    await first.ws.close()
    await watcher.event("round_settled", accepted["round"] - 1)
    again = await dial(node, token=token)
    await again.send({"type": "join", "table": TABLE, "since": last_seen, "epoch": snap["epoch"]})
    seen: list[Message] = []

    def until_settlement(message: Message) -> bool:
        seen.append(message)
        return message["type"] == "settlement"

    settled = await again.expect(until_settlement)
    assert settled["round"] == accepted["round"]
    assert settled["balance"] == await node.store.balance("eve")
    types = [m["type"] for m in seen]
    assert "snapshot" not in types and "joined" in types
    settle_event = next(
        i
        for i, m in enumerate(seen)
        if m.get("kind") == "round_settled" and m["round"] == accepted["round"]
    )
    assert settle_event < types.index("joined") < len(seen) - 1
    payouts = settled["payouts"]
    assert [p["bet_id"] for p in payouts] == ["e-1"]


# --- roles ---------------------------------------------------------------------------------------


async def test_anonymous_spectators_watch_but_cannot_bet(
    make_node: NodeFactory, dial: Dial, engine: str
) -> None:
    """?role=spectator: no player, no balance; it joins and sees cards; a bet gets
    bet_rejected NOT_A_PLAYER and nothing is debited; history is empty."""
    node = await make_node(engine)
    watcher = await dial(node, role="spectator")
    welcome = watcher.welcome
    assert (welcome["role"], welcome["player"], welcome["balance"]) == ("spectator", None, None)
    assert "token" not in welcome and message_problems(welcome) == []
    snap = await watcher.join()
    assert snap["balance"] is None and snap["bets"] == []
    opened = await watcher.event("round_opened", snap["round"] - 1)
    await watcher.send(_bet(opened["round"], "s-1"))
    rejected = await watcher.reply("bet_rejected")
    assert (rejected["code"], rejected["bet_id"]) == ("NOT_A_PLAYER", "s-1")
    assert message_problems(rejected) == []
    await watcher.send({"type": "history"})
    assert (await watcher.reply("history"))["rounds"] == []
    await watcher.event("card", opened["round"] - 1)
    ledger = await node.store.ledger()
    assert ledger.balanced and ledger.in_play == 0


async def test_with_a_secret_a_tokenless_connection_is_a_spectator_if_allowed(
    make_node: NodeFactory, dial: Dial
) -> None:
    """Secret, no guests, anonymous spectators allowed: no token -> a spectator. An operator
    token watches too and cannot bet. The connections gauge counts each role."""
    node = await make_node(secret=SECRET, allow_anonymous_spectators=True)
    anonymous = await dial(node)
    operator = await dial(node, token=_player_token("ops", "operator"))
    assert (anonymous.welcome["role"], anonymous.welcome["balance"]) == ("spectator", None)
    assert (operator.welcome["role"], operator.welcome["player"]) == ("operator", "ops")
    assert operator.welcome["balance"] is None
    snap = await operator.join()
    await operator.send(_bet(snap["round"], "o-1"))
    assert (await operator.reply("bet_rejected"))["code"] == "NOT_A_PLAYER"
    counts = node._connection_counts()
    assert counts[("spectator", "json")] == 1 and counts[("operator", "json")] == 1
    assert await node.store.balance("ops") is None


async def test_connections_per_player_are_capped_at_the_handshake(
    make_node: NodeFactory, dial: Dial
) -> None:
    """--max-connections-per-player 2: a third connection of the player gets 429; another
    player is not affected; a closed connection frees its place."""
    node = await make_node(secret=SECRET, max_connections_per_player=2)
    token = _player_token("frank")
    first = await dial(node, token=token)
    await dial(node, {"Authorization": f"Bearer {token}"})
    response = await _refusal(node, token=token)
    assert response.status_code == 429 and b"frank" in response.body
    await dial(node, token=_player_token("grace"))
    closing = [
        asyncio.ensure_future(s.ws.wait_closed()) for s in node.ctx.sessions if s.player == "frank"
    ]
    await first.ws.close()
    done, pending = await asyncio.wait(closing, timeout=within(), return_when="FIRST_COMPLETED")
    for waiting in pending:
        waiting.cancel()
    assert len(done) == 1  # the server saw one of frank's two connections go
    await dial(node, token=token)


# --- game recall ----------------------------------------------------------------------------------


async def test_history_returns_the_players_rounds_newest_first(
    make_node: NodeFactory, dial: Dial, engine: str
) -> None:
    """Two rounds bet and settled: history lists both, newest first, each a HistoryRound with
    the bets, the cards, the winner, the payouts and the balance after; limit and table
    filter; a bad limit or table is an error."""
    node = await make_node(engine, secret=SECRET, initial_balance=FUNDS)
    client = await dial(node, token=_player_token("heidi"))
    await client.join()
    rounds = []
    for n in range(2):
        accepted = await _bet_next_round(client, f"h-{n}", 1_000 + n)
        settled = await _settlement(client, accepted["round"])
        rounds.append((accepted, settled))
    await client.send({"type": "history", "ref": "h"})
    answer = await client.reply("history")
    assert message_problems(answer) == []
    recalled = answer["rounds"]
    assert [r["round"] for r in recalled] == [rounds[1][0]["round"], rounds[0][0]["round"]]
    for entry, (accepted, settled) in zip(recalled, reversed(rounds), strict=True):
        assert entry["table"] == TABLE
        assert entry["bets"] == [
            {"bet_id": accepted["bet_id"], "spot": "banker", "amount": accepted["amount"]}
        ]
        assert entry["payouts"] == settled["payouts"]
        assert entry["balance_after"] == settled["balance"]
        assert len(entry["cards"]) >= 4 and entry["winner"] in ("player", "banker", "tie")
    await client.send({"type": "history", "table": TABLE, "limit": 1})
    assert [r["round"] for r in (await client.reply("history"))["rounds"]] == [
        rounds[1][0]["round"]
    ]
    await client.send({"type": "history", "limit": 0, "ref": 1})
    assert (await client.reply("error"))["code"] == "BAD_FIELD"
    await client.send({"type": "history", "table": "nope", "ref": 2})
    assert (await client.reply("error"))["code"] == "UNKNOWN_TABLE"


async def test_history_requests_share_the_replay_rate(make_node: NodeFactory, dial: Dial) -> None:
    """history is charged to the replays' bucket: over it, RATE_LIMITED."""
    node = await make_node(rate_replays=1, rate_burst=1)
    client = await dial(node)
    await client.send({"type": "history", "ref": 1})
    await client.reply("history")
    await client.send({"type": "history", "ref": 2})
    refused = await client.reply("error")
    assert (refused["code"], refused["ref"]) == ("RATE_LIMITED", 2)
