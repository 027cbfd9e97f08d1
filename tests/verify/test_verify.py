"""`baccarat verify` on recorded streams built from the pure core: an honest stream passes,
and each kind of dishonesty is caught and named (table, round, card, position)."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import msgpack
import pytest

from server.cli import main
from server.core.fair import client_seed, shuffle
from tests.bots.streams import BANKER_WINS, PLAYER_NATURAL, Stream
from tests.verify.fair_streams import SEEDS, FairTable, Tamper, event_at, other_card

Message = dict[str, Any]


def write(tmp_path: Path, events: list[Message], fmt: str = "json") -> Path:
    path = tmp_path / f"events.{fmt}"
    if fmt == "json":
        path.write_text("".join(json.dumps(e) + "\n" for e in events))
    else:
        path.write_bytes(b"".join(msgpack.packb(e) for e in events))
    return path


def verify(
    capsys: pytest.CaptureFixture[str], tmp_path: Path, events: list[Message], *args: str
) -> tuple[int, list[str]]:
    fmt = "msgpack" if "msgpack" in args else "json"
    status = main(["verify", str(write(tmp_path, events, fmt)), *args])
    return status, capsys.readouterr().out.splitlines()


def honest(shoes: int = 2, reveal_last: bool = True) -> FairTable:
    table = FairTable()
    for number in range(shoes):
        table.shoe(seed=SEEDS[number], reveal=reveal_last or number < shoes - 1)
    return table


def test_an_honest_stream_passes(capsys: pytest.CaptureFixture[str], tmp_path: Path) -> None:
    """Two revealed shoes: one line each, recomputed, and a summary line; exit 0."""
    table = honest()
    status, lines = verify(capsys, tmp_path, table.events)
    assert status == 0, lines
    assert len(lines) == 3
    assert lines[0].startswith("shoe 1 (table t1): ") and lines[1].startswith("shoe 2 (table t1)")
    assert all(line.endswith("ok, revealed and recomputed") for line in lines[:2])
    cards = sum(e["kind"] == "card" for e in table.events if e["round"] <= 3) + 1
    burnt = len(table.events[8]["burnt"])
    assert f"{cards + burnt} cards, 3 rounds" in lines[0]
    assert lines[2].startswith("table t1: ")
    assert "(2 recomputed, 0 not revealed yet, 0 not checked), 6 round results checked" in lines[2]


def test_msgpack_input_is_read_alike(capsys: pytest.CaptureFixture[str], tmp_path: Path) -> None:
    """The same stream as msgpack objects gives the same verdict, detected or named."""
    table = honest()
    status, json_lines = verify(capsys, tmp_path, table.events)
    assert status == 0
    assert verify(capsys, tmp_path, table.events, "--format", "msgpack") == (0, json_lines)
    path = write(tmp_path, table.events, "msgpack")
    assert main(["verify", str(path)]) == 0  # detected
    assert capsys.readouterr().out.splitlines() == json_lines


def test_a_shoe_not_revealed_yet_is_checked_against_the_root(
    capsys: pytest.CaptureFixture[str], tmp_path: Path
) -> None:
    status, lines = verify(capsys, tmp_path, honest(reveal_last=False).events)
    assert status == 0
    assert lines[1].endswith("cards checked against the root, not revealed yet")
    assert "(1 recomputed, 1 not revealed yet, 0 not checked)" in lines[2]


def _changed(forge_tree: bool, reveal: bool) -> tuple[FairTable, int]:
    """A stream whose shoe shows another card at the 3rd position dealt of round 2."""
    probe = FairTable()
    probe.shoe(reveal=False)
    position = [e for e in probe.events if e["kind"] == "card" and e["round"] == 2][2]["position"]
    shoe_cards = shuffle(SEEDS[0], client_seed(("alice", "bob")), 1, (7, 7)).cards
    table = FairTable()
    tamper = Tamper(cards={position: other_card(shoe_cards[position])}, forge_tree=forge_tree)
    table.shoe(tamper=tamper, reveal=reveal)
    return table, position


def test_a_changed_card_is_caught_before_the_reveal(
    capsys: pytest.CaptureFixture[str], tmp_path: Path
) -> None:
    """Its proof does not lead to the sealed root: the line names round, card, position."""
    table, position = _changed(forge_tree=False, reveal=False)
    event = event_at(table.events, position)
    status, lines = verify(capsys, tmp_path, table.events)
    assert status == 1
    assert lines[0].startswith("shoe 1 (table t1): ")
    expected = (
        f"MISMATCH: round 2, card {event['index']} ({event['hand']}), position {position}, "
        f"{event['rank']}{event['suit']}: its proof does not lead to the sealed root"
    )
    assert expected in lines[0]


def test_a_forged_tree_passes_the_proofs_and_fails_at_the_reveal(
    capsys: pytest.CaptureFixture[str], tmp_path: Path
) -> None:
    """A forger who sealed a root over the changed card passes every proof (so, before the
    reveal, nothing shows); the reveal recomputes the shoe and names the card and the root."""
    table, position = _changed(forge_tree=True, reveal=False)
    assert verify(capsys, tmp_path, table.events)[0] == 0
    table, position = _changed(forge_tree=True, reveal=True)
    event = event_at(table.events, position)
    status, lines = verify(capsys, tmp_path, table.events)
    assert status == 1
    assert (
        f"MISMATCH: round 2, card {event['index']} ({event['hand']}), position {position}, "
        in lines[0]
    )
    assert "shown, the revealed shoe has" in lines[0]
    assert any(line.startswith("  also: round 3, the sealed root ") for line in lines)
    assert "is not the revealed shoe's" in lines[1]


@pytest.mark.parametrize(
    ("tamper", "expected"),
    [
        (Tamper(skip=20), "position 21, 10s, but the next position is 20: position 20 skipped"),
        (Tamper(reuse=20), "at a position already used"),
    ],
    ids=["skipped", "reused"],
)
def test_positions_must_follow_one_another(
    capsys: pytest.CaptureFixture[str], tmp_path: Path, tamper: Tamper, expected: str
) -> None:
    """A skipped position (a card hidden) or a reused one (shown twice) is a mismatch, even
    though every proof is good."""
    table = FairTable()
    table.shoe(tamper=tamper, reveal=False)
    status, lines = verify(capsys, tmp_path, table.events)
    assert status == 1
    assert expected in lines[0] and "round " in lines[0]
    assert "proof" not in lines[0]


def _sealed(table: FairTable) -> Message:
    return next(e for e in table.events if e["kind"] == "shoe_sealed")


def test_a_wrong_client_seed_is_caught_at_the_seal(
    capsys: pytest.CaptureFixture[str], tmp_path: Path
) -> None:
    table = honest(shoes=1)
    _sealed(table)["client_seed"] = client_seed(["someone else"]).hex()
    status, lines = verify(capsys, tmp_path, table.events)
    assert status == 1
    assert "MISMATCH: round 1, shoe_sealed: client_seed is " in lines[0]


def test_sealed_entropy_must_be_the_accepted_entropy(
    capsys: pytest.CaptureFixture[str], tmp_path: Path
) -> None:
    """A seal that drops a player's value (and hashes the rest honestly) is caught."""
    table = honest(shoes=1)
    _sealed(table)["entropy"] = ["alice"]
    _sealed(table)["client_seed"] = client_seed(["alice"]).hex()
    status, lines = verify(capsys, tmp_path, table.events)
    assert status == 1
    assert "shoe_sealed entropy ['alice'], the entropy_accepted events ['alice', 'bob']" in lines[0]


