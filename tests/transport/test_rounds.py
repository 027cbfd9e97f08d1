"""Whole rounds over real WebSockets: what spectators and bettors see, reconnects, replays."""

from __future__ import annotations

import asyncio
import contextlib
import itertools
from typing import Any

from server.app import Node
from server.core.bets import Bet, Paytable, Spot, settle_bets
from server.core.cards import Card, Suit
from server.core.coup import resolve_coup
from server.store.base import Store
from server.wire.codec import Encoding
from tests.transport.conftest import (
    TABLE,
    Client,
    ClientFactory,
    Message,
    NodeFactory,
    bet_message,
    within,
)

BETS = [
    ("b-player", "player", 1_000),
    ("b-banker", "banker", 2_500),
    ("b-tie", "tie", 300),
    ("b-ppair", "player_pair", 200),
    ("b-bpair", "banker_pair", 100),
]


def _contiguous(events: list[Message], after: int) -> None:
    assert [e["seq"] for e in events] == list(range(after + 1, after + 1 + len(events)))


def _paytable(welcome: Message) -> Paytable:
    rules = next(t for t in welcome["tables"] if t["id"] == TABLE)
    return Paytable(
        banker_commission_bp=rules["banker_commission_bp"],
        no_commission=rules["no_commission"],
        tie_pays=rules["tie_pays"],
        pair_pays=rules["pair_pays"],
    )


async def _play_one_round(client: Client, after_round: int) -> int:
    """Wait for the next round to open and for it to settle; return its number."""
    opened = await client.event("round_opened", after_round)
    await client.event("round_settled", opened["round"] - 1)
    return int(opened["round"])


async def test_spectator_and_bettor_see_a_whole_round(
    node: Node, open_client: ClientFactory
) -> None:
    """Both see round_opened..round_settled; the bettor is paid exactly the core's payouts."""
    spectator = await open_client(node, Encoding.MSGPACK)
    bettor = await open_client(node, Encoding.JSON)
    start_balance = bettor.welcome["balance"]
    snapshot = await bettor.join()
    await spectator.join()
    opened = await bettor.event("round_opened", snapshot["round"])
    round_no = opened["round"]
    for bet_id, spot, amount in BETS:
        await bettor.send(bet_message(round_no, bet_id, spot, amount))
    accepted = [await bettor.reply("bet_accepted") for _ in BETS]
    staked = sum(amount for _, _, amount in BETS)
    assert [a["bet_id"] for a in accepted] == [b[0] for b in BETS]
    assert accepted[-1]["balance"] == start_balance - staked
    assert all(a["round"] == round_no for a in accepted)

    settlement = await bettor.reply("settlement")
    await spectator.event("round_settled", round_no - 1)
    seen = bettor.round_events(round_no)
    assert spectator.round_events(round_no) == seen
    kinds = [e["kind"] for e in seen]
    assert kinds[kinds.index("round_opened") :] == [
        "round_opened",
        *["bet_totals"] * kinds.count("bet_totals"),
        "betting_closed",
        *["card"] * kinds.count("card"),
        "round_result",
        "round_settled",
    ]
    # Everyone sees the stakes per spot, never who placed them; the last totals are final.
    shown = [e for e in seen if e["kind"] == "bet_totals"]
    assert shown and all("player" not in e for e in shown)
    expected_totals: dict[str, int] = {}
    for _, spot, amount in BETS:
        expected_totals[spot] = expected_totals.get(spot, 0) + amount
    assert shown[-1]["totals"] == {
        s.value: expected_totals[s] for s in Spot if s in expected_totals
    }
    assert (shown[-1]["bettors"], shown[-1]["bets"]) == (1, len(BETS))

    # The coup, recomputed from the dealt cards, is the one announced.
    cards = [e for e in seen if e["kind"] == "card"]
    assert [c["index"] for c in cards] == list(range(len(cards)))
    coup = resolve_coup([Card(c["rank"], Suit(c["suit"])) for c in cards])
    assert [hand.value for hand, _ in coup.deal_order] == [c["hand"] for c in cards]
    result = next(e for e in seen if e["kind"] == "round_result")
    assert result["cards_used"] == coup.cards_used == len(cards)
    assert result["winner"] == coup.winner.value
    assert (result["player_total"], result["banker_total"]) == (
        coup.player_total,
        coup.banker_total,
    )
    assert (result["natural"], result["player_pair"], result["banker_pair"]) == (
        coup.natural,
        coup.player_pair,
        coup.banker_pair,
    )
    assert result["player"] == [str(card) for card in coup.player]
    assert result["banker"] == [str(card) for card in coup.banker]

    # The settlement is the core's, and so is the balance.
    player = bettor.welcome["player"]
    bets = [Bet(bet_id, player, Spot(spot), amount) for bet_id, spot, amount in BETS]
    payouts = settle_bets(_paytable(bettor.welcome), bets, coup)
    assert settlement["round"] == round_no
    assert settlement["payouts"] == [p.to_dict() for p in payouts]
    expected = start_balance - staked + sum(p.credit for p in payouts)
    assert settlement["balance"] == expected
    settled = next(e for e in seen if e["kind"] == "round_settled")
    assert (settled["staked"], settled["paid"]) == (staked, sum(p.credit for p in payouts))
    assert (await bettor.join())["balance"] == expected


