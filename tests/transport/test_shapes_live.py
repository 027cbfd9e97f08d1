"""Every message a running node sends fits its shape in server/wire/shapes.py, every field
included (tests/wire/today.py forgives nothing now), in both encodings."""

from __future__ import annotations

import pytest

from server.app import Node
from server.wire.codec import Encoding
from tests.transport.conftest import TABLE, Client, ClientFactory, Message
from tests.wire.today import problems_today


class Recorder:
    """Reads a client's messages, keeping every one it reads."""

    def __init__(self, client: Client) -> None:
        self.client = client
        self.seen: list[Message] = [client.welcome]

    async def until(self, kind: str, event: bool = False) -> Message:
        def match(message: Message) -> bool:
            self.seen.append(message)
            return message.get("kind" if event else "type") == kind

        return await self.client.expect(match)

    async def send(self, message: Message) -> None:
        await self.client.send(message)


@pytest.mark.parametrize("encoding", [Encoding.JSON, Encoding.MSGPACK])
async def test_a_session_sends_only_well_shaped_messages(
    node: Node, open_client: ClientFactory, encoding: Encoding
) -> None:
    """welcome, snapshot, joined, events, bet answers, settlement, replay, history, pong, error,
    left."""
    rec = Recorder(await open_client(node, encoding))
    await rec.send({"type": "join", "table": TABLE})
    await rec.until("joined")
    opened = await rec.until("round_opened", event=True)
    round_no = opened["round"]
    bet = {"type": "bet", "table": TABLE, "round": round_no, "spot": "banker", "amount": 500}
    await rec.send({**bet, "bet_id": "ok-1"})
    await rec.until("bet_accepted")
    await rec.send({**bet, "bet_id": "bad-1", "spot": "dragon"})
    await rec.until("bet_rejected")
    await rec.until("settlement")
    await rec.send({"type": "replay", "table": TABLE, "round": round_no})
    await rec.until("replay")
    await rec.send({"type": "history"})
    assert (await rec.until("history"))["rounds"]
    await rec.send({"type": "join", "table": TABLE, "since": 1_000_000})  # a recovered snapshot
    await rec.until("joined")
    await rec.send({"type": "ping", "ref": 7})
    await rec.until("pong")
    await rec.send({"type": "join", "table": "nope", "ref": "j"})
    await rec.until("error")
    await rec.send({"type": "leave", "table": TABLE})
    await rec.until("left")
    types = {m["type"] for m in rec.seen}
    assert types >= {
        "welcome", "snapshot", "joined", "event", "bet_accepted", "bet_rejected", "settlement",
        "replay", "history", "pong", "error", "left",
    }  # fmt: skip
    assert any(m.get("recovered") is False for m in rec.seen)
    for message in rec.seen:
        assert problems_today(message) == [], message
