"""`baccarat verify --url` across a failover (issue 18): real `baccarat serve` processes on a
real redis-server; the owner of a table is killed (-9) in the middle of a shoe, another node
takes the table over when the lease lapses and finishes that shoe with the dead node's seed,
root and positions; every finished shoe then verifies, the one that spanned the kill included,
and the same events with one card changed do not.

Only the Redis engine is here: the memory engine cannot fail over between processes (one
process holds every table and there is no other node to take one over). "On both engines"
for a running table is tests/verify/test_remote.py (in-process nodes, memory and Redis).
"""

from __future__ import annotations

import asyncio
import json
import signal
import sys
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import pytest

from server.verify.remote import fetch_table
from tests.multinode.conftest import StartNode
from tests.multinode.nodes import SCALE, Client, NodeProcess

pytestmark = [pytest.mark.redis, pytest.mark.slow]

BACCARAT = Path(sys.executable).parent / "baccarat"
TABLE = "t1"
# One deck with the cut card as far forward as the rules allow (26 of 52 behind it): a burn of
# at most 11 and coups of at most 6 cards cannot reach the cut card before a shoe's third
# round, and the shoe ends one round after it comes out, so a shoe lasts 3 to 5 rounds.
TABLES_FILE = f"""\
[tables.{TABLE}]
preset = "classic8"
decks = 1
cut_card_from_end = 26
"""
Event = dict[str, Any]


@dataclass
class Watcher:
    """A player on the surviving node: records the table's events, bets on every round it
    sees opened (so that each round's payout is checked too) and sends one entropy value in
    the first betting window of every shoe it sees committed."""

    client: Client
    events: list[Event] = field(default_factory=list)
    errors: list[Event] = field(default_factory=list)  # errors and rejected bets
    accepted: list[Event] = field(default_factory=list)
    committed: set[int] = field(default_factory=set)  # shoes seen from their shoe_committed
    shoe: int | None = None  # the shoe being played
    rounds_in_shoe: int = 0  # of the shoe being played, rounds opened so far

    async def join(self) -> None:
        await self.client.send(type="join", table=TABLE)
        await self.client.next("joined")

    async def run(self, until: Callable[[], bool], wait: float = 30) -> None:
        async with asyncio.timeout(wait * SCALE):
            while not until():
                message = json.loads(await self.client.ws.recv())
                if message.get("type") in ("error", "bet_rejected"):
                    self.errors.append(message)
                if message.get("type") == "bet_accepted":
                    self.accepted.append(message)
                if message.get("type") == "event" and message.get("table") == TABLE:
                    await self.handle(message)

    async def handle(self, event: Event) -> None:
        self.events.append(event)
        if event["kind"] == "shoe_committed":
            self.shoe, self.rounds_in_shoe = event["shoe"], 0
            self.committed.add(event["shoe"])
        elif event["kind"] == "round_opened":
            spot = ("player", "banker", "tie")[event["round"] % 3]
            bet = {"round": event["round"], "spot": spot, "amount": 1000}
            await self.client.send(type="bet", table=TABLE, bet_id=f"b{event['round']}", **bet)
            self.rounds_in_shoe += 1
            if self.rounds_in_shoe == 1 and self.shoe in self.committed:
                await self.client.send(type="entropy", table=TABLE, value=entropy_of(self.shoe))

    def revealed(self, shoe: int) -> bool:
        return any(e["kind"] == "shoe_revealed" and e["shoe"] == shoe for e in self.events)


def entropy_of(shoe: int | None) -> str:
    return f"watcher, shoe {shoe}"


def shoe_of_each_event(events: list[Event]) -> list[tuple[int | None, Event]]:
    """Each event with the shoe it belongs to: the last shoe_committed before it (a
    shoe_revealed names its own, which the next shoe_committed may already have followed)."""
    shoe: int | None = None
    tagged: list[tuple[int | None, Event]] = []
    for event in events:
        if event["kind"] == "shoe_committed":
            shoe = event["shoe"]
        own = event["shoe"] if event["kind"] == "shoe_revealed" else shoe
        tagged.append((own, event))
    return tagged


def logged(node: NodeProcess, name: str) -> list[dict[str, Any]]:
    """The node's JSON log records of this event name."""
    records = []
    for line in node.log:
        try:
            record = json.loads(line)
        except ValueError:
            continue
        if isinstance(record, dict) and record.get("event") == name:
            records.append(record)
    return records


async def baccarat(*argv: str) -> tuple[int, str, str]:
    """The real command, as a user runs it: its exit status, stdout and stderr."""
    proc = await asyncio.create_subprocess_exec(
        str(BACCARAT), *argv, stdout=asyncio.subprocess.PIPE, stderr=asyncio.subprocess.PIPE
    )
    async with asyncio.timeout(30 * SCALE):
        out, err = await proc.communicate()
    assert proc.returncode is not None
    return proc.returncode, out.decode(), err.decode()


