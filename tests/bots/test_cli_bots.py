"""`baccarat bots` usage errors: one line on stderr, exit 2, nothing started."""

from __future__ import annotations

import pytest

from server.cli import main


@pytest.mark.parametrize(
    ("argv", "words"),
    [
        (["bots"], "--url"),
        (["bots", "--url", "http://x/ws"], "ws://"),
        (["bots", "--url", "ws://x/ws", "--bots", "-1"], "--bots"),
        (["bots", "--url", "ws://x/ws", "--duration", "nan"], "--duration"),
        (["bots", "--url", "ws://x/ws", "--strategy", "double"], "--strategy"),
        (["bots", "--url", "ws://x/ws", "--secret", "short"], "at least 32"),
        (["bots", "--url", "ws://x/ws", "--secret", "/nonexistent/secret"], "no secret file"),
        (["bots", "--url", "ws://x/ws", "--token-secret", "a" * 40], "--token-secret"),
    ],
)
def test_bad_options_are_one_line_and_status_2(
    argv: list[str], words: str, capsys: pytest.CaptureFixture[str]
) -> None:
    """Each bad option is named on one line of stderr and the status is 2."""
    assert main(argv) == 2
    err = capsys.readouterr().err.strip()
    assert words in err and len(err.splitlines()) == 1


def test_help_lists_every_exit_status(capsys: pytest.CaptureFixture[str]) -> None:
    """`baccarat bots --help` says what each exit status means, the connection failures too."""
    assert main(["bots", "--help"]) == 0
    out = capsys.readouterr().out
    listed = out[out.index("exit status") :]
    for code in (0, 1, 2, 3):
        assert f"\n  {code}  " in listed
    assert "could not connect" in listed and "usage error" in listed
