"""Several `baccarat serve --redis` processes sharing tables on one real redis-server."""

from __future__ import annotations

import asyncio
import json
import signal
import time
from collections import Counter, defaultdict
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

import pytest

from server.store.redis import RedisStore
from tests.multinode.conftest import StartNode
from tests.multinode.nodes import SCALE, Client, NodeProcess
from tests.redis_server import RedisProcess

pytestmark = [pytest.mark.redis, pytest.mark.slow]

DEMO_BALANCE = 1_000_000
LEASE_TTL = 1.5  # tests.multinode.nodes.FAST


@dataclass
class Bot:
    """A client that bets on every round it sees open, and records what comes back."""

    name: str
    client: Client
    betting: bool = True
    accepted: dict[str, dict[str, Any]] = field(default_factory=dict)
    rejected: list[dict[str, Any]] = field(default_factory=list)
    payouts: dict[str, list[dict[str, Any]]] = field(default_factory=lambda: defaultdict(list))
    settlements: list[dict[str, Any]] = field(default_factory=list)
    events: list[dict[str, Any]] = field(default_factory=list)
    first_seq: int = 0
    seen_at: dict[int, float] = field(default_factory=dict)

    async def join(self, table: str = "t1") -> None:
        await self.client.send(type="join", table=table)
        snapshot = await self.client.next("snapshot")
        self.first_seq = snapshot["seq"] + 1

    async def run(self, until: Callable[[Bot], bool], wait: float = 30) -> None:
        async with asyncio.timeout(wait * SCALE):
            while not until(self):
                await self.handle(json.loads(await self.client.ws.recv()))

    async def handle(self, message: dict[str, Any]) -> None:
        kind = message["type"]
        if kind == "event":
            self.events.append(message)
            self.seen_at[message["seq"]] = time.monotonic()
            if message["kind"] == "round_opened" and self.betting:
                spot = ("player", "banker", "tie")[message["round"] % 3]
                bet_id = f"{self.name}-{message['round']}"
                bet = {"table": "t1", "round": message["round"], "spot": spot, "amount": 1000}
                await self.client.send(type="bet", bet_id=bet_id, **bet)
        elif kind == "bet_accepted":
            self.accepted[message["bet_id"]] = message
        elif kind == "bet_rejected":
            self.rejected.append(message)
        elif kind == "settlement":
            self.settlements.append(message)
            for payout in message["payouts"]:
                self.payouts[payout["bet_id"]].append(payout)

    def settled_rounds(self) -> int:
        return sum(1 for e in self.events if e["kind"] in ("round_settled", "round_voided"))

    def all_bets_settled(self) -> bool:
        return all(bet_id in self.payouts for bet_id in self.accepted)

    def assert_gapless(self) -> None:
        seqs = [e["seq"] for e in self.events]
        assert seqs == list(range(self.first_seq, self.first_seq + len(seqs))), self.name

    def assert_money(self) -> None:
        """Every accepted bet settled exactly once; the balance adds up."""
        for bet_id in self.accepted:
            assert len(self.payouts[bet_id]) == 1, f"{bet_id} settled {self.payouts[bet_id]}"
        staked = sum(r["amount"] for r in self.accepted.values())
        credited = sum(p[0]["credit"] for p in self.payouts.values())
        assert self.settlements[-1]["balance"] == DEMO_BALANCE - staked + credited


def assert_one_history(*bots: Bot) -> None:
    """Where clients' views overlap, they saw the identical events."""
    by_seq: dict[int, dict[str, Any]] = {}
    for bot in bots:
        for event in bot.events:
            assert by_seq.setdefault(event["seq"], event) == event, f"fork at {event['seq']}"


def assert_rounds_whole(events: list[dict[str, Any]]) -> None:
    """Each round seen from its opening was settled (or voided) exactly once, after
    exactly the cards its result names."""
    rounds: dict[int, list[dict[str, Any]]] = defaultdict(list)
    for event in events:
        rounds[event["round"]].append(event)
    for number, round_events in rounds.items():
        kinds = Counter(e["kind"] for e in round_events)
        if kinds["round_opened"] and (kinds["round_settled"] or kinds["round_voided"]):
            assert kinds["round_settled"] + kinds["round_voided"] == 1, number
            assert kinds["round_opened"] == kinds["betting_closed"] == 1, number
            if kinds["round_settled"]:
                result = next(e for e in round_events if e["kind"] == "round_result")
                assert kinds["card"] == result["cards_used"], number


