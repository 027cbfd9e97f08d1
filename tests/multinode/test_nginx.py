"""The real topology without Docker: deploy/nginx.conf on Debian's nginx, in front of two
`baccarat serve` nodes on one redis-server, through a rolling restart of both nodes."""

from __future__ import annotations

import asyncio
import contextlib
import json
import signal
from collections.abc import AsyncIterator, Callable, Iterator
from typing import Any

import pytest
from websockets.asyncio.client import ClientConnection, connect
from websockets.exceptions import ConnectionClosed, InvalidHandshake
from websockets.typing import Subprotocol

from server.store.redis import RedisStore
from tests.multinode.conftest import StartNode
from tests.multinode.nginx import INSTALL_HINT, NginxProcess, find_nginx
from tests.multinode.nodes import SCALE, NodeProcess
from tests.multinode.test_cluster import assert_rounds_whole, ledger_balanced
from tests.redis_server import RedisProcess, free_port

pytestmark = [
    pytest.mark.redis,
    pytest.mark.slow,
    pytest.mark.skipif(find_nginx() is None, reason=INSTALL_HINT),
]

TABLE = "t1"
JSON = [Subprotocol("baccarat.v1.json")]
Message = dict[str, Any]


class Roamer:
    """A player that reaches the table only through nginx. It bets on every round it sees
    open, and when its connection is closed it reconnects through nginx and rejoins with
    `since`; every message is handled by a reader task, tests wait on conditions."""

    def __init__(self, name: str, url: str) -> None:
        self.name = name
        self.url = url
        self.betting = True
        self.ws: ClientConnection | None = None
        self.players: list[str] = []  # the guest id of each connection
        self.nodes: list[str] = []  # the node behind each connection
        self.closes: list[int | None] = []
        self.events: list[Message] = []
        self.last_seq = 0
        self.accepted: dict[str, Message] = {}  # bet_id -> bet_accepted, with "player"
        # Bets sent on the current connection and not answered yet. Once betting is off it
        # only shrinks: a live connection answers every bet (bet_accepted or bet_rejected).
        self.unanswered: set[str] = set()
        # Bets whose connection closed before they were answered: the store may hold them
        # or not, the player cannot tell (the ledger check covers their money).
        self.answers_lost: set[str] = set()
        self.settled_bets: set[str] = set()  # bet ids paid in a settlement message
        self.problems: list[str] = []
        self.changed = asyncio.Condition()
        self.task: asyncio.Task[None] | None = None

    async def start(self, want_node: str) -> None:
        self.ws = await self._connect(want_node)
        await self.ws.send(json.dumps({"type": "join", "table": TABLE}))
        self.task = asyncio.create_task(self._read_forever())

    async def _connect(self, want_node: str | None = None) -> ClientConnection:
        """A connection through nginx (retried while nginx has no node for it). With
        `want_node`, connections to other nodes are held open until nginx's least_conn
        sends one to that node."""
        parked: list[ClientConnection] = []
        try:
            async with asyncio.timeout(30 * SCALE):
                while True:
                    try:
                        ws = await connect(self.url, subprotocols=JSON, open_timeout=5)
                        welcome = json.loads(await ws.recv())
                    except (OSError, InvalidHandshake, ConnectionClosed):
                        await asyncio.sleep(0.1)  # a reconnecting client's back-off
                        continue
                    if want_node is None or welcome["node"] == want_node:
                        self.players.append(welcome["player"])
                        self.nodes.append(welcome["node"])
                        return ws
                    parked.append(ws)
        finally:
            for other in parked:
                await other.close()

    async def _read_forever(self) -> None:
        while True:
            assert self.ws is not None
            try:
                message = json.loads(await self.ws.recv())
            except ConnectionClosed as closed:
                self.closes.append(closed.rcvd.code if closed.rcvd else None)
                self.answers_lost |= self.unanswered
                self.unanswered.clear()
                self.ws = await self._connect()
                rejoin = {"type": "join", "table": TABLE, "since": self.last_seq}
                await self.ws.send(json.dumps(rejoin))
                continue
            await self._handle(message)
            async with self.changed:
                self.changed.notify_all()

    async def _handle(self, message: Message) -> None:
        kind = message["type"]
        if kind == "snapshot":
            if self.events:
                self.problems.append(f"snapshot instead of a catch-up at {self.last_seq}")
            self.last_seq = message["seq"]
        elif kind == "joined" and message["seq"] != self.last_seq:
            self.problems.append(f"joined at {message['seq']} after {self.last_seq}")
        elif kind == "event":
            if message["seq"] != self.last_seq + 1:
                self.problems.append(f"seq {message['seq']} after {self.last_seq}")
            self.last_seq = message["seq"]
            self.events.append(message)
            if message["kind"] == "round_opened" and self.betting:
                await self.bet(message["round"])
        elif kind == "bet_accepted":
            self.unanswered.discard(message["bet_id"])
            self.accepted[message["bet_id"]] = {**message, "player": self.players[-1]}
        elif kind == "bet_rejected":
            self.unanswered.discard(message["bet_id"])
        elif kind == "settlement":
            self.settled_bets.update(p["bet_id"] for p in message["payouts"])

    async def bet(self, round_no: int) -> None:
        spot = ("player", "banker", "tie")[round_no % 3]
        bet = {"type": "bet", "table": TABLE, "round": round_no, "spot": spot, "amount": 1000}
        bet_id = f"{self.name}-{round_no}"
        assert self.ws is not None
        self.unanswered.add(bet_id)  # before the send: its answer may come before it returns
        with contextlib.suppress(ConnectionClosed):  # the reader sees the close and rejoins
            await self.ws.send(json.dumps({**bet, "bet_id": bet_id}))

    async def wait_for(self, condition: Callable[[], bool], wait: float = 30) -> None:
        assert self.task is not None
        task = self.task
        async with asyncio.timeout(wait * SCALE), self.changed:
            await self.changed.wait_for(lambda: task.done() or condition())
        if task.done():
            task.result()  # the reader failed: raise its error here
            raise AssertionError(f"{self.name}'s reader stopped")

    # --- what it has seen -----------------------------------------------------------------
    def finished_rounds(self) -> set[int]:
        done = ("round_settled", "round_voided")
        return {e["round"] for e in self.events if e["kind"] in done}

    def bet_in_flight(self) -> int | None:
        """The round of this player's accepted bet in the round being played, if any."""
        if not self.events:
            return None
        current = self.events[-1]["round"]
        placed = f"{self.name}-{current}" in self.accepted
        return current if placed and current not in self.finished_rounds() else None

    def rounds_finished_after(self, round_no: int) -> int:
        return sum(1 for r in self.finished_rounds() if r > round_no)

    def bets_all_finished(self) -> bool:
        """Every bet sent on this connection is answered, and the round of every accepted one
        has finished. Not only the accepted ones: a bet sent just before betting was turned
        off may be answered later, and its round may then still be open (the accepted bet
        whose round the test never waited for, seen as `B-16 was never settled`)."""
        accepted_rounds = {b["round"] for b in self.accepted.values()}
        return not self.unanswered and accepted_rounds <= self.finished_rounds()

    async def close(self) -> None:
        if self.task is not None:
            self.task.cancel()
            with contextlib.suppress(asyncio.CancelledError):
                await self.task
        if self.ws is not None:
            await self.ws.close()


