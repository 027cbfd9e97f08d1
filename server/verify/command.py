"""`baccarat verify`: check a table's committed shoes from its events (issue 18).

The options, the run and the exit statuses; the checking itself is server/verify/stream.py.
"""

from __future__ import annotations

import argparse
import asyncio
import sys
from collections.abc import Mapping
from pathlib import Path
from typing import Any, TextIO

from server.verify.inputs import FORMATS, InputError, parse_messages
from server.verify.payouts import paytable_of
from server.verify.remote import RemoteError, fetch_table
from server.verify.report import USAGE, report
from server.verify.stream import StreamVerifier

__all__ = ["EPILOG", "add_verify_arguments", "run_verify"]

PROG = "baccarat verify"
EPILOG = """\
For every shoe it sees: each card's Merkle proof against the sealed root and its position
(consecutive from 0, burns included, none skipped or reused); the client seed against the
entropy events; at the reveal, the seed against the commitment and every dealt, burnt and
shown card against the recomputed shuffle; every round's result against its cards, and the
round's total payout against the paytable and the published stakes. One line per shoe, then
one summary line per table. Progress goes to stderr.

exit status:
  0  every shoe seen checks out (a shoe not revealed yet: every card against the root)
  1  a mismatch (the line names the table, round, card and position), or events missing
     inside the input (a gap in seq)
  2  bad usage, unreadable input, or a server that could not be read
  3  nothing to check: no shoe with its shoe_committed in the input
"""


def add_verify_arguments(parser: argparse.ArgumentParser) -> None:
    parser.add_argument(
        "file",
        nargs="?",
        metavar="FILE",
        help="recorded events: JSON lines or a stream of msgpack objects; - for stdin",
    )
    parser.add_argument(
        "--format",
        choices=FORMATS,
        default="auto",
        help="the file's encoding (auto: JSON lines if it starts with '{', else msgpack)",
    )
    parser.add_argument("--url", help="read from a running server instead: ws://HOST:PORT/ws")
    parser.add_argument(
        "--table", help="the table to verify (required with --url; with a file, only this one)"
    )
    parser.add_argument("--token", help="a token to connect with (default: an anonymous spectator)")


def _usage(message: str) -> int:
    print(f"{PROG}: {message}", file=sys.stderr)
    return USAGE


def _progress(text: str) -> None:
    print(f"{PROG}: {text}", file=sys.stderr, flush=True)


def _read(args: argparse.Namespace, stdin: TextIO) -> list[Mapping[str, Any]]:
    if args.file == "-":
        data = stdin.buffer.read()
    else:
        try:
            data = Path(args.file).read_bytes()
        except OSError as error:
            raise InputError(f"{args.file}: {error.strerror or error}") from None
    messages = parse_messages(data, args.format)
    _progress(f"read {len(messages)} messages from {'stdin' if args.file == '-' else args.file}")
    return messages


def _remote(args: argparse.Namespace) -> tuple[list[Mapping[str, Any]], StreamVerifier]:
    fetched = asyncio.run(fetch_table(args.url, args.table, args.token, _progress))
    rules = next(
        (
            t
            for t in fetched.welcome.get("tables", [])
            if isinstance(t, dict) and t.get("id") == args.table
        ),
        None,
    )
    if rules is None:
        raise RemoteError(f"{args.url} runs no table {args.table!r}")
    _progress(f"read {len(fetched.events)} events of {args.table}")
    return list(fetched.events), StreamVerifier(paytable_of(rules))


def run_verify(args: argparse.Namespace, out: TextIO | None = None) -> int:
    out = out or sys.stdout
    if (args.file is None) == (args.url is None):
        return _usage("give a FILE (or - for stdin), or --url with --table")
    if args.url is not None and not args.table:
        return _usage("--url needs --table")
    try:
        if args.url is not None:
            messages, verifier = _remote(args)
        else:
            messages, verifier = _read(args, sys.stdin), StreamVerifier()
    except (InputError, RemoteError) as error:
        return _usage(str(error))
    if args.table:
        messages = [m for m in messages if m.get("table") in (None, args.table)]
    verifier.feed_all(messages)
    lines, status = report(verifier)
    for line in lines:
        print(line, file=out)
    return status
