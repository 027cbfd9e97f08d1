"""A PlayerSession with no socket: its output port records what it is sent.

The protocol is sans-I/O (server/transport/port.py): the session takes decoded messages and
writes messages to a Port, and a table's feed writes event frames to the same port. Here the
port is a recorder, the store the memory engine, the hub a real one fanning out to recorders,
and a test Owner plays the table; every command and a settlement delivery are driven through
`PlayerSession.handle` and checked message by message.
"""

from __future__ import annotations

import asyncio
from collections.abc import AsyncIterator, Callable
from dataclasses import dataclass
from typing import Any

import pytest

from server.auth import ANONYMOUS, Admission, AuthPolicy
from server.store.memory import MemoryStore
from server.transport.context import SessionContext
from server.transport.feed import Subscriber
from server.transport.hub import Hub
from server.transport.protocol import PlayerSession
from server.wire import shapes
from server.wire.codec import Encoding, Frame, decode
from tests.store import RULES, TABLE, ManualClock, Owner
from tests.transport.conftest import within

pytestmark = pytest.mark.timeout(30)

QUIET = 3600.0  # the hub's watchdog never runs on its own here


class RecordingPort:
    """A Port that keeps every message it is sent, in order, as the client would read it."""

    encoding = Encoding.JSON

    def __init__(self) -> None:
        self.messages: list[dict[str, Any]] = []
        self.closed: tuple[int, str] | None = None
        self.dropped = False
        self.changed = asyncio.Event()

    @property
    def connection(self) -> object:
        return self

    def send(self, message: shapes.ServerMessage) -> None:
        self.messages.append(dict(message))
        self.changed.set()

    def push_frame(self, frame: Frame) -> None:
        self.messages.append(decode(frame))
        self.changed.set()

    def over_buffer_limit(self) -> bool:
        return False

    def drop_slow(self) -> None:
        self.dropped = True

    async def close(self, code: int, reason: str) -> None:
        self.closed = (code, reason)

    def of(self, kind: str) -> list[dict[str, Any]]:
        return [m for m in self.messages if m["type"] == kind]

    def take(self) -> list[dict[str, Any]]:
        """The messages since the last take."""
        taken, self.messages = self.messages, []
        return taken

    async def until(self, condition: Callable[[], bool]) -> None:
        async with asyncio.timeout(within()):
            while not condition():
                self.changed.clear()
                await self.changed.wait()


def record(subs: dict[object, Subscriber], frame: Frame) -> None:
    """The hub's fan-out to recording ports (websockets' broadcast wants real connections)."""
    for sub in subs.values():
        sub.port.push_frame(frame)


@dataclass
class Table:
    store: MemoryStore
    hub: Hub
    ctx: SessionContext
    owner: Owner

    async def session(
        self, admission: Admission | None = None
    ) -> tuple[PlayerSession, RecordingPort]:
        port = RecordingPort()
        session = PlayerSession(port, self.ctx, admission or self.ctx.auth.new_guest())
        await session.start()
        return session, port

    async def play(self, step: Callable[[], Any]) -> list[Any]:
        """Commit the Owner's next events and hand them to the hub, as a table loop does."""
        events: list[Any] = await step()
        self.hub.offer(TABLE, events)
        return events


@pytest.fixture
async def table() -> AsyncIterator[Table]:
    store = MemoryStore(ManualClock())
    await store.create_table(TABLE, RULES)
    hub = Hub(store, fanout=record, check_interval=QUIET)
    ctx = SessionContext(store, hub, {TABLE: RULES}, "node-a", auth=AuthPolicy.configure(None))
    owner = await Owner(store).start()
    yield Table(store, hub, ctx, owner)
    await hub.close()