@pytest.fixture
def nginx_ports() -> list[int]:
    return [free_port(), free_port()]


@pytest.fixture
def nginx(nginx_ports: list[int]) -> Iterator[NginxProcess]:
    proxy = NginxProcess(nginx_ports).start()
    yield proxy
    proxy.stop()


@contextlib.asynccontextmanager
async def roamers(url: str, *placement: tuple[str, str]) -> AsyncIterator[list[Roamer]]:
    made = [Roamer(name, url) for name, _ in placement]
    try:
        for roamer, (_, node) in zip(made, placement, strict=True):
            await roamer.start(want_node=node)
        yield made
    finally:
        for roamer in made:
            await roamer.close()


async def sigterm(node: NodeProcess) -> None:
    """A graceful stop, as Docker, systemd or Kubernetes send it; the node exits 0."""
    assert node.proc is not None
    node.signal(signal.SIGTERM)
    async with asyncio.timeout(20 * SCALE):
        assert await node.proc.wait() == 0


async def assert_every_bet_settled_once(redis_server: RedisProcess, *players: Roamer) -> None:
    store = RedisStore.from_url(redis_server.url)
    try:
        for roamer in players:
            for bet_id, receipt in roamer.accepted.items():
                settlement = await store.settlement(TABLE, receipt["round"], receipt["player"])
                assert settlement is not None, f"{bet_id} was never settled"
                assert [p["bet_id"] for p in settlement.payouts] == [bet_id]
    finally:
        await store.close()


