"""The `baccarat` command: coup, odds, roads and the serve hook, in-process and as a process."""

from __future__ import annotations

import argparse
import io
import json
import subprocess
import sys
import types
from pathlib import Path

import jwt
import pytest

from server.auth import Identity, Role, verify_token
from server.cli import build_parser, main

BACCARAT = Path(sys.executable).parent / "baccarat"


def _run(capsys: pytest.CaptureFixture[str], *argv: str) -> tuple[int, str, str]:
    status = main(list(argv))
    out, err = capsys.readouterr()
    return status, out, err


def _one_line_error(capsys: pytest.CaptureFixture[str], *argv: str) -> str:
    """Run a failing command; check status 2, nothing on stdout, one line on stderr."""
    status, out, err = _run(capsys, *argv)
    assert status == 2
    assert out == ""
    assert len(err.splitlines()) == 1
    return err.strip()


# --- coup ------------------------------------------------------------------------------------


def test_coup_prints_one_json_object(capsys: pytest.CaptureFixture[str]) -> None:
    """Cards in shoe order resolve to Coup.to_dict() as one JSON line."""
    status, out, _ = _run(capsys, "coup", "9h", "8", "K", "K")
    assert status == 0
    data = json.loads(out)
    assert data["player"] == ["9", "K"]
    assert data["banker"] == ["8", "K"]
    assert (data["player_total"], data["banker_total"]) == (9, 8)
    assert data["winner"] == "player"
    assert data["natural"] is True
    assert data["cards_used"] == 4


def test_coup_ignores_extra_cards(capsys: pytest.CaptureFixture[str]) -> None:
    """Cards the coup does not need are ignored; cards_used says how many were taken."""
    status, out, _ = _run(capsys, "coup", "2 3 2 3", "4,5", "Q")
    data = json.loads(out)
    assert status == 0
    assert data["player"] == ["2", "2", "4"]
    assert data["banker"] == ["3", "3"]  # Banker on 6 stands when the Player's third is 4
    assert data["cards_used"] == 5


def test_coup_bad_card(capsys: pytest.CaptureFixture[str]) -> None:
    """A card that is not a card: exit 2, one line naming it."""
    err = _one_line_error(capsys, "coup", "Kh", "5", "Z", "2")
    assert err.startswith("baccarat coup: bad card 'Z'")


def test_coup_too_few_cards(capsys: pytest.CaptureFixture[str]) -> None:
    """A coup that needs a card that is not given: exit 2, one line saying which."""
    err = _one_line_error(capsys, "coup", "Kh", "5", "3", "2")
    assert err == "baccarat coup: coup needs card 5, only 4 given"


def test_coup_reads_lines_from_stdin(
    capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch
) -> None:
    """Without cards, each stdin line is a coup; bad lines are reported by number, then exit 2."""
    monkeypatch.setattr(sys, "stdin", io.StringIO("9 8 K K\nZ 1\n\n2 3 2\n4 4 4 4\n"))
    status, out, err = _run(capsys, "coup")
    assert status == 2
    winners = [json.loads(line)["winner"] for line in out.splitlines()]
    assert winners == ["player", "tie"]
    assert err.splitlines() == [
        "baccarat coup: line 2: bad card 'Z': rank must be one of A 2-9 10 J Q K (T for 10)",
        "baccarat coup: line 4: coup needs card 4, only 3 given",
    ]


def test_coup_stdin_all_good_exits_zero(
    capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch
) -> None:
    """Stdin mode with only good lines exits 0."""
    monkeypatch.setattr(sys, "stdin", io.StringIO("9 8 K K\n"))
    assert _run(capsys, "coup")[0] == 0


# --- odds ------------------------------------------------------------------------------------


def test_odds_json(capsys: pytest.CaptureFixture[str]) -> None:
    """--json prints probabilities, house edges as floats, and exact fractions as strings."""
    status, out, _ = _run(capsys, "odds", "--decks", "8", "--json")
    data = json.loads(out)
    assert status == 0
    assert round(data["banker"], 10) == 0.4585974226
    assert round(data["player"], 10) == 0.4462466093
    assert round(data["tie"], 10) == 0.0951559680
    assert round(data["house_edge"]["banker"], 8) == 0.01057906
    assert set(data["house_edge"]) == {"banker", "player", "tie", "player_pair", "banker_pair"}
    assert data["exact"]["player_pair"] == "31/415"
    assert data["exact"]["house_edge"]["banker_pair"] == "43/415"
    assert data["cards_left"] == 416