async def start_owner(start_node: StartNode, until: str) -> NodeProcess:
    """The first node, once its table has reached an event of kind `until`: it owns t1."""
    owner = await start_node("owner")
    async with Client.connect(owner.url) as watcher:
        await watcher.send(type="join", table="t1")
        await watcher.next("event", kind=until)
    return owner


async def ledger_balanced(redis_server: RedisProcess) -> bool:
    store = RedisStore.from_url(redis_server.url)
    try:
        return (await store.ledger()).balanced
    finally:
        await store.close()


async def test_every_node_plays_the_same_table(start_node: StartNode) -> None:
    """Three nodes: clients on each see one identical event sequence, and bets through any
    node land in it; a round can be replayed through any node."""
    nodes = [await start_node(f"n{i}") for i in range(3)]
    async with (
        Client.connect(nodes[0].url) as c0,
        Client.connect(nodes[1].url) as c1,
        Client.connect(nodes[2].url) as c2,
    ):
        bots = [Bot(f"b{i}", c) for i, c in enumerate((c0, c1, c2))]
        for bot in bots:
            await bot.join()
        await asyncio.gather(*(b.run(lambda b: b.settled_rounds() >= 3) for b in bots))
        for bot in bots:
            bot.assert_gapless()
        assert_one_history(*bots)
        # Table events show totals, never who bet: each round's final totals count the bets
        # accepted through every node (rounds seen whole, but the last, whose answers surely
        # all arrived).
        accepted = Counter(r["round"] for b in bots for r in b.accepted.values())
        final = {e["round"]: e for e in bots[0].events if e["kind"] == "bet_totals"}
        opened = {e["round"] for e in bots[0].events if e["kind"] == "round_opened"}
        settled = [e["round"] for e in bots[0].events if e["kind"] == "round_settled"]
        whole = [round_no for round_no in settled[:-1] if round_no in opened]
        assert whole
        for round_no in whole:
            shown = final.get(round_no, {"bets": 0, "totals": {}})
            assert shown["bets"] == accepted[round_no], round_no
            assert "player" not in shown
        assert sum(final[r]["bets"] for r in whole if r in final) > 0
        finished = next(e["round"] for e in bots[0].events if e["kind"] == "round_settled")
        await c2.send(type="replay", table="t1", round=finished)
        replay = await c2.next("replay")
        seen = [e for e in bots[0].events if e["round"] == finished]
        assert replay["events"][-len(seen) :] == seen
    owners = [s["owned"] for s in [await n.status() for n in nodes]]
    assert sum(len(owned) for owned in owners) == 1


async def test_owner_killed_mid_round_loses_no_bet(
    start_node: StartNode, redis_server: RedisProcess
) -> None:
    """kill -9 of the owner mid-deal while bots on other nodes bet: another node takes the
    table within the lease time plus a second and finishes the same round; every accepted
    bet is settled exactly once and the money is conserved."""
    owner = await start_owner(start_node, until="round_opened")
    others = [await start_node("n1"), await start_node("n2")]
    assert (await owner.status())["owned"][0]["table"] == "t1"
    async with Client.connect(others[0].url) as c1, Client.connect(others[1].url) as c2:
        bots = [Bot("b1", c1), Bot("b2", c2)]
        for bot in bots:
            await bot.join()

        def dealing_with_bets(bot: Bot) -> bool:
            last = bot.events[-1] if bot.events else {}
            return last.get("kind") == "card" and f"{bot.name}-{last['round']}" in bot.accepted

        await asyncio.gather(*(b.run(lambda b: b.settled_rounds() >= 1) for b in bots))
        await bots[0].run(dealing_with_bets)
        owner.signal(signal.SIGKILL)
        killed_at = time.monotonic()
        killed_after = bots[0].events[-1]["seq"]
        target = bots[0].settled_rounds() + 2
        await asyncio.gather(*(b.run(lambda b, t=target: b.settled_rounds() >= t) for b in bots))
        resumed_at = bots[0].seen_at[killed_after + 1]
        assert resumed_at - killed_at <= (LEASE_TTL + 1 + 0.5) * SCALE
        for bot in bots:
            bot.betting = False
        await asyncio.gather(*(b.run(Bot.all_bets_settled) for b in bots))
    for bot in bots:
        bot.assert_gapless()
        bot.assert_money()
        assert_rounds_whole(bot.events)
    assert_one_history(*bots)
    assert await ledger_balanced(redis_server)
    statuses = [await n.status() for n in others]
    assert sum(len(s["owned"]) for s in statuses) == 1


