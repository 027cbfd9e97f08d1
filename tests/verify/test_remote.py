"""`baccarat verify --url`: reading a running table through `join` (since 0) and `replay`,
against in-process nodes (tests/transport/conftest.py)."""

from __future__ import annotations

import asyncio
import json
from pathlib import Path
from typing import Any

import pytest

from server.app import Node
from server.cli import main
from server.verify.remote import fetch_table
from tests.transport.conftest import ClientFactory, NodeFactory

TABLE = "t1"


def url(node: Node) -> str:
    return f"ws://127.0.0.1:{node.port}/ws"


async def settled_rounds(node: Node, open_client: ClientFactory, rounds: int) -> int:
    """Wait until `rounds` rounds are settled; the seq of the last round_settled."""
    client = await open_client(node)
    await client.join(TABLE)
    event = await client.event("round_settled", after_round=rounds - 1, seconds=10 + rounds)
    # Closed now, while it is still reading: a client left joined but unread fills its queue,
    # stops reading, and its close at the teardown then waits out the close timeout (10 s).
    await client.ws.close()
    seq: int = event["seq"]
    return seq


def assert_contiguous(events: list[dict[str, Any]]) -> None:
    seqs = [event["seq"] for event in events]
    assert seqs == list(range(seqs[0], seqs[0] + len(seqs)))


async def test_url_reads_the_whole_history_in_one_catch_up(
    make_node: NodeFactory, open_client: ClientFactory
) -> None:
    """While seq 1 is held, `join` with since 0 gives every event, from seq 1, no replays."""
    node = await make_node()
    last = await settled_rounds(node, open_client, 3)
    notes: list[str] = []
    fetched = await fetch_table(url(node), TABLE, None, notes.append)
    assert fetched.welcome["role"] == "spectator"  # no token: an anonymous spectator
    assert fetched.events[0]["seq"] == 1 and fetched.events[-1]["seq"] >= last
    assert_contiguous(fetched.events)
    assert fetched.replayed_rounds == 0
    assert notes and notes[0].startswith(f"joined {TABLE}: ")


async def test_url_replays_rounds_when_the_history_no_longer_holds_seq_1(
    make_node: NodeFactory, open_client: ClientFactory
) -> None:
    """With few events held, the join answers a snapshot: the events before it come round by
    round from `replay`, from the earliest round held (found by bisection), through a replay
    rate low enough to be refused on the way (the reader waits and asks again)."""
    node = await make_node(history_events=15, history_rounds=8, rate_replays=5, rate_burst=1)
    await settled_rounds(node, open_client, 10)
    notes: list[str] = []
    fetched = await fetch_table(url(node), TABLE, None, notes.append)
    rounds = sorted({event["round"] for event in fetched.events})
    assert fetched.replayed_rounds == len(rounds) >= 4
    assert rounds[0] > 1 and rounds == list(range(rounds[0], rounds[-1] + 1))
    assert rounds[-1] >= 10
    assert fetched.events[0]["kind"] == "round_opened"  # a whole round from its start
    assert_contiguous(fetched.events)
    assert any("replaying rounds from" in note for note in notes)
    assert any("pacing the requests" in note for note in notes)


async def test_url_unknown_table_exits_2(
    make_node: NodeFactory, capsys: pytest.CaptureFixture[str]
) -> None:
    node = await make_node()
    status = await asyncio.to_thread(main, ["verify", "--url", url(node), "--table", "nope"])
    assert status == 2
    assert "UNKNOWN_TABLE" in capsys.readouterr().err


async def test_url_verifies_a_running_table_and_a_tampered_recording(
    engine: str,
    make_node: NodeFactory,
    open_client: ClientFactory,
    capsys: pytest.CaptureFixture[str],
    tmp_path: Path,
) -> None:
    """End to end: a table that reshuffles every round (a shoe per round, each revealed)
    verifies with exit 0, one `ok, revealed and recomputed` line per finished shoe; the same
    events recorded with one card changed fail, naming the round and the card."""
    node = await make_node(engine=engine, tables=f"{TABLE}=joggled6")
    await settled_rounds(node, open_client, 3)
    fetched = await fetch_table(url(node), TABLE, None, lambda note: None)
    argv = ["verify", "--url", url(node), "--table", TABLE]
    status = await asyncio.to_thread(main, argv)
    out = capsys.readouterr().out
    assert any(event["kind"] == "shoe_committed" for event in fetched.events)
    assert status == 0, out
    assert sum(line.endswith("ok, revealed and recomputed") for line in out.splitlines()) >= 2
    card = next(event for event in fetched.events if event["kind"] == "card")
    card["rank"] = "9" if card["rank"] != "9" else "2"
    path = tmp_path / "tampered.jsonl"
    path.write_text("".join(json.dumps(event) + "\n" for event in fetched.events))
    assert main(["verify", str(path)]) == 1
    out = capsys.readouterr().out
    assert f"MISMATCH: round {card['round']}, card {card['index']} ({card['hand']})" in out