async def test_json_and_msgpack_clients_see_identical_events(
    node: Node, open_client: ClientFactory
) -> None:
    """Two clients (one per encoding) get the same seqs and payloads, with no gap."""
    first = await open_client(node, Encoding.JSON)
    second = await open_client(node, Encoding.MSGPACK)
    snap_first = await first.join()
    snap_second = await second.join()
    assert first.encoding is Encoding.JSON and second.encoding is Encoding.MSGPACK
    last = await second.event("round_settled", snap_second["round"])
    await first.until_seq(last["seq"])
    _contiguous(first.events, snap_first["seq"])
    _contiguous(second.events, snap_second["seq"])
    common_from = max(snap_first["seq"], snap_second["seq"])
    mine = [e for e in first.events if common_from < e["seq"] <= last["seq"]]
    theirs = [e for e in second.events if common_from < e["seq"] <= last["seq"]]
    assert mine == theirs and len(mine) >= 5


async def test_snapshot_describes_the_table(node: Node, open_client: ClientFactory) -> None:
    """A snapshot has the phase, round, deadline, rules and the client's balance."""
    client = await open_client(node)
    snap = await client.join()
    assert snap["table"] == TABLE and snap["phase"] in {"betting", "dealing", "settled"}
    assert snap["seq"] >= 1 and snap["round"] >= 1
    assert snap["rules"]["name"] == "classic8"
    assert snap["balance"] == client.welcome["balance"]
    assert "recovered" not in snap
    assert set(snap["roads"]) >= {"bead_plate", "big_road"}
    if snap["phase"] == "betting":
        assert 0 <= snap["time_left_ms"] <= node.settings.timings.betting_window * 1000
    # Then any catch-up events, `joined` with the seq live events follow, and those events.
    joined = await client.reply("joined")
    assert joined["table"] == TABLE and joined["seq"] >= snap["seq"]
    _contiguous(client.events, snap["seq"])
    assert (client.events[-1]["seq"] if client.events else snap["seq"]) == joined["seq"]
    first = await client.expect(lambda m: m["type"] == "event")
    assert first["seq"] == joined["seq"] + 1


async def test_reconnect_with_since_gets_exactly_the_missed_events(
    node: Node, open_client: ClientFactory
) -> None:
    """Rejoining with `since` sends the events after it, no snapshot, then the live ones."""
    leaver = await open_client(node, Encoding.MSGPACK)
    witness = await open_client(node, Encoding.JSON)
    await witness.join()
    await leaver.join()
    last_seen = await leaver.expect(lambda m: m["type"] == "event")
    await leaver.ws.close()
    await witness.until_seq(last_seen["seq"] + 10)

    back = await open_client(node, Encoding.MSGPACK)
    await back.send({"type": "join", "table": TABLE, "since": last_seen["seq"]})
    target = witness.events[-1]["seq"]
    first = await back.recv()
    assert first["type"] == "event" and first["seq"] == last_seen["seq"] + 1
    joined = await back.reply("joined")
    assert joined["seq"] == back.events[-1]["seq"] >= target
    await back.until_seq(target + 3)  # past the catch-up and into live events
    _contiguous(back.events, last_seen["seq"])
    missed = [e for e in witness.events if last_seen["seq"] < e["seq"] <= target]
    assert back.events[: len(missed)] == missed


async def test_since_at_the_latest_seq_sends_only_live_events(
    node: Node, open_client: ClientFactory
) -> None:
    """A `since` equal to the last event seen resumes with no repeat and no gap."""
    client = await open_client(node)
    await client.join()
    seen = await client.expect(lambda m: m["type"] == "event")
    other = await open_client(node)
    await other.send({"type": "join", "table": TABLE, "since": seen["seq"]})
    await other.until_seq(seen["seq"] + 3)
    _contiguous(other.events, seen["seq"])