async def test_welcome_join_bet_settlement_replay_history_and_leave(table: Table) -> None:
    session, port = await table.session()
    [welcome] = port.take()
    assert welcome["type"] == "welcome" and welcome["player"] == session.player
    assert welcome["balance"] == table.ctx.initial_balance and welcome["role"] == "player"

    # join: a snapshot, then `joined`; then the table's events as they are committed
    assert await session.handle({"type": "join", "table": TABLE}) is True
    snapshot, joined = port.take()
    assert (snapshot["type"], joined["type"]) == ("snapshot", "joined")
    assert joined["seq"] == snapshot["seq"] and session.joined == (TABLE,)
    opened = await table.play(table.owner.open)
    round_no = table.owner.state.round
    assert [m["seq"] for m in port.take()] == [e["seq"] for e in opened]

    # bet: accepted, and the session is the round's bettor for settlement delivery
    bet = {"type": "bet", "table": TABLE, "round": round_no, "bet_id": "b1"}
    await session.handle({**bet, "spot": "banker", "amount": 100})
    [accepted] = port.take()
    assert accepted["type"] == "bet_accepted" and accepted["bet_id"] == "b1"
    assert accepted["balance"] == table.ctx.initial_balance - 100
    assert table.hub.settlements.bettors[TABLE, round_no] == {session}

    # the round settles: its events, then the player's settlement after them
    finished = await table.play(table.owner.finish)
    await port.until(lambda: bool(port.of("settlement")))
    *events, settlement = port.take()
    assert [m["seq"] for m in events] == [e["seq"] for e in finished]
    assert settlement["round"] == round_no and settlement["payouts"][0]["bet_id"] == "b1"
    # another path bringing the same settlement (a resume after a catch-up) sends nothing
    await table.hub.settlements.resume(session, TABLE, [round_no])
    assert port.take() == []

    # replay and history: the round's events, and the player's round
    await session.handle({"type": "replay", "table": TABLE, "round": round_no})
    [replay] = port.take()
    assert replay["type"] == "replay" and replay["more"] is False
    assert [e["seq"] for e in replay["events"]] == [e["seq"] for e in opened + finished]
    await session.handle({"type": "history"})
    [history] = port.take()
    assert [r["round"] for r in history["rounds"]] == [round_no]

    # leave: `left`, and nothing more from the table
    await session.handle({"type": "leave", "table": TABLE})
    assert port.take() == [{"type": "left", "table": TABLE}]
    assert session.joined == () and not table.hub.feeds[TABLE].is_subscribed(session)
    await table.play(table.owner.open)
    assert port.take() == []
    await session.stop()


async def test_a_rejoin_with_since_catches_up_and_resumes_the_settlement(table: Table) -> None:
    """A player that bet, dropped and came back with `since` gets the events it missed, then
    `joined`, then its settlement (the resume path), once."""
    session, port = await table.session()
    await session.handle({"type": "join", "table": TABLE})
    await table.play(table.owner.open)
    round_no = table.owner.state.round
    bet = {"type": "bet", "table": TABLE, "round": round_no, "bet_id": "b1", "spot": "player"}
    await session.handle({**bet, "amount": 100})
    assert port.take()[-1]["type"] == "bet_accepted"
    last_seq = table.hub.feeds[TABLE].last_seq  # every event so far was sent to it
    await session.stop()  # the connection drops: the round settles while it is away

    await table.play(table.owner.finish)
    again, port = await table.session(Admission(session.identity))
    port.take()
    await again.handle({"type": "join", "table": TABLE, "since": last_seq})
    kinds = [m["type"] for m in port.messages]
    assert kinds[-2:] == ["joined", "settlement"] and kinds.count("settlement") == 1
    assert port.of("settlement")[0]["round"] == round_no
    assert "round_settled" in [m.get("kind") for m in port.messages]
    await again.stop()