def test_odds_paytable_options(capsys: pytest.CaptureFixture[str]) -> None:
    """--no-commission, --tie-pays 9 and --pair-pays change the edges, not the probabilities."""
    _, out, _ = _run(capsys, "odds", "--json", "--no-commission", "--tie-pays", "9")
    data = json.loads(out)
    assert round(data["house_edge"]["banker"] * 100, 6) == 1.458104
    assert round(data["house_edge"]["tie"] * 100, 6) == 4.844032
    _, out, _ = _run(capsys, "odds", "--json", "--commission", "2.5%", "--pair-pays", "12")
    data = json.loads(out)
    assert data["paytable"]["banker_commission_bp"] == 250
    assert data["exact"]["house_edge"]["player_pair"] == "12/415"


def test_odds_table(capsys: pytest.CaptureFixture[str]) -> None:
    """The human output is a table with each bet, its probability and edge."""
    status, out, _ = _run(capsys, "odds", "--decks", "6")
    assert status == 0
    assert "6 decks, 312 cards left (0 dealt)" in out
    assert "1.055849%" in out
    assert "0.4586527188" in out


def test_odds_with_dealt_cards(capsys: pytest.CaptureFixture[str]) -> None:
    """--dealt removes cards from the shoe and the odds change."""
    _, full, _ = _run(capsys, "odds", "--json")
    status, out, _ = _run(capsys, "odds", "--json", "--dealt", "Kh 5 3", "--dealt", "9,9")
    data = json.loads(out)
    assert status == 0
    assert data["cards_left"] == 411
    assert data["dealt"] == ["Kh", "5", "3", "9", "9"]
    assert data["banker"] != json.loads(full)["banker"]


@pytest.mark.parametrize(
    ("argv", "message"),
    [
        (["--decks", "0"], "baccarat odds: argument --decks: decks must be 1-8, got 0"),
        (["--decks", "9"], "baccarat odds: argument --decks: decks must be 1-8, got 9"),
        (["--decks", "x"], "baccarat odds: argument --decks: not a number of decks: 'x'"),
        (["--dealt", "Kh Z"], "baccarat odds: --dealt: bad card 'Z'"),
        (["--decks", "1", "--dealt", "K K K K K"], "baccarat odds: --dealt: cannot remove K"),
        (["--decks", "1", "--dealt", "Kh Kh"], "baccarat odds: --dealt: 2 x Kh dealt"),
        (["--commission", "5x"], "baccarat odds: argument --commission: '5x'"),
        (["--commission", "0.001%"], "baccarat odds: argument --commission: '0.001%'"),
        (["--tie-pays", "7"], "baccarat odds: argument --tie-pays: invalid choice: 7"),
        (["--pair-pays", "0"], "baccarat odds: argument --pair-pays: must be a positive"),
        (["--commission", "5%", "--no-commission"], "baccarat odds: argument --no-commission"),
    ],
)
def test_odds_errors(capsys: pytest.CaptureFixture[str], argv: list[str], message: str) -> None:
    """Bad decks, dealt cards or paytable options: exit 2 with a one-line message."""
    assert _one_line_error(capsys, "odds", *argv).startswith(message)


def test_odds_too_few_cards_left(capsys: pytest.CaptureFixture[str]) -> None:
    """Dealing all but five cards of a deck leaves too few to enumerate a coup: exit 2."""
    ranks = ["A", "2", "3", "4", "5", "6", "7", "8", "9", "10", "J", "Q", "K"]
    dealt = " ".join(rank for rank in ranks for _ in range(4))
    err = _one_line_error(capsys, "odds", "--decks", "1", "--dealt", dealt.rsplit(" ", 5)[0])
    assert err == "baccarat odds: --dealt: the shoe has 5 cards; odds need at least 6"


# --- token -----------------------------------------------------------------------------------

SECRET = "cli-test-secret-" + "x" * 32


