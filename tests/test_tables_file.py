"""Tables and their rules from a TOML file (`--tables-file`), and its one-line errors."""

from __future__ import annotations

import dataclasses
import json
import subprocess
import sys
from pathlib import Path

import pytest
from websockets.asyncio.client import connect
from websockets.typing import Subprotocol

from server.app import Node, tables_of
from server.config import Settings
from server.core.bets import Spot, SpotLimit
from server.core.rules import PRESETS
from server.tables_file import read_tables_file, tables_from_toml

VIP = """
[tables.vip]
preset = "classic8"
name = "VIP Baccarat"
description = "High limits: Banker pays 0.95 to 1"
[tables.vip.limits]
banker = [1000, 500000]   # minimum and maximum, minor units
"""


def test_the_issue_example_gives_a_vip_table_with_its_own_limits() -> None:
    """A preset with one spot's limits replaced; the other spots keep the preset's."""
    (table_id, rules), *others = tables_from_toml(VIP).items()
    assert table_id == "vip" and others == []
    assert rules.limits.for_spot(Spot.BANKER) == SpotLimit(1000, 500_000)
    classic = PRESETS["classic8"]
    for spot in (Spot.PLAYER, Spot.TIE, Spot.PLAYER_PAIR, Spot.BANKER_PAIR):
        assert rules.limits.for_spot(spot) == classic.limits.for_spot(spot)
    assert (rules.decks, rules.paytable) == (classic.decks, classic.paytable)


def test_every_rule_can_be_set_and_tables_keep_file_order() -> None:
    """Rules, paytable and description override the preset; the preset defaults to the id."""
    tables = tables_from_toml(
        """
        [tables.punto6]
        [tables.high]
        preset = "nocommission8"
        name = "high-roller"
        description = "Salon prive"
        decks = 6
        cut_card_from_end = 14
        reshuffle_every_round = true
        tie_pays = 9
        pair_pays = 25
        [tables.high.limits]
        player = [5000, 2000000]
        tie = [500, 100000]
        """
    )
    assert list(tables) == ["punto6", "high"]
    assert tables["punto6"] == PRESETS["punto6"]
    high = tables["high"]
    assert (high.title, high.description, high.decks) == ("high-roller", "Salon prive", 6)
    assert high.name == "nocommission8"  # the rules' key stays the preset's
    assert (high.cut_card_from_end, high.reshuffle_every_round) == (14, True)
    assert high.paytable.no_commission and high.paytable.tie_pays == 9
    assert high.paytable.pair_pays == 25
    assert high.limits.for_spot(Spot.PLAYER) == SpotLimit(5000, 2_000_000)
    assert high.limits.for_spot(Spot.TIE) == SpotLimit(500, 100_000)


@pytest.mark.parametrize(
    ("text", "complaint"),
    [
        ("[tables.vip]\npreset = 'nope'", "tables.vip: unknown rules preset 'nope'"),
        ("[tables.vip]\npreset = 'classic8'\ndeck = 6", "tables.vip: unknown key 'deck'"),
        ("[tables.vip]\npreset = 'classic8'\ndecks = 9", "tables.vip: decks must be 1-8"),
        ("[tables.vip]\npreset = 'classic8'\ndecks = true", "tables.vip.decks: must be a whole"),
        ("[tables.vip]\npreset = 8", "tables.vip.preset: must be a string"),
        ("[tables.vip]\npreset='classic8'\n[tables.vip.limits]\nbanker = [9, 1]", "minimum <="),
        ("[tables.vip]\npreset='classic8'\n[tables.vip.limits]\nbanker = 5", "[minimum, maximum]"),
        ("[tables.vip]\npreset='classic8'\n[tables.vip.limits]\nrose = [1, 2]", "unknown spot"),
        ("[tables.vip]\npreset='classic8'\nbanker_commission_bp = 20000", "0-10000"),
        ("[tables.vip]\npreset='classic8'\ntie_pays = 0", "at least 1"),
        ("[tables.'v i p']\npreset='classic8'", "tables.v i p: a table id is 1-64"),
        ("[tables]\nvip = 'classic8'", "tables.vip: must be a table"),
        ("[tables]", "no tables"),
        ("[table.vip]", "unknown top-level key 'table'"),
        ("[tables.vip", "not valid TOML"),
    ],
)
def test_a_bad_file_is_one_line_naming_the_key(tmp_path: Path, text: str, complaint: str) -> None:
    """Each mistake is one ValueError line with the file's name and the key at fault."""
    path = tmp_path / "tables.toml"
    path.write_text(text)
    with pytest.raises(ValueError) as caught:
        read_tables_file(str(path))
    message = str(caught.value)
    assert message.startswith(f"tables file {path}: ") and complaint in message, message
    assert "\n" not in message