async def test_paused_owner_writes_nothing_stale(
    start_node: StartNode, redis_server: RedisProcess
) -> None:
    """SIGSTOP the owner past its lease: another node takes over; after SIGCONT the old owner
    commits nothing (its fencing token is stale) and steps down."""
    owner = await start_owner(start_node, until="card")
    other = await start_node("other")
    async with Client.connect(other.url) as client:
        bot = Bot("b", client)
        await bot.join()
        await bot.run(lambda b: b.settled_rounds() >= 1)
        owner.signal(signal.SIGSTOP)
        stopped_seq = bot.events[-1]["seq"]
        await bot.run(lambda b: b.events[-1]["seq"] > stopped_seq)  # play resumed elsewhere
        assert (await other.status())["owned"][0]["table"] == "t1"
        log_mark = len(owner.log)
        owner.signal(signal.SIGCONT)
        await owner.wait_for_log("lease_lost", start=log_mark)
        target = bot.settled_rounds() + 2
        await bot.run(lambda b: b.settled_rounds() >= target)
        bot.betting = False
        await bot.run(Bot.all_bets_settled)
    bot.assert_gapless()
    bot.assert_money()
    assert_rounds_whole(bot.events)
    assert (await owner.status())["owned"] == []
    assert (await other.status())["owned"][0]["table"] == "t1"
    assert await ledger_balanced(redis_server)


async def test_redis_restart_is_survived(start_node: StartNode, redis_server: RedisProcess) -> None:
    """Redis goes away: bets get a clear UNAVAILABLE code and no node crashes; once Redis is
    back on the same port, the nodes reconnect and play goes on."""
    nodes = [await start_node("n0"), await start_node("n1")]
    async with Client.connect(nodes[1].url) as client:
        bot = Bot("b", client, betting=False)
        await bot.join()
        await bot.run(lambda b: b.settled_rounds() >= 1)
        round_no = bot.events[-1]["round"]
        redis_server.stop()
        await client.send(
            type="bet", table="t1", round=round_no + 1, bet_id="x", spot="tie", amount=1000
        )
        rejected = await client.next("bet_rejected")
        assert rejected["code"] == "UNAVAILABLE"
        await client.send(type="join", table="t1")
        assert (await client.next("error"))["code"] == "UNAVAILABLE"
        redis_server.start()
        settled_before = bot.settled_rounds()
        await bot.run(lambda b: b.settled_rounds() > settled_before + 1, wait=40)
        bot.assert_gapless()
        assert_rounds_whole(bot.events)
    for node in nodes:
        assert node.proc is not None and node.proc.returncode is None
    assert await ledger_balanced(redis_server)


async def test_killing_a_serving_node_loses_no_bet(
    start_node: StartNode, redis_server: RedisProcess
) -> None:
    """kill -9 of a node that only serves clients: the table never stops, and the bets its
    clients placed are settled exactly once in Redis even though nobody is there to hear."""
    owner = await start_node("owner")
    async with Client.connect(owner.url) as watcher:
        await watcher.send(type="join", table="t1")
        await watcher.next("event", kind="round_opened")
        server_node = await start_node("doomed")
        async with Client.connect(server_node.url) as doomed_client:
            doomed = Bot("d", doomed_client)
            await doomed.join()
            await doomed.run(lambda b: len(b.accepted) >= 2)
            server_node.signal(signal.SIGKILL)
        spectator = Bot("w", watcher, betting=False)
        spectator.first_seq = watcher.messages[-1]["seq"] + 1
        last_round = max(r["round"] for r in doomed.accepted.values())
        await spectator.run(
            lambda b: any(
                e["kind"] == "round_settled" and e["round"] == last_round for e in b.events
            )
        )
    spectator.assert_gapless()
    store = RedisStore.from_url(redis_server.url)
    try:
        player = doomed_client.welcome["player"]
        for receipt in doomed.accepted.values():
            settlement = await store.settlement("t1", receipt["round"], player)
            assert settlement is not None
            assert [p["bet_id"] for p in settlement.payouts] == [receipt["bet_id"]]
        assert (await store.ledger()).balanced
    finally:
        await store.close()