@pytest.fixture
def no_env_secret(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.delenv("BACCARAT_SECRET", raising=False)


@pytest.mark.usefixtures("no_env_secret")
def test_token_with_secret_option(capsys: pytest.CaptureFixture[str]) -> None:
    """`token` prints one token, signed with --secret, naming the player, name and role."""
    status, out, err = _run(
        capsys, "token", "--player", "alice", "--name", "Alice", "--role", "operator",
        "--secret", SECRET,
    )  # fmt: skip
    assert (status, err) == (0, "")
    assert len(out.splitlines()) == 1
    assert verify_token(SECRET, out.strip()) == Identity("alice", "Alice", Role.OPERATOR)


def test_token_secret_from_environment(
    capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch
) -> None:
    """Without --secret, BACCARAT_SECRET is used; the role defaults to player."""
    monkeypatch.setenv("BACCARAT_SECRET", SECRET)
    status, out, _ = _run(capsys, "token", "--player", "bob")
    assert status == 0
    assert verify_token(SECRET, out.strip()) == Identity("bob", "bob", Role.PLAYER)


def test_token_secret_option_beats_environment(
    capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch
) -> None:
    """--secret wins over BACCARAT_SECRET."""
    monkeypatch.setenv("BACCARAT_SECRET", "e" * 40)
    _, out, _ = _run(capsys, "token", "--player", "bob", "--secret", SECRET)
    assert verify_token(SECRET, out.strip()).player == "bob"


@pytest.mark.usefixtures("no_env_secret")
def test_token_secret_from_a_file(capsys: pytest.CaptureFixture[str], tmp_path: Path) -> None:
    """--secret naming a file uses the file's stripped contents."""
    path = tmp_path / "secret"
    path.write_text(SECRET + "\n")
    _, out, _ = _run(capsys, "token", "--player", "carol", "--secret", str(path))
    assert verify_token(SECRET, out.strip()).player == "carol"


@pytest.mark.usefixtures("no_env_secret")
def test_token_ttl(capsys: pytest.CaptureFixture[str]) -> None:
    """--ttl sets exp = iat + ttl; the default is one day."""
    _, out, _ = _run(capsys, "token", "--player", "a", "--ttl", "90", "--secret", SECRET)
    claims = jwt.decode(out.strip(), options={"verify_signature": False})
    assert claims["exp"] - claims["iat"] == 90
    _, out, _ = _run(capsys, "token", "--player", "a", "--secret", SECRET)
    claims = jwt.decode(out.strip(), options={"verify_signature": False})
    assert claims["exp"] - claims["iat"] == 86400


@pytest.mark.usefixtures("no_env_secret")
@pytest.mark.parametrize(
    ("argv", "message"),
    [
        (["--player", "a"], "baccarat token: no secret: pass --secret or set BACCARAT_SECRET"),
        (["--player", "a", "--secret", ""], "baccarat token: no secret"),
        (["--player", "a", "--secret", "short"], "baccarat token: secret is 5 bytes"),
        (["--player", "a", "--secret", "/no/such/file"], "baccarat token: no secret file at"),
        (["--secret", SECRET], "baccarat token: the following arguments are required: --player"),
        (["--player", "a b", "--secret", SECRET], "baccarat token: player id 'a b'"),
        (["--player", "x" * 65, "--secret", SECRET], "baccarat token: player id"),
        (["--player", "a", "--name", "", "--secret", SECRET], "baccarat token: name ''"),
        (
            ["--player", "a", "--role", "admin", "--secret", SECRET],
            "baccarat token: argument --role",
        ),
        (["--player", "a", "--ttl", "0", "--secret", SECRET], "baccarat token: argument --ttl"),
        (["--player", "a", "--ttl", "1h", "--secret", SECRET], "baccarat token: argument --ttl"),
        (["--player", "a", "--ttl", str(10**12), "--secret", SECRET], "baccarat token: ttl"),
    ],
)
def test_token_errors(capsys: pytest.CaptureFixture[str], argv: list[str], message: str) -> None:
    """A missing secret or a bad argument: exit 2, nothing on stdout, one line on stderr."""
    assert _one_line_error(capsys, "token", *argv).startswith(message)


def test_console_script_token(tmp_path: Path) -> None:
    """`baccarat token` runs as a process with the secret from the environment."""
    done = subprocess.run(
        [str(BACCARAT), "token", "--player", "dave", "--role", "spectator"],
        capture_output=True,
        text=True,
        timeout=60,
        check=False,
        env={"BACCARAT_SECRET": SECRET, "PATH": "/usr/bin:/bin"},
    )
    assert (done.returncode, done.stderr) == (0, "")
    assert verify_token(SECRET, done.stdout.strip()).role is Role.SPECTATOR


# --- roads, serve, usage ----------------------------------------------------------------------


def test_roads_json(capsys: pytest.CaptureFixture[str]) -> None:
    """roads prints Roads.to_dict() for the sequence; lowercase letters are accepted."""
    status, out, _ = _run(capsys, "roads", "bppbtb")
    data = json.loads(out)
    assert status == 0
    assert len(data["bead_plate"]) == 6
    assert data["big_road"][3] == {
        "row": 0,
        "col": 2,
        "winner": "banker",
        "ties": 1,
        "player_pair": False,
        "banker_pair": False,
    }
    assert data["big_eye_boy"] == ["blue", "blue", "red"]


def test_roads_with_pairs(capsys: pytest.CaptureFixture[str]) -> None:
    """--pairs gives each result's pair code; the cells carry the flags. A bad code: exit 2."""
    status, out, _ = _run(capsys, "roads", "BPT", "--pairs", "13")
    data = json.loads(out)
    assert status == 0
    flags = [(c["player_pair"], c["banker_pair"]) for c in data["bead_plate"]]
    assert flags == [(True, False), (True, True), (False, False)]
    assert (data["big_road"][1]["player_pair"], data["big_road"][1]["banker_pair"]) == (True, True)
    err = _one_line_error(capsys, "roads", "BP", "--pairs", "05")
    assert err.startswith("baccarat roads: bad pair code '5'")


def test_roads_bad_letter(capsys: pytest.CaptureFixture[str]) -> None:
    """A letter other than B, P, T: exit 2 with a one-line message naming it."""
    err = _one_line_error(capsys, "roads", "BPXB")
    assert err.startswith("baccarat roads: bad result 'X' at position 3")


def test_no_command_is_a_usage_error(capsys: pytest.CaptureFixture[str]) -> None:
    """`baccarat` alone exits 2 with one line saying a command is needed."""
    assert "required" in _one_line_error(capsys)


def test_help_exits_zero(capsys: pytest.CaptureFixture[str]) -> None:
    """--help prints usage and main returns 0 instead of raising SystemExit."""
    status, out, _ = _run(capsys, "--help")
    assert status == 0
    assert "coup" in out
    assert "serve" in out


def test_serve_calls_the_app_lazily(monkeypatch: pytest.MonkeyPatch) -> None:
    """`serve` imports server.app only when run and hands it the parsed arguments."""
    seen: list[str] = []

    def serve_from_args(args: argparse.Namespace) -> int:
        seen.append(args.command)
        return 0

    fake = types.ModuleType("server.app")
    fake.serve_from_args = serve_from_args  # type: ignore[attr-defined]
    monkeypatch.setitem(sys.modules, "server.app", fake)
    assert build_parser().parse_args(["serve"]).command == "serve"
    assert main(["serve"]) == 0
    assert seen == ["serve"]


# --- as a process -----------------------------------------------------------------------------


def test_console_script_coup_from_stdin() -> None:
    """The installed `baccarat` script resolves coups from stdin and reports a bad line."""
    done = subprocess.run(
        [str(BACCARAT), "coup"],
        input="9 8 K K\n2 3 2\n",
        capture_output=True,
        text=True,
        timeout=60,
        check=False,
    )
    assert done.returncode == 2
    assert json.loads(done.stdout)["winner"] == "player"
    assert done.stderr == "baccarat coup: line 2: coup needs card 4, only 3 given\n"


def test_console_script_odds() -> None:
    """`baccarat odds --decks 8 --json` runs as a process and prints the exact odds."""
    done = subprocess.run(
        [str(BACCARAT), "odds", "--decks", "8", "--json"],
        capture_output=True,
        text=True,
        timeout=60,
        check=True,
    )
    assert json.loads(done.stdout)["exact"]["player_pair"] == "31/415"


def test_python_dash_m() -> None:
    """`python -m server.cli` works like the script, including the exit status."""
    done = subprocess.run(
        [sys.executable, "-m", "server.cli", "roads", "BPQ"],
        capture_output=True,
        text=True,
        timeout=60,
        check=False,
    )
    assert done.returncode == 2
    assert done.stderr.startswith("baccarat roads: bad result 'Q'")