async def _wait_for_seq(store: Store, seq: int) -> None:
    """Follow the store itself (no hub feed is created) until it has reached `seq`."""
    while True:
        try:
            events = store.follow(TABLE, await store.last_seq(TABLE))
            async with contextlib.aclosing(events):  # type: ignore[type-var]
                async for event in events:
                    if event["seq"] >= seq:
                        return
        except LookupError:  # fell behind the tiny history: look again from now
            if await store.last_seq(TABLE) >= seq:
                return


async def test_since_older_than_history_gets_a_fresh_snapshot(
    make_node: NodeFactory, open_client: ClientFactory
) -> None:
    """A `since` the node no longer holds yields a snapshot with recovered False, then events."""
    node = await make_node(history_events=4)
    client = await open_client(node)
    async with asyncio.timeout(within(10)):
        await _wait_for_seq(node.store, 12)
    await client.send({"type": "join", "table": TABLE, "since": 1})
    snap = await client.recv()
    assert snap["type"] == "snapshot" and snap["recovered"] is False
    assert snap["seq"] >= 12
    await client.until_seq(snap["seq"] + 3)
    _contiguous(client.events, snap["seq"])


async def test_since_beyond_the_table_gets_a_fresh_snapshot(
    node: Node, open_client: ClientFactory
) -> None:
    """A `since` the table never reached (an older server's seq) gets recovered False."""
    client = await open_client(node)
    await client.send({"type": "join", "table": TABLE, "since": 10**9})
    snap = await client.recv()
    assert snap["type"] == "snapshot" and snap["recovered"] is False
    await client.until_seq(snap["seq"] + 2)
    _contiguous(client.events, snap["seq"])


async def test_replay_of_a_finished_round_equals_its_broadcast(
    node: Node, open_client: ClientFactory
) -> None:
    """replay returns a settled round's events exactly as they were broadcast."""
    client = await open_client(node)
    snap = await client.join()
    round_no = await _play_one_round(client, snap["round"])
    await client.send({"type": "replay", "table": TABLE, "round": round_no})
    replay = await client.reply("replay")
    assert replay["round"] == round_no and replay["table"] == TABLE
    broadcast = client.round_events(round_no)
    assert replay["events"] == broadcast
    assert broadcast[-1]["kind"] == "round_settled"


async def test_replay_of_an_unknown_round_is_not_held(
    node: Node, open_client: ClientFactory
) -> None:
    """A round never played (or long gone) answers NOT_HELD; an unknown table UNKNOWN_TABLE."""
    client = await open_client(node)
    await client.send({"type": "replay", "table": TABLE, "round": 10**9, "ref": 1})
    error = await client.reply("error")
    assert (error["code"], error["ref"]) == ("NOT_HELD", 1)
    await client.send({"type": "replay", "table": "nope", "round": 1})
    assert (await client.reply("error"))["code"] == "UNKNOWN_TABLE"


async def test_leave_stops_the_events(node: Node, open_client: ClientFactory) -> None:
    """After `left`, no event reaches the client while the table goes on."""
    leaver = await open_client(node)
    witness = await open_client(node)
    await leaver.join()
    await leaver.send({"type": "leave", "table": TABLE})
    left = await leaver.reply("left")
    assert left["table"] == TABLE
    snap = await witness.join()
    await witness.until_seq(snap["seq"] + 4)
    await leaver.send({"type": "ping", "ref": "after"})
    pong = await leaver.recv()  # the events of the meantime never came
    assert (pong["type"], pong["ref"]) == ("pong", "after")


async def test_ping_answers_pong_with_ref_and_time(node: Node, open_client: ClientFactory) -> None:
    """ping echoes a string or integer ref (null for none or another kind) with the time."""
    client = await open_client(node, Encoding.MSGPACK)
    for ref in (1, "two"):
        pong = await client.ping(ref)
        assert isinstance(pong["ts"], int)
    for message in ({"type": "ping"}, {"type": "ping", "ref": [3, {"four": 4}]}):
        await client.send(message)
        assert (await client.reply("pong"))["ref"] is None
    ts: list[Any] = [(await client.ping(n))["ts"] for n in range(3)]
    assert all(a <= b for a, b in itertools.pairwise(ts))
