"""Bots against a live in-process node: a clean run, a changed card, dropped connections."""

from __future__ import annotations

import asyncio
import json
import os
import socket
import sys
from pathlib import Path
from typing import Any

import pytest

from server.app import Node
from server.bots.progress import Progress
from server.bots.runner import config_from_args, run_command
from server.cli import build_parser
from tests.bots.proxy import Link, Message, Proxy
from tests.transport.conftest import NodeFactory, within

ROOT = Path(__file__).resolve().parents[2]
SECRET = "the-site-secret-of-at-least-32-bytes"
# Short rounds: a 0.5 s window (bots bet in its first 0.15 s), cards 20 ms apart.
QUICK: dict[str, Any] = {
    "betting_window": within(0.5),
    "deal_interval": 0.02,
    "close_pause": 0.02,
    "result_pause": 0.02,
    "next_round_pause": 0.05,
    "tables": "t1=classic8,t2=nocommission8",
}


def url(node: Node) -> str:
    return f"ws://127.0.0.1:{node.port}/ws"


async def run_in_process(*argv: str) -> tuple[dict[str, Any], int]:
    args = build_parser().parse_args(["bots", "--quiet", "--grace", "10", *argv])
    return await run_command(args, config_from_args(args, None), Progress(enabled=False))


async def run_cli(
    tmp_path: Path, *argv: str, env: dict[str, str] | None = None
) -> tuple[dict[str, Any], int]:
    """`baccarat bots` as a real process (BACCARAT_SECRET unset unless `env` sets it); its
    report and exit status."""
    report = tmp_path / "report.json"
    environ = {k: v for k, v in os.environ.items() if k != "BACCARAT_SECRET"}
    process = await asyncio.create_subprocess_exec(
        sys.executable,
        "-m",
        "server.cli",
        "bots",
        "--quiet",
        "--report",
        str(report),
        *argv,
        cwd=ROOT,
        stderr=asyncio.subprocess.PIPE,
        env={**environ, **(env or {})},
    )
    async with asyncio.timeout(within(30)):
        _, stderr = await process.communicate()
    assert report.exists(), stderr.decode()
    assert process.returncode is not None
    run_cli.stderr = stderr.decode()  # type: ignore[attr-defined]
    return json.loads(report.read_text()), process.returncode


@pytest.mark.parametrize("encoding", ["msgpack", "json"])
async def test_a_clean_run_checks_rounds_and_finds_nothing(
    make_node: NodeFactory, encoding: str
) -> None:
    """Players and spectators on two tables: rounds and payouts checked, 0 problems, exit 0."""
    node = await make_node(**QUICK)
    report, status = await run_in_process(
        *("--url", url(node), "--bots", "4", "--spectators", "4", "--rounds", "2"),
        *("--encoding", encoding, "--strategy", "random", "--seed", "3"),
    )
    assert (report["mismatches"], report["gaps"], report["duplicates"]) == (0, 0, 0)
    assert status == 0
    assert report["connected"] == 8 and report["disconnects"] == 0
    assert report["rounds_checked"] >= 16  # every bot judged at least two whole rounds
    assert report["bets_accepted"] >= 8 and report["payouts_checked"] >= 8
    assert report["latency_ms"]["event"]["count"] > 0
    assert report["latency_ms"]["bet_ack"]["count"] == report["bets_sent"]
    ledger = await node.store.ledger()
    assert ledger.balanced


def change_one_card(link: Link, message: Message) -> Message:
    """The first card dealt in the first round this proxy sees open: its rank becomes 9 (or 8)."""
    state = change_one_card.__dict__
    if message.get("kind") == "round_opened" and "round" not in state:
        state["round"] = message["round"]
    if (
        message.get("kind") == "card"
        and message.get("round") == state.get("round")
        and not state.get("done")
    ):
        state["done"] = True
        return {**message, "rank": "8" if message["rank"] == "9" else "9"}
    return message


async def test_one_changed_card_fails_the_run(make_node: NodeFactory, tmp_path: Path) -> None:
    """A card altered on the way to one bot: the mismatch is reported and the exit is 1."""
    change_one_card.__dict__.clear()
    node = await make_node(**QUICK)
    async with Proxy(url(node), change_one_card) as proxy:
        report, status = await run_cli(
            tmp_path, "--url", proxy.url, "--bots", "2", "--spectators", "2", "--rounds", "2"
        )
    assert change_one_card.__dict__.get("done")
    assert status == 1
    assert report["mismatches"] >= 1 and report["gaps"] == 0
    assert any("round_result" in p["detail"] for p in report["problems"])


def cut_once(link: Link, message: Message) -> Message | None:
    """Each of the first connections is dropped after its 12th message."""
    if link.number <= 4 and link.messages == 12:
        return None
    return message


async def test_dropped_bots_reconnect_with_since(make_node: NodeFactory) -> None:
    """Bots cut mid-round reconnect, catch up from `since` and see no gap and no mismatch."""
    node = await make_node(**QUICK)
    async with Proxy(url(node), cut_once) as proxy:
        report, status = await run_in_process(
            "--url", proxy.url, "--bots", "2", "--spectators", "2", "--rounds", "3"
        )
        joins = [m for m in proxy.from_clients if m["type"] == "join"]
    assert report["disconnects"] == 4
    assert sum("since" in join for join in joins) == 4  # every reconnect resumed from its seq
    assert (report["mismatches"], report["gaps"], report["duplicates"]) == (0, 0, 0)
    assert report["resyncs"] == 0
    assert status == 0


