"""A player's audit log over the admin listener (`GET /api/players/{id}/audit`) and
`baccarat audit`, which reads it there (--url) or from Redis (--redis), on both engines."""

from __future__ import annotations

import asyncio
import json

import pytest

from server.audit_cli import parse_since
from server.cli import main as cli_main
from server.store.redis import RedisStore
from tests.transport.conftest import NodeFactory
from tests.transport.http_client import call, token_for

SECRET = "audit-api-test-secret-0123456789abcdef0123"
AUDIT = "/api/players/alice/audit"


def _move(amount: int, key: str) -> dict[str, object]:
    return {"amount": amount, "idempotency_key": key}


async def test_the_route_pages_a_players_log(make_node: NodeFactory, engine: str) -> None:
    node = await make_node(engine=engine, secret=SECRET)
    token = token_for(node)
    assert (await call(node, "GET", AUDIT)).status == 401
    for i in range(3):
        await call(node, "POST", "/api/players/alice/credit", _move(100 + i, f"k-{i}"), token)
    await call(node, "POST", "/api/players/alice/debit", _move(50, "k-3"), token)
    whole = (await call(node, "GET", AUDIT, token=token)).json()
    assert whole["player"] == "alice"
    entries = whole["entries"]
    assert [(e["kind"], e["amount"], e["balance"], e["key"]) for e in entries] == [
        ("operator_credit", 100, 100, "k-0"),
        ("operator_credit", 101, 201, "k-1"),
        ("operator_credit", 102, 303, "k-2"),
        ("operator_debit", -50, 253, "k-3"),
    ]
    first = (await call(node, "GET", AUDIT + "?limit=2", token=token)).json()["entries"]
    rest = await call(node, "GET", f"{AUDIT}?after={first[-1]['seq']}", token=token)
    assert first + rest.json()["entries"] == entries
    late = await call(node, "GET", f"{AUDIT}?since={entries[-1]['ts'] + 10**6}", token=token)
    assert late.json()["entries"] == []
    for bad in ("limit=0", "limit=1001", "since=soon", "after=x", "since=-1"):
        refused = await call(node, "GET", f"{AUDIT}?{bad}", token=token)
        assert refused.status == 400 and refused.json()["error"] == "bad_query", bad
    unknown = await call(node, "GET", "/api/players/nobody/audit", token=token)
    assert unknown.status == 200 and unknown.json()["entries"] == []


async def test_baccarat_audit_reads_a_node(
    make_node: NodeFactory, engine: str, capsys: pytest.CaptureFixture[str]
) -> None:
    """`baccarat audit --url` mints its operator token from --secret and pages through the
    route: one line per entry, or JSON lines equal to the route's entries."""
    node = await make_node(engine=engine, secret=SECRET)
    token = token_for(node)
    for i in range(3):
        await call(node, "POST", "/api/players/alice/credit", _move(100, f"k-{i}"), token)
    url = f"http://127.0.0.1:{node.admin_port}"
    argv = ["audit", "--player", "alice", "--url", url, "--secret", SECRET]
    capsys.readouterr()  # the node's own log lines so far
    assert await asyncio.to_thread(cli_main, [*argv, "--json"]) == 0
    printed = [json.loads(line) for line in capsys.readouterr().out.splitlines()]
    assert printed == (await call(node, "GET", AUDIT, token=token)).json()["entries"]
    assert await asyncio.to_thread(cli_main, argv) == 0
    lines = capsys.readouterr().out.splitlines()
    assert len(lines) == 3 and all("operator_credit" in line for line in lines)
    assert "+100 balance=300 key=k-2" in lines[-1]
    since = str(printed[-1]["ts"] + 1)
    assert await asyncio.to_thread(cli_main, [*argv, "--since", since]) == 0
    assert capsys.readouterr().out == ""
    wrong = ["audit", "--player", "alice", "--url", url, "--secret", "x" * 40]
    assert await asyncio.to_thread(cli_main, wrong) == 2
    assert "401" in capsys.readouterr().err


@pytest.mark.redis
async def test_baccarat_audit_reads_redis(
    make_node: NodeFactory, redis_url: str, capsys: pytest.CaptureFixture[str]
) -> None:
    """With --redis it reads the store itself, no node needed: the same entries."""
    node = await make_node(engine="redis", secret=SECRET)
    token = token_for(node)
    await call(node, "POST", "/api/players/alice/credit", _move(700, "k-1"), token)
    assert isinstance(node.store, RedisStore)
    argv = ["audit", "--player", "alice", "--redis", redis_url, "--json"]
    argv += ["--key-prefix", node.store.key_prefix]
    capsys.readouterr()  # the node's own log lines so far
    assert await asyncio.to_thread(cli_main, argv) == 0
    printed = [json.loads(line) for line in capsys.readouterr().out.splitlines()]
    assert printed == (await call(node, "GET", AUDIT, token=token)).json()["entries"]


def test_baccarat_audit_without_a_source_says_so(capsys: pytest.CaptureFixture[str]) -> None:
    assert cli_main(["audit", "--player", "alice"]) == 2
    err = capsys.readouterr().err.splitlines()
    assert len(err) == 1 and err[0].startswith("baccarat audit: nothing to read")
    assert cli_main(["audit", "--player", "alice", "--url", "file:///etc/passwd"]) == 2
    assert cli_main(["audit", "--player", "a", "--since", "yesterday", "--url", "http://x"]) == 2


def test_since_takes_unix_ms_or_iso_8601() -> None:
    assert parse_since("1700000000000") == 1_700_000_000_000
    assert parse_since("2023-11-14T22:13:20Z") == 1_700_000_000_000
    assert parse_since("2023-11-14T22:13:20") == 1_700_000_000_000  # UTC unless named
    assert parse_since("2023-11-15T00:13:20+02:00") == 1_700_000_000_000