async def test_an_invalid_message_is_answered_and_the_connection_kept(table: Table) -> None:
    session, port = await table.session()
    port.take()
    assert await session.handle({"type": "fold", "ref": "r1"}) is True
    [error] = port.take()
    assert (error["type"], error["code"], error["ref"]) == ("error", "UNKNOWN_TYPE", "r1")
    await session.handle({"type": "join", "table": "no-such-table", "ref": 7})
    [error] = port.take()
    assert (error["code"], error["ref"]) == ("UNKNOWN_TABLE", 7)
    await session.handle({"type": "replay", "table": TABLE, "round": 99})
    assert port.take()[0]["code"] == "NOT_HELD"
    assert port.closed is None


async def test_a_spectator_bet_is_refused_and_its_history_is_empty(table: Table) -> None:
    session, port = await table.session(Admission(ANONYMOUS))
    [welcome] = port.take()
    assert welcome["role"] == "spectator" and welcome["balance"] is None
    await table.play(table.owner.open)
    bet = {"type": "bet", "table": TABLE, "round": table.owner.state.round, "bet_id": "s1"}
    await session.handle({**bet, "spot": "banker", "amount": 100})
    [rejected] = port.take()
    assert (rejected["type"], rejected["code"]) == ("bet_rejected", "NOT_A_PLAYER")
    await session.handle({"type": "history"})
    assert port.take() == [{"type": "history", "rounds": []}]


async def test_a_flood_of_invalid_messages_closes_the_port(table: Table) -> None:
    """Refusals past the flood limit close the connection through the port (1008)."""
    session, port = await table.session()
    for _ in range(10_000):
        if not await session.handle({"type": "fold"}):
            break
    assert port.closed is not None and port.closed[0] == 1008


async def test_entropy_is_an_event_of_the_table_and_refusals_are_errors(table: Table) -> None:
    """A player's entropy in the shoe's first window is the table's entropy_accepted event:
    a follower of the table (the sender too) hears it from the feed once; a sender not
    following the table gets it as its answer. A second value, a closed window, a bad value
    and a spectator's value are errors with their codes; the owner seals with the values."""
    follower, followed = await table.session()
    await follower.handle({"type": "join", "table": TABLE})
    sender, sent = await table.session()
    await table.play(table.owner.open)
    followed.take(), sent.take()
    await sender.handle({"type": "entropy", "table": TABLE, "value": "lucky 7", "ref": 1})
    [answer] = sent.take()
    assert (answer["type"], answer["kind"], answer["value"], answer["shoe"]) == (
        "event",
        "entropy_accepted",
        "lucky 7",
        1,
    )
    assert followed.take() == [answer]
    await follower.handle({"type": "entropy", "table": TABLE, "value": "mine"})
    assert [m["value"] for m in followed.take()] == ["mine"]  # from the feed, once
    refusals = [
        (sender, {"value": "again"}, "ENTROPY_ALREADY_SENT"),
        (sender, {"value": "x" * 65}, "BAD_ENTROPY"),
        (sender, {"value": 7}, "BAD_ENTROPY"),
        (sender, {}, "MISSING_FIELD"),
        (sender, {"value": "v", "table": "nope"}, "UNKNOWN_TABLE"),
    ]
    spectator, watched = await table.session(Admission(ANONYMOUS))
    watched.take()
    refusals.append((spectator, {"value": "v"}, "NOT_A_PLAYER"))
    for session, fields, code in refusals:
        await session.handle({"type": "entropy", "table": TABLE, "ref": "e", **fields})
        [error] = session.port.take()  # type: ignore[attr-defined]
        assert (error["type"], error["code"], error["ref"]) == ("error", code, "e"), error
    events = await table.play(table.owner.close)
    [sealed] = [e for e in events if e["kind"] == "shoe_sealed"]
    assert sealed["entropy"] == ["lucky 7", "mine"]
    newcomer, late = await table.session()
    late.take()
    await newcomer.handle({"type": "entropy", "table": TABLE, "value": "late", "ref": "e"})
    assert [(m["type"], m["code"]) for m in late.take()] == [("error", "ENTROPY_CLOSED")]
    for session in (follower, sender, spectator, newcomer):
        await session.stop()