async def test_tables_the_site_does_not_run_end_the_run(make_node: NodeFactory) -> None:
    """--tables naming no table of the site: the bots give up at once, exit 2."""
    node = await make_node(**QUICK)
    report, status = await run_in_process(
        "--url", url(node), "--bots", "2", "--tables", "nope", "--rounds", "1"
    )
    assert report["no_table"] == 2 and status == 2
    assert report["disconnects"] == 0


# --- a site with a secret, and bots that cannot connect (issue 16) -------------------------


@pytest.mark.parametrize("how", ["option", "environment, two processes"])
async def test_bots_play_a_secret_site_with_its_secret(
    make_node: NodeFactory, tmp_path: Path, how: str
) -> None:
    """`bots --secret S` (or BACCARAT_SECRET=S, also in the processes of --procs) against a
    `serve --secret S` site: every bot is admitted with its token, bets and checks rounds."""
    node = await make_node(**QUICK, secret=SECRET, initial_balance=1_000_000)
    argv = ["--url", url(node), "--bots", "2", "--spectators", "2", "--rounds", "1"]
    if how == "option":
        report, status = await run_cli(tmp_path, *argv, "--secret", SECRET)
    else:
        env = {"BACCARAT_SECRET": SECRET}
        report, status = await run_cli(tmp_path, *argv, "--procs", "2", env=env)
    assert report["problems"] == [] and status == 0
    assert report["connected"] == 4 and report["connect_failures"] == 0
    assert report["never_connected"] == 0 and report["bets_accepted"] >= 2
    assert report["rounds_checked"] >= 4


async def test_bots_refused_by_the_site_say_why(make_node: NodeFactory, tmp_path: Path) -> None:
    """Bots with another secret are refused 401: the problems give the count and the server's
    reason, the bots stop at once (no retrying until a timeout), and the exit status is 3."""
    node = await make_node(**QUICK, secret=SECRET)
    report, status = await run_cli(
        tmp_path,
        "--url",
        url(node),
        "--bots",
        "3",
        "--secret",
        "another-secret-of-32-bytes-or-more",
    )
    assert status == 3
    assert report["connected"] == 0 and report["never_connected"] == 3 and report["refused"] == 3
    reason = "HTTP 401 token signature does not match (another secret, or altered)"
    assert report["connect_errors"] == {reason: 3}
    assert report["problems"] == [
        {"kind": "connect", "table": "", "detail": f"3 of 3 bots never connected: 3 connect "
         f"failures: {reason}"}
    ]  # fmt: skip
    assert f"3 of 3 bots never connected: 3 connect failures: {reason}" in run_cli.stderr  # type: ignore[attr-defined]


async def test_fewer_bots_connected_than_asked_is_a_problem(
    make_node: NodeFactory, monkeypatch: pytest.MonkeyPatch
) -> None:
    """A site that lets guests play but not watch without a token: the players connect and
    play their round, the spectators are refused, and the run says so (exit 3), not 0."""
    monkeypatch.delenv("BACCARAT_SECRET", raising=False)
    node = await make_node(**QUICK, secret=SECRET, allow_guests=True, initial_balance=10_000)
    report, status = await run_in_process(
        "--url", url(node), "--bots", "2", "--spectators", "2", "--rounds", "1", "--duration", "60"
    )
    assert report["connected"] == 2 and report["rounds_checked"] >= 2
    assert report["never_connected"] == 2 and report["refused"] == 2
    detail = (
        "2 of 4 bots never connected: 2 connect failures: HTTP 401 a token is required to watch"
    )
    assert [p["detail"] for p in report["problems"]] == [detail]
    assert status == 3


async def test_nothing_listening_is_connection_refused() -> None:
    """No server at the URL: the bots retry until --connect-timeout, then the run ends with
    "connection refused" in its problems and exit 3."""
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        port = probe.getsockname()[1]  # closed again: nothing listens there
    report, status = await run_in_process(
        "--url", f"ws://127.0.0.1:{port}/ws", "--bots", "2", "--connect-timeout", "0.3"
    )
    assert status == 3
    assert report["connected"] == 0 and report["never_connected"] == 2 and report["refused"] == 0
    assert list(report["connect_errors"]) == ["connection refused"]
    [problem] = report["problems"]
    assert problem["kind"] == "connect"
    assert problem["detail"].startswith("2 of 2 bots never connected: ")
    assert problem["detail"].endswith(" connect failures: connection refused")


async def test_bots_that_cannot_reconnect_are_a_problem(make_node: NodeFactory) -> None:
    """The site goes away mid-run (the proxy drops every bot and stops listening): the bots'
    reconnects are refused, and the run says so with the reason (exit 3), not 0."""
    node = await make_node(**QUICK)
    proxy = Proxy(url(node), lambda link, message: message)

    def go_away(link: Link, message: Message) -> Message | None:
        if message.get("kind") == "round_opened":
            assert proxy.server is not None
            proxy.server.close(close_connections=False)  # no new connection gets in
            return None  # and this one is cut
        return message

    proxy.change = go_away
    async with proxy:
        report, status = await run_in_process(
            "--url", proxy.url, "--bots", "2", "--duration", "2", "--connect-timeout", "1"
        )
    assert report["connected"] == 2 and report["never_connected"] == 0
    assert report["lost"] == 2 and report["disconnects"] == 2
    [problem] = report["problems"]
    assert problem["detail"] == (
        "2 of 2 bots were dropped and could not reconnect (2: connection refused)"
    )
    assert status == 3
