"""`baccarat wallet-pending`: the debits an operator's wallet holds with neither a credit nor
a cancel acknowledged (server/store/pending.py says what each state means).

Read as `baccarat audit` reads: `--url` asks a running node's admin listener (`GET
/api/wallet/pending`, with an operator token from `--token`, or minted from `--secret` /
$BACCARAT_SECRET), on either engine; `--redis` reads the Redis engine's store directly, with
no node running. One line per debit (or a JSON object with --json); nothing when all is done.
"""

from __future__ import annotations

import argparse
import asyncio
import json
import sys
import urllib.error
import urllib.parse
import urllib.request
from collections.abc import Callable
from datetime import UTC, datetime
from typing import Any

from server.audit_cli import AuditFailed, token_of
from server.store.base import Store, StoreUnavailable
from server.store.pending import PendingDebit, wallet_pending

__all__ = ["add_wallet_pending_arguments", "format_pending", "run_wallet_pending"]

PROG = "baccarat wallet-pending"
USAGE_ERROR = 2

OpenRedis = Callable[[str, str], Store]  # url, key prefix -> the store


def format_pending(debit: PendingDebit) -> str:
    since = ""
    if debit.since_ms is not None:
        when = datetime.fromtimestamp(debit.since_ms / 1000, UTC).isoformat(timespec="seconds")
        since = f" since={when.replace('+00:00', 'Z')}"
    amount = "?" if debit.amount is None else str(debit.amount)
    return (
        f"{debit.transaction_id} {debit.state} table={debit.table} round={debit.round} "
        f"player={debit.player} amount={amount}{since}"
    )


async def _from_redis(open_redis: OpenRedis, args: argparse.Namespace) -> list[PendingDebit]:
    store = open_redis(args.redis, args.key_prefix)
    try:
        return await wallet_pending(store, args.table)
    finally:
        await store.close()


def _from_http(args: argparse.Namespace) -> list[PendingDebit]:
    if urllib.parse.urlsplit(args.url).scheme not in ("http", "https"):
        raise AuditFailed(f"--url must be http://HOST:PORT, not {args.url!r}")
    query = f"?{urllib.parse.urlencode({'table': args.table})}" if args.table else ""
    address = f"{args.url.rstrip('/')}/api/wallet/pending{query}"
    request = urllib.request.Request(address, headers={"Authorization": f"Bearer {token_of(args)}"})
    try:
        with urllib.request.urlopen(request, timeout=30) as answer:
            body: dict[str, Any] = json.loads(answer.read())
    except urllib.error.HTTPError as error:
        detail = error.read().decode(errors="replace").strip()
        raise AuditFailed(f"{error.code} from {address}: {detail}") from None
    except (urllib.error.URLError, OSError) as error:
        raise AuditFailed(f"cannot reach {args.url}: {error}") from None
    return [PendingDebit(**debit) for debit in body["pending"]]


def run_wallet_pending(args: argparse.Namespace, open_redis: OpenRedis) -> int:
    """The command; `open_redis` makes the Redis engine's store (server/cli.py passes it)."""
    try:
        if args.redis:
            pending = asyncio.run(_from_redis(open_redis, args))
        elif args.url:
            pending = _from_http(args)
        else:
            raise AuditFailed(
                "nothing to read: give --redis URL (the Redis engine's store) or --url URL (a "
                "node's admin listener); the memory engine's outbox lives in its server process"
            )
        for debit in pending:
            print(json.dumps(debit.to_dict()) if args.json else format_pending(debit), flush=True)
    except AuditFailed as failure:
        print(f"{PROG}: {failure}", file=sys.stderr)
        return USAGE_ERROR
    except (StoreUnavailable, OSError) as error:
        print(f"{PROG}: {error}", file=sys.stderr)
        return USAGE_ERROR
    return 0


def add_wallet_pending_arguments(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("--table", help="only this table's debits")
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