def test_a_missing_file_is_reported() -> None:
    """A file that cannot be read is named in the error."""
    with pytest.raises(ValueError, match=r"tables file /nonexistent/t\.toml: cannot read it"):
        read_tables_file("/nonexistent/t.toml")


def test_tables_and_tables_file_together_are_refused(tmp_path: Path) -> None:
    """One source of tables: --tables and --tables-file together are an error."""
    path = tmp_path / "t.toml"
    path.write_text(VIP)
    assert list(tables_of(Settings(tables_file=str(path)))) == ["vip"]
    with pytest.raises(ValueError, match="not both"):
        tables_of(Settings(tables="classic8", tables_file=str(path)))


def test_serve_stops_at_start_on_a_bad_file_in_one_line(tmp_path: Path) -> None:
    """`baccarat serve --tables-file` with a bad file: one line on stderr, exit status 2."""
    path = tmp_path / "t.toml"
    path.write_text("[tables.vip]\npreset = 'classic8'\n[tables.vip.limits]\nbanker = [0, 10]\n")
    done = subprocess.run(
        [sys.executable, "-m", "server.cli", "serve", "--tables-file", str(path)],
        capture_output=True,
        text=True,
        timeout=30,
        check=False,
    )
    assert done.returncode == 2
    assert done.stderr.startswith(f"baccarat serve: tables file {path}: tables.vip.limits.banker")
    assert len(done.stderr.strip().splitlines()) == 1


async def test_a_node_serves_the_files_tables_with_their_limits(tmp_path: Path) -> None:
    """A node started with the file offers the VIP table, and a bet under its minimum is
    refused with LIMIT."""
    path = tmp_path / "t.toml"
    path.write_text(VIP)
    settings = Settings(port=0, tables_file=str(path), static_dir=str(tmp_path / "none"))
    async with (
        Node(settings) as node,
        connect(
            f"ws://127.0.0.1:{node.port}/ws", subprotocols=[Subprotocol("baccarat.v1.json")]
        ) as ws,
    ):
        welcome = json.loads(await ws.recv())
        assert [(t["id"], t["limits"]["banker"]) for t in welcome["tables"]] == [
            ("vip", [1000, 500_000])
        ]
        # What the lobby shows of the table: the file's name (as the title) and description;
        # the rules' name stays the preset's.
        (vip,) = welcome["tables"]
        assert (vip["title"], vip["description"], vip["name"]) == (
            "VIP Baccarat",
            "High limits: Banker pays 0.95 to 1",
            "classic8",
        )
        state = await node.store.load_state("vip")
        assert state is not None
        bet = {"table": "vip", "round": state.round, "bet_id": "b", "spot": "banker"}
        await ws.send(json.dumps({"type": "bet", "amount": 500, **bet}))
        while (answer := json.loads(await ws.recv()))["type"] != "bet_rejected":
            pass
        assert answer["code"] == "LIMIT"


NAMED = """
[tables.vip]
preset = "punto6"
name = "The VIP Room"
description = "High limits: Banker pays 0.95 to 1"
[tables.plain]
preset = "nocommission8"
"""


@pytest.mark.parametrize("source", ["presets", "file"])
async def test_welcome_and_snapshot_carry_each_tables_title_and_description(
    tmp_path: Path, source: str
) -> None:
    """What the lobby and the table's header show: a preset's title and description, or the
    tables file's `name` (as `title`) and `description`; a file's table without them keeps
    its preset's. `name` stays the rules' key, as in round_opened.rules."""
    if source == "presets":
        settings = Settings(port=0, tables="vip=punto6,plain=nocommission8")
        vip = (PRESETS["punto6"].title, PRESETS["punto6"].description)
    else:
        path = tmp_path / "t.toml"
        path.write_text(NAMED)
        settings = Settings(port=0, tables_file=str(path))
        vip = ("The VIP Room", "High limits: Banker pays 0.95 to 1")
    plain = (PRESETS["nocommission8"].title, PRESETS["nocommission8"].description)
    settings = dataclasses.replace(settings, static_dir=str(tmp_path / "none"))
    async with (
        Node(settings) as node,
        connect(
            f"ws://127.0.0.1:{node.port}/ws", subprotocols=[Subprotocol("baccarat.v1.json")]
        ) as ws,
    ):
        welcome = json.loads(await ws.recv())
        shown = {t["id"]: (t["title"], t["description"], t["name"]) for t in welcome["tables"]}
        assert shown == {"vip": (*vip, "punto6"), "plain": (*plain, "nocommission8")}
        await ws.send(json.dumps({"type": "join", "table": "vip"}))
        while (snapshot := json.loads(await ws.recv()))["type"] != "snapshot":
            pass
        rules = snapshot["rules"]
        assert (rules["title"], rules["description"], rules["name"]) == (*vip, "punto6")