def test_a_wrong_seed_is_caught_at_the_reveal(
    capsys: pytest.CaptureFixture[str], tmp_path: Path
) -> None:
    table = honest(shoes=1)
    table.events[-1]["seed"] = SEEDS[5].hex()
    status, lines = verify(capsys, tmp_path, table.events)
    assert status == 1
    assert "MISMATCH: round 3, shoe_revealed seed hashes to " in lines[0]
    assert "not the commitment" in lines[0]


def test_a_result_that_does_not_match_its_cards(
    capsys: pytest.CaptureFixture[str], tmp_path: Path
) -> None:
    table = honest(shoes=1)
    result = next(e for e in table.events if e["kind"] == "round_result" and e["round"] == 2)
    result["player_total"] = (result["player_total"] + 1) % 10
    status, lines = verify(capsys, tmp_path, table.events)
    assert status == 1
    assert "MISMATCH: round 2, round_result player_total" in lines[0]


def test_a_payout_the_rules_do_not_give(capsys: pytest.CaptureFixture[str], tmp_path: Path) -> None:
    table = honest(shoes=1)
    settled = next(e for e in table.events if e["kind"] == "round_settled" and e["round"] == 1)
    settled["paid"] += 1
    status, lines = verify(capsys, tmp_path, table.events)
    assert status == 1
    assert f"MISMATCH: round 1, round_settled paid {settled['paid']}, the rules pay " in lines[0]


