"""The options of `baccarat bots`, kept apart from the bots so that building the CLI's parser
loads no network code."""

from __future__ import annotations

import argparse
import textwrap

from server.bots.strategy import StrategyName

__all__ = ["EXIT_STATUSES", "add_bots_arguments"]

SECRET_ENV = "BACCARAT_SECRET"
EXIT_PROBLEMS = 1
EXIT_USAGE = 2
EXIT_NO_CONNECTION = 3
# `baccarat bots --help` prints these; the first that applies is the status.
EXIT_STATUSES = {
    0: "every bot connected and no mismatch, gap or duplicate was seen",
    EXIT_PROBLEMS: "a mismatch, gap or duplicate was seen (see `problems`), or a process of "
    "--procs left no report",
    EXIT_USAGE: "a usage error (a bad option or secret), or the site runs none of the --tables",
    EXIT_NO_CONNECTION: "one or more bots could not connect, were refused by the server, or "
    "were dropped and could not reconnect (`problems` says how many and the reason the "
    "server gave)",
}


def _count(text: str) -> int:
    try:
        value = int(text)
    except ValueError:
        value = -1
    if value < 0:
        raise argparse.ArgumentTypeError(f"must be a whole number >= 0, got {text!r}")
    return value


def _positive(text: str) -> int:
    value = _count(text)
    if value < 1:
        raise argparse.ArgumentTypeError(f"must be at least 1, got {text!r}")
    return value


def _seconds(text: str) -> float:
    try:
        value = float(text)
    except ValueError:
        value = -1.0
    if not 0 < value < 1e9:  # also refuses nan and inf
        raise argparse.ArgumentTypeError(f"must be a positive number of seconds, got {text!r}")
    return value


def _urls(text: str) -> list[str]:
    urls = [u.strip() for u in text.split(",") if u.strip()]
    for url in urls:
        if not url.startswith(("ws://", "wss://")):
            raise argparse.ArgumentTypeError(f"not a ws:// or wss:// URL: {url!r}")
    if not urls:
        raise argparse.ArgumentTypeError("no URL given")
    return urls


def _exit_statuses_text() -> str:
    lines = ["exit status (the first that applies; also after Ctrl-C):"]
    for code, meaning in EXIT_STATUSES.items():
        lines += textwrap.wrap(
            meaning, width=78, initial_indent=f"  {code}  ", subsequent_indent=" " * 5
        )
    return "\n".join(lines)


def add_bots_arguments(parser: argparse.ArgumentParser) -> None:
    add = parser.add_argument
    add("--url", type=_urls, required=True, help="ws://HOST:PORT/ws; a comma list spreads the bots")
    add("--bots", type=_count, default=10, help="player bots (10)")
    add("--spectators", type=_count, default=0, help="spectator bots (0)")
    add("--tables", default="", help="comma list of tables (default: every table of the welcome)")
    add("--duration", type=_seconds, help="seconds to run, then stop betting and finish")
    add("--rounds", type=_positive, help="stop once every bot has seen this many whole rounds")
    add("--strategy", choices=[s.value for s in StrategyName], default="flat")
    add("--unit", type=_positive, default=1, help="base stake, in multiples of the minimum (1)")
    add("--bets-per-round", type=_positive, default=1, help="bets per bot per round (1)")
    add("--encoding", choices=["msgpack", "json"], default="msgpack")
    parser.epilog = _exit_statuses_text()
    parser.formatter_class = argparse.RawDescriptionHelpFormatter
    add(
        "--secret",
        help="the site's shared secret, or a file holding it, as for `serve` and `token`: each "
        "bot gets a token signed with it (default: $BACCARAT_SECRET; none: guests)",
    )
    add("--report", help="write the JSON report here (default: print it on stdout)")
    add("--procs", type=_positive, default=1, help="processes to spread the bots over (1)")
    add("--grace", type=_seconds, default=30.0, help="seconds to wait for settlements at the end")
    add("--interval", type=_seconds, default=2.0, help="seconds between progress lines (2)")
    add("--connect-concurrency", type=_positive, default=100, help="handshakes at once (100)")
    add("--connect-timeout", type=_seconds, default=60.0, help="handshake timeout (60)")
    add("--seed", type=int, help="seed the bots' choices (default: random)")
    add("--quiet", action="store_true", help="no progress display")
    add(
        "--wallet",
        action="store_true",
        help="the site uses an operator's wallet (docs/wallet.md): payouts are checked as "
        "always, each bot's balance once its balance messages have arrived",
    )
    # Set by the parent of --procs for its children: not for people.
    add("--child", action="store_true", help=argparse.SUPPRESS)
    add("--first-bot", type=_count, default=0, help=argparse.SUPPRESS)
    add("--first-spectator", type=_count, default=0, help=argparse.SUPPRESS)
    add("--run-id", default="", help=argparse.SUPPRESS)
