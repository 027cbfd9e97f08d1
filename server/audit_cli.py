"""`baccarat audit`: print a player's audit log, every movement of its money, oldest first.

Two ways to read it. `--url` asks a running node's admin listener (`GET
/api/players/{id}/audit`, an operator token from `--token`, or minted from `--secret` /
$BACCARAT_SECRET): works on either engine. `--redis` reads the Redis engine's store directly,
with no node running. With neither there is nothing to read: the memory engine's log lives in
its server process, which only its admin listener can show.

Reading Redis directly shows every entry the log still holds: entries past the nodes'
--audit-days that no later entry of the player has trimmed yet show too.
"""

from __future__ import annotations

import argparse
import asyncio
import json
import os
import sys
import urllib.error
import urllib.parse
import urllib.request
from collections.abc import AsyncIterator, Callable, Iterator
from datetime import UTC, datetime
from typing import Any

from server.auth import Role, load_secret, mint_token
from server.store.audit import AUDIT_PAGE, DAY_MS, AuditEntry
from server.store.base import Store, StoreUnavailable

__all__ = [
    "AuditFailed",
    "add_audit_arguments",
    "format_entry",
    "parse_since",
    "run_audit",
    "token_of",
]

PROG = "baccarat audit"
USAGE_ERROR = 2
TOKEN_TTL_S = 300  # a token minted for one run of the command
READ_ALL_MS = 100 * 365 * DAY_MS  # reading Redis directly shows whatever the log still holds


class AuditFailed(Exception):
    """One line for stderr, and exit status 2."""


def parse_since(text: str) -> int:
    """Unix ms (digits), or an ISO-8601 time (UTC unless it names its offset)."""
    if text.isascii() and text.isdigit():
        return int(text)
    try:
        when = datetime.fromisoformat(text)
    except ValueError:
        raise argparse.ArgumentTypeError(
            f"{text!r}: give unix ms (1700000000000) or ISO-8601 (2024-05-01T12:00:00Z)"
        ) from None
    if when.tzinfo is None:
        when = when.replace(tzinfo=UTC)
    return int(when.timestamp() * 1000)


def format_entry(entry: AuditEntry) -> str:
    """One human-readable line: time, sequence, kind, amount, balance after, and where."""
    when = datetime.fromtimestamp(entry.ts / 1000, UTC).isoformat(timespec="milliseconds")
    where = []
    if entry.table is not None:
        where.append(f"table={entry.table} round={entry.round}")
    if entry.bet_id is not None:
        where.append(f"bet={entry.bet_id}")
    if entry.key is not None:
        where.append(f"key={entry.key}")
    line = f"{when.replace('+00:00', 'Z')} {entry.seq:<17} {entry.kind:<15} {entry.amount:>+12}"
    return f"{line} balance={entry.balance} {' '.join(where)}".rstrip()


# --- reading ---------------------------------------------------------------------------------


OpenRedis = Callable[[str, str, int], Store]  # url, key prefix, audit ms kept -> the store


async def _from_redis(
    open_redis: OpenRedis, url: str, prefix: str, player: str, since: int | None
) -> list[AuditEntry]:
    store = open_redis(url, prefix, READ_ALL_MS)
    try:
        return [entry async for entry in _pages(store.audit, player, since)]
    finally:
        await store.close()


async def _pages(
    read: Callable[..., Any], player: str, since: int | None
) -> AsyncIterator[AuditEntry]:
    after = None
    while page := await read(player, since, AUDIT_PAGE, after):
        for entry in page:
            yield entry
        after = page[-1].seq


def _from_http(url: str, token: str, player: str, since: int | None) -> Iterator[AuditEntry]:
    after: str | None = None
    base = f"{url.rstrip('/')}/api/players/{urllib.parse.quote(player, safe='')}/audit"
    while True:
        query = {"limit": str(AUDIT_PAGE)}
        if since is not None:
            query["since"] = str(since)
        if after is not None:
            query["after"] = after
        request = urllib.request.Request(
            f"{base}?{urllib.parse.urlencode(query)}",
            headers={"Authorization": f"Bearer {token}"},
        )
        try:
            with urllib.request.urlopen(request, timeout=30) as answer:
                body = json.loads(answer.read())
        except urllib.error.HTTPError as error:
            detail = error.read().decode(errors="replace").strip()
            raise AuditFailed(f"{error.code} from {base}: {detail}") from None
        except (urllib.error.URLError, OSError) as error:
            raise AuditFailed(f"cannot reach {url}: {error}") from None
        page = [AuditEntry(**entry) for entry in body["entries"]]
        yield from page
        if not page:
            return
        after = page[-1].seq


def token_of(args: argparse.Namespace) -> str:
    """--token, or one minted from --secret / $BACCARAT_SECRET (also `wallet-pending --url`)."""
    if args.token:
        return str(args.token)
    value = args.secret if args.secret is not None else os.environ.get("BACCARAT_SECRET")
    try:
        secret = load_secret(value)
    except ValueError as error:
        raise AuditFailed(str(error)) from None
    if secret is None:
        raise AuditFailed(
            "--url needs an operator token: pass --token, --secret or set BACCARAT_SECRET"
        )
    return mint_token(secret, "audit-cli", role=Role.OPERATOR, ttl_s=TOKEN_TTL_S)


# --- the command -----------------------------------------------------------------------------


def run_audit(args: argparse.Namespace, open_redis: OpenRedis) -> int:
    """The command; `open_redis` makes the Redis engine's store (server/cli.py, a composition
    root, passes it)."""
    try:
        if args.redis:
            read = _from_redis(open_redis, args.redis, args.key_prefix, args.player, args.since)
            entries: Iterator[AuditEntry] = iter(asyncio.run(read))
        elif args.url:
            if urllib.parse.urlsplit(args.url).scheme not in ("http", "https"):
                raise AuditFailed(f"--url must be http://HOST:PORT, not {args.url!r}")
            entries = _from_http(args.url, token_of(args), args.player, args.since)
        else:
            raise AuditFailed(
                "nothing to read: give --redis URL (the Redis engine's store) or --url URL (a "
                "node's admin listener); the memory engine's log lives in its server process"
            )
        for entry in entries:
            line = json.dumps(entry.to_dict()) if args.json else format_entry(entry)
            print(line, flush=True)
    except AuditFailed as failure:
        print(f"{PROG}: {failure}", file=sys.stderr)
        return USAGE_ERROR
    except (StoreUnavailable, OSError) as error:  # Redis or the node does not answer
        print(f"{PROG}: {error}", file=sys.stderr)
        return USAGE_ERROR
    return 0


def add_audit_arguments(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("--player", required=True, help="the player id")
    parser.add_argument(
        "--since",
        type=parse_since,
        metavar="TIME",
        help="only entries from then on: unix ms or ISO-8601 (UTC unless it names an offset)",
    )
    source = parser.add_mutually_exclusive_group()
    source.add_argument("--redis", metavar="URL", help="read the Redis engine's store directly")
    source.add_argument(
        "--url", metavar="URL", help="ask a node's admin listener, e.g. http://127.0.0.1:8766"
    )
    parser.add_argument("--key-prefix", default="bac", help="with --redis: the store's (bac)")
    parser.add_argument("--token", help="with --url: an operator token")
    parser.add_argument(
        "--secret", help="with --url: mint the token with this secret or file ($BACCARAT_SECRET)"
    )
    parser.add_argument("--json", action="store_true", help="one JSON object per line")