def test_missing_burnt_cards_are_a_mismatch(
    capsys: pytest.CaptureFixture[str], tmp_path: Path
) -> None:
    """A burn that shows fewer cards than it burns hides positions."""
    table = honest(shoes=1)
    burn = next(e for e in table.events if e["kind"] == "burn")
    burn["burnt"] = burn["burnt"][:-1] or [burn["shown"]]
    status, lines = verify(capsys, tmp_path, table.events)
    assert status == 1
    assert "round 1, burn" in lines[0]


def test_a_gap_in_the_input_is_not_vouched_for(
    capsys: pytest.CaptureFixture[str], tmp_path: Path
) -> None:
    table = honest(shoes=1)
    events = [e for e in table.events if not (e["kind"] == "betting_closed" and e["round"] == 2)]
    status, lines = verify(capsys, tmp_path, events)
    assert status == 1
    assert "INCOMPLETE: events missing from the input (seq " in lines[0]


def test_a_stream_starting_inside_a_shoe(
    capsys: pytest.CaptureFixture[str], tmp_path: Path
) -> None:
    """The first shoe, met without its commitment, is not checked (and says so); the next is."""
    table = honest()
    start = next(i for i, e in enumerate(table.events) if e["round"] == 2)
    status, lines = verify(capsys, tmp_path, table.events[start:])
    assert status == 0
    cards = sum(e["kind"] == "card" for e in table.events[start:] if e["round"] <= 3)
    assert lines[0] == (
        f"shoe 1 (table t1): {cards} cards, 2 rounds: not checked: its shoe_committed is not "
        "in the input (the input starts inside it, at round 2)"
    )
    assert lines[1].endswith("ok, revealed and recomputed")


def test_nothing_to_check(capsys: pytest.CaptureFixture[str], tmp_path: Path) -> None:
    """Events without any committed shoe (a server from before issue 18): exit 3, said so;
    their round results are still judged (a wrong one is still 1)."""
    stream = Stream()
    events = stream.round(1, BANKER_WINS) + stream.round(2, PLAYER_NATURAL)
    status, lines = verify(capsys, tmp_path, events)
    assert status == 3
    assert lines[-1].startswith("nothing to check: no shoe_committed in the input")
    events[-2]["winner"] = "tie"
    assert verify(capsys, tmp_path, events)[0] == 1
    assert main(["verify", str(write(tmp_path, []))]) == 3


@pytest.mark.parametrize(
    ("argv", "message"),
    [
        ([], "give a FILE (or - for stdin), or --url with --table"),
        (["--url", "ws://127.0.0.1:1/ws"], "--url needs --table"),
        (["/nonexistent/events.jsonl"], "/nonexistent/events.jsonl: No such file"),
        (["--url", "ws://127.0.0.1:1/ws", "--table", "t1"], "ws://127.0.0.1:1/ws: "),
    ],
)
def test_usage_errors_exit_2(
    capsys: pytest.CaptureFixture[str], argv: list[str], message: str
) -> None:
    assert main(["verify", *argv]) == 2
    err = capsys.readouterr().err
    assert err.startswith("baccarat verify: ") and message in err


@pytest.mark.parametrize(
    ("data", "message"),
    [
        (b'{"type": "event"}\nnot json\n', "line 2: not JSON"),
        (b"[1, 2]\n", "a list, not a message"),
        (msgpack.packb({"type": "event"}) + msgpack.packb([1]), "msgpack object 2: a list"),
        (msgpack.packb({"type": "event", "table": "t1"})[:-3], "truncated"),
    ],
    ids=["bad-json", "json-list", "msgpack-list", "msgpack-truncated"],
)
def test_unreadable_input_exits_2(
    capsys: pytest.CaptureFixture[str], tmp_path: Path, data: bytes, message: str
) -> None:
    path = tmp_path / "events"
    path.write_bytes(data)
    fmt = ["--format", "json"] if data.startswith(b"[") else []
    assert main(["verify", str(path), *fmt]) == 2
    assert message in capsys.readouterr().err


def test_stdin(monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]) -> None:
    """`-` reads standard input (bytes: msgpack works there too)."""
    import io
    import sys

    data = b"".join(msgpack.packb(e) for e in honest(shoes=1).events)
    monkeypatch.setattr(sys, "stdin", io.TextIOWrapper(io.BytesIO(data)))
    assert main(["verify", "-"]) == 0
    assert capsys.readouterr().out.startswith("shoe 1 (table t1): ")


def test_help_documents_the_exit_statuses(capsys: pytest.CaptureFixture[str]) -> None:
    assert main(["verify", "--help"]) == 0
    out = capsys.readouterr().out
    for line in ("0  every shoe seen checks out", "1  a mismatch", "2  bad usage", "3  nothing"):
        assert line in out