async def test_rolling_restart_through_nginx_loses_no_round_and_no_bet(
    start_node: StartNode,
    redis_server: RedisProcess,
    nginx_ports: list[int],
    nginx: NginxProcess,
) -> None:
    """A plays on the owner node, B on the other, both through nginx. SIGTERM the owner: A
    reconnects through nginx to the other node and catches up with `since` without a gap,
    B gets the settlement of the round in flight, the table keeps dealing. The stopped node
    comes back and the other one is stopped in turn: the same again. Every accepted bet is
    settled exactly once and the ledger balances."""
    port_a, port_b = (str(port) for port in nginx_ports)
    node_a = await start_node("a", **{"--port": port_a})
    await node_a.wait_for_log("table_owned")
    node_b = await start_node("b", **{"--port": port_b})
    async with roamers(nginx.url, ("A", "a"), ("B", "b")) as (player_a, player_b):
        # 1. Stop the owner while both have a bet on the round being played.
        await player_a.wait_for(
            lambda: (
                player_a.bet_in_flight() is not None
                and player_a.bet_in_flight() == player_b.bet_in_flight()
            )
        )
        in_flight = player_a.bet_in_flight()
        assert in_flight is not None
        await sigterm(node_a)
        await player_a.wait_for(
            lambda: player_a.nodes[-1] == "b" and player_a.rounds_finished_after(in_flight) >= 2
        )
        # B stayed on the node that took the table over: the bet's settlement reached it.
        await player_b.wait_for(lambda: f"B-{in_flight}" in player_b.settled_bets)
        assert (await node_b.status())["owned"][0]["table"] == TABLE

        # 2. The stopped node comes back on its port; then the other one is stopped.
        node_a = await start_node("a", **{"--port": port_a})
        mark = player_a.events[-1]["round"]
        await player_a.wait_for(lambda: player_a.rounds_finished_after(mark) >= 1)
        await sigterm(node_b)
        mark = player_a.events[-1]["round"]
        for roamer in (player_a, player_b):
            await roamer.wait_for(
                lambda r=roamer: r.nodes[-1] == "a" and r.rounds_finished_after(mark) >= 2
            )
        assert (await node_a.status())["owned"][0]["table"] == TABLE

        # 3. Stop betting; let every bet sent be answered and every round with a bet finish.
        for roamer in (player_a, player_b):
            roamer.betting = False
        for roamer in (player_a, player_b):
            await roamer.wait_for(roamer.bets_all_finished)

    for roamer in (player_a, player_b):
        assert roamer.problems == [], roamer.problems
        assert roamer.closes and set(roamer.closes) == {1001}, roamer.closes
        assert_rounds_whole(roamer.events)
    assert player_a.nodes[0] == "a" and player_a.nodes[-1] == "a" and "b" in player_a.nodes
    assert player_b.nodes[0] == "b" and player_b.nodes[-1] == "a"
    seen: dict[int, Message] = {}
    for event in player_a.events + player_b.events:
        assert seen.setdefault(event["seq"], event) == event, f"two histories at {event['seq']}"
    assert len(player_a.accepted) >= 4 and len(player_b.accepted) >= 4
    await assert_every_bet_settled_once(redis_server, player_a, player_b)
    assert await ledger_balanced(redis_server)


async def test_a_bet_still_unanswered_keeps_the_wait_for_settlements_going(
    start_node: StartNode, redis_server: RedisProcess
) -> None:
    """The wait that ends the rolling restart counts a bet sent but not yet answered: its
    answer can still accept it into a round that is open. Deterministic: the node is stopped
    (SIGSTOP) while the bet is on its way, so the answer cannot come before the check."""
    node = await start_node("a", **{"--betting-window": "2"})  # the bet lands in the window
    async with roamers(node.url, ("A", "a")) as (player,):
        player.betting = False  # this test sends the one bet itself
        await player.wait_for(
            lambda: bool(player.events) and player.events[-1]["kind"] == "round_opened"
        )
        round_no = player.events[-1]["round"]
        node.signal(signal.SIGSTOP)
        try:
            await player.bet(round_no)
            # Nothing accepted yet, every round with an accepted bet finished: but not done.
            assert player.unanswered == {f"A-{round_no}"}
            assert not player.bets_all_finished()
        finally:
            node.signal(signal.SIGCONT)
        await player.wait_for(player.bets_all_finished)
        assert f"A-{round_no}" in player.accepted
        assert round_no in player.finished_rounds()
    assert player.problems == [], player.problems
    await assert_every_bet_settled_once(redis_server, player)