@pytest.mark.parametrize("kill_at", ["mid_deal", "before_seal"])
async def test_verify_confirms_a_shoe_that_spans_a_failover(
    start_node: StartNode, tmp_path: Path, kill_at: str
) -> None:
    """The owner is killed -9 in the middle of a shoe, either while it deals the shoe's second
    round (the burn and the first coup dealt by the dead node, the rest by its heir) or in
    the shoe's first betting window, after a player's entropy was taken and before the seal
    (the dead node's commitment, the heir's seal, with that entropy). The heir finishes the
    shoe, reveals it and plays a whole shoe more; `baccarat verify --url` on the heir exits 0
    with every finished shoe "ok, revealed and recomputed", the one that spanned the kill
    included; the recorded events with one of the heir's cards changed exit 1 naming it."""
    tables_file = tmp_path / "tables.toml"
    tables_file.write_text(TABLES_FILE)
    owner = await start_node("owner", **{"--tables-file": str(tables_file)})
    await owner.wait_for_log('"table_owned"')
    heir = await start_node("heir", **{"--tables-file": str(tables_file)})
    async with Client.connect(heir.url) as client:
        watcher = Watcher(client)
        await watcher.join()

        def kill_point() -> bool:
            last = watcher.events[-1] if watcher.events else {}
            if watcher.shoe not in watcher.committed:
                return False
            if kill_at == "mid_deal":
                return last.get("kind") == "card" and watcher.rounds_in_shoe == 2
            return last.get("kind") == "entropy_accepted" and last["value"] == entropy_of(
                watcher.shoe
            )

        await watcher.run(kill_point)
        owner.signal(signal.SIGKILL)
        killed_shoe, killed_round = watcher.shoe, watcher.events[-1]["round"]
        killed_after = watcher.events[-1]["seq"]
        assert killed_shoe is not None
        await heir.wait_for_log('"table_owned"')
        await watcher.run(lambda: watcher.revealed(killed_shoe + 1))
    assert watcher.errors == []
    assert watcher.accepted
    assert (await heir.status())["owned"][0]["table"] == TABLE

    # The heir played on from the killed round: the shoe's cards after the kill are its.
    assert killed_round in {r["round"] for r in logged(heir, "round_settled")}
    tagged = shoe_of_each_event(watcher.events)
    killed = [e for shoe, e in tagged if shoe == killed_shoe]
    dealt = [e for e in killed if e["kind"] in ("burn", "card")]
    before = [e for e in dealt if e["seq"] <= killed_after]
    after = [e for e in dealt if e["seq"] > killed_after]
    assert after and any(e["kind"] == "card" for e in after)
    assert bool(before) == (kill_at == "mid_deal")
    sealed = next(e for e in killed if e["kind"] == "shoe_sealed")
    assert sealed["entropy"] == [entropy_of(killed_shoe)]  # taken by the dead node's window

    # Every finished shoe verifies, read from the running table through the heir.
    status, out, err = await baccarat("verify", "--url", heir.url, "--table", TABLE)
    assert status == 0, out + err
    lines = out.splitlines()
    for shoe in (killed_shoe, killed_shoe + 1):
        line = next(s for s in lines if s.startswith(f"shoe {shoe} (table {TABLE}): "))
        assert line.endswith(": ok, revealed and recomputed"), line
    fetched = await fetch_table(heir.url, TABLE, None, lambda note: None)
    finished = {e["shoe"] for e in fetched.events if e["kind"] == "shoe_revealed"}
    assert {killed_shoe, killed_shoe + 1} <= finished
    recomputed = [s for s in lines if s.endswith(": ok, revealed and recomputed")]
    assert len(recomputed) == len(finished), out

    # The same events, recorded, with one card the heir dealt in the killed shoe changed.
    assert fetched.events[0]["seq"] == 1
    heirs_card = next(e for e in after if e["kind"] == "card")
    card = next(e for e in fetched.events if e["seq"] == heirs_card["seq"])
    assert card == heirs_card
    card["rank"] = "9" if card["rank"] != "9" else "2"
    recording = tmp_path / "tampered.jsonl"
    recording.write_text("".join(json.dumps(event) + "\n" for event in fetched.events))
    status, out, err = await baccarat("verify", str(recording))
    assert status == 1, out + err
    named = f"MISMATCH: round {card['round']}, card {card['index']} ({card['hand']})"
    line = next(s for s in out.splitlines() if s.startswith(f"shoe {killed_shoe} "))
    assert named in line, out
