"""The composition root: `baccarat serve` as a process, table specs, settings from the env."""

from __future__ import annotations

import argparse
import asyncio
import contextlib
import json
import math
import os
import random
import re
import signal
import socket
import subprocess
import sys
from pathlib import Path

import pytest
from websockets.asyncio.client import connect
from websockets.typing import Subprotocol

from server import app
from server.app import GUEST_SWEEP_INTERVAL, Node, parse_tables
from server.cli import main as cli_main
from server.config import _RANGES, OPTIONS, Settings, add_serve_arguments
from server.core.errors import BetRejected, RejectCode
from server.core.rules import PRESETS, rules_preset
from server.core.table import TableState, open_round
from server.runtime.clock import ManualClock, SystemClock
from server.store.base import Event, Lease
from server.store.memory import MemoryStore

BACCARAT = Path(sys.executable).parent / "baccarat"
SCALE = float(os.environ.get("TEST_TIMEOUT_SCALE", "1"))
SERVING = re.compile(r"baccarat: serving on ws://127\.0\.0\.1:(\d+)/ws")


# --- baccarat serve ---------------------------------------------------------------------------


async def _serving_port(stderr: asyncio.StreamReader, lines: list[str]) -> int:
    while True:
        line = (await stderr.readline()).decode()
        assert line, "the server exited before serving:\n" + "".join(lines)
        lines.append(line)
        match = SERVING.search(line)
        if match:
            return int(match.group(1))


async def _start_serve(*options: str) -> asyncio.subprocess.Process:
    """`baccarat serve` on a free port with fast timings and JSON logs (stderr piped)."""
    env = {k: v for k, v in os.environ.items() if not k.startswith("BACCARAT_")}
    fast = ["--port", "0", "--tables", "t1=classic8", "--betting-window", "0.2"]
    fast += ["--deal-interval", "0.01", "--close-pause", "0.01", "--result-pause", "0.01"]
    fast += ["--next-round-pause", "0.02", "--log-format", "json"]
    return await asyncio.create_subprocess_exec(
        str(BACCARAT),
        "serve",
        *fast,
        *options,
        stdout=asyncio.subprocess.DEVNULL,
        stderr=asyncio.subprocess.PIPE,
        env=env,
    )


async def _http_status(port: int, path: str) -> int:
    reader, writer = await asyncio.open_connection("127.0.0.1", port)
    writer.write(f"GET {path} HTTP/1.1\r\nHost: localhost\r\n\r\n".encode())
    status_line = await asyncio.wait_for(reader.readline(), 5 * SCALE)
    writer.close()
    return int(status_line.split()[1])


def _log_events(log: str) -> list[str]:
    return [json.loads(line)["event"] for line in log.splitlines() if line.startswith("{")]


async def test_serve_plays_and_stops_cleanly_on_sigterm() -> None:
    """`baccarat serve --port 0` prints its port, deals to a client, and exits 0 on SIGTERM."""
    proc = await _start_serve("--drain-seconds", "0")
    assert proc.stderr is not None
    lines: list[str] = []
    try:
        port = await asyncio.wait_for(_serving_port(proc.stderr, lines), 15 * SCALE)
        uri = f"ws://127.0.0.1:{port}/ws"
        async with connect(uri, subprotocols=[Subprotocol("baccarat.v1.json")]) as ws:
            async with asyncio.timeout(5 * SCALE):
                welcome = json.loads(await ws.recv())
                assert welcome["type"] == "welcome"
                assert [t["id"] for t in welcome["tables"]] == ["t1"]
                await ws.send(json.dumps({"type": "join", "table": "t1"}))
                while True:
                    message = json.loads(await ws.recv())
                    if message["type"] == "event" and message["kind"] == "round_opened":
                        break
            proc.send_signal(signal.SIGTERM)
            rest = await asyncio.wait_for(proc.stderr.read(), 5 * SCALE)
            code = await asyncio.wait_for(proc.wait(), 5 * SCALE)
    finally:
        if proc.returncode is None:
            proc.kill()
            await proc.wait()
    log = "".join(lines) + rest.decode()
    assert code == 0, log
    events = _log_events(log)
    assert "listening" in events and events[-1] == "stopped"


async def test_serve_prints_the_address_a_browser_opens() -> None:
    """The line after `serving on ws://...` names the page to open (issue 9: a newcomer opens
    the printed address); without a static folder there is no page, and no such line."""
    for options, page in (((), True), (("--static-dir", "/nonexistent"), False)):
        proc = await _start_serve("--drain-seconds", "0", *options)
        assert proc.stderr is not None
        lines: list[str] = []
        try:
            port = await asyncio.wait_for(_serving_port(proc.stderr, lines), 15 * SCALE)
            assert await _http_status(port, "/") == (200 if page else 404)
            proc.send_signal(signal.SIGTERM)
            rest = (await asyncio.wait_for(proc.stderr.read(), 5 * SCALE)).decode()
            await asyncio.wait_for(proc.wait(), 5 * SCALE)
        finally:
            if proc.returncode is None:
                proc.kill()
                await proc.wait()
        announced = f"baccarat: play at http://127.0.0.1:{port}/\n"
        assert (rest.splitlines(keepends=True)[:1] == [announced]) is page, rest


async def test_sigterm_drains_then_closes_with_1001() -> None:
    """On SIGTERM the process says `draining`: /readyz is 503, /healthz 200 and its clients
    are still served; after --drain-seconds they are closed with 1001 and it exits 0."""
    proc = await _start_serve("--drain-seconds", str(1.5 * SCALE))
    assert proc.stderr is not None
    lines: list[str] = []
    try:
        port = await asyncio.wait_for(_serving_port(proc.stderr, lines), 15 * SCALE)
        uri = f"ws://127.0.0.1:{port}/ws"
        async with connect(uri, subprotocols=[Subprotocol("baccarat.v1.json")]) as ws:
            async with asyncio.timeout(5 * SCALE):
                assert json.loads(await ws.recv())["type"] == "welcome"
                assert await _http_status(port, "/readyz") == 200
                proc.send_signal(signal.SIGTERM)
                while "draining" not in _log_events("".join(lines)):
                    lines.append((await proc.stderr.readline()).decode())
                assert await _http_status(port, "/readyz") == 503
                assert await _http_status(port, "/healthz") == 200
                await ws.send(json.dumps({"type": "ping", "ref": "drain"}))
                while (message := json.loads(await ws.recv()))["type"] != "pong":
                    pass
                assert message["ref"] == "drain"
                await ws.wait_closed()  # by the server, once the drain is over
            assert ws.close_code == 1001
            rest = await asyncio.wait_for(proc.stderr.read(), 5 * SCALE)
            code = await asyncio.wait_for(proc.wait(), 5 * SCALE)
    finally:
        if proc.returncode is None:
            proc.kill()
            await proc.wait()
    log = "".join(lines) + rest.decode()
    assert code == 0, log
    assert _log_events(log)[-1] == "stopped"


async def _stop_log(proc: asyncio.subprocess.Process, *steps: tuple[int, str]) -> list[str]:
    """Send each step's signal to a serving process once the previous step's event is
    logged; the log events from the first signal on. The exit status must be 0."""
    assert proc.stderr is not None
    lines: list[str] = []
    try:
        await asyncio.wait_for(_serving_port(proc.stderr, lines), 15 * SCALE)
        first = len(lines)
        async with asyncio.timeout(10 * SCALE):
            for sig, event in steps:
                proc.send_signal(sig)
                while event not in _log_events("".join(lines[first:])):
                    line = (await proc.stderr.readline()).decode()
                    assert line, "the server exited:\n" + "".join(lines)
                    lines.append(line)
            lines.append((await proc.stderr.read()).decode())
            code = await proc.wait()
    finally:
        if proc.returncode is None:
            proc.kill()
            await proc.wait()
    assert code == 0, "".join(lines)
    stopping = ("stopping_now", "draining", "drain_cut_short", "stopped")  # not the rounds'
    return [e for e in _log_events("".join(lines[first:])) if e in stopping]


async def test_sigint_stops_at_once_and_says_so() -> None:
    """SIGINT skips the drain: the log says `stopping_now` (it said `draining seconds=...`,
    issue 16, item 19), and the process exits 0 long before --drain-seconds."""
    proc = await _start_serve("--drain-seconds", "600")
    events = await _stop_log(proc, (signal.SIGINT, "stopping_now"))
    assert events == ["stopping_now", "stopped"], events


async def test_a_second_sigterm_cuts_the_drain_short_and_says_so() -> None:
    """SIGTERM drains (logged as `draining`); a second one ends the drain (`drain_cut_short`)
    and the node stops, long before --drain-seconds."""
    proc = await _start_serve("--drain-seconds", "600")
    steps = [(signal.SIGTERM, "draining"), (signal.SIGTERM, "drain_cut_short")]
    events = await _stop_log(proc, *steps)
    assert events == ["draining", "drain_cut_short", "stopped"], events


# --- Node -------------------------------------------------------------------------------------


async def _next_event(store: MemoryStore, after: int) -> Event:
    events = store.follow("t1", after)
    async with contextlib.aclosing(events):  # type: ignore[type-var]
        async for event in events:
            return event
    raise AssertionError("follow() ended")


async def test_a_stopping_node_hands_its_tables_over_at_once() -> None:
    """Node.stop releases its leases: another node takes the table without waiting the TTL."""
    store = MemoryStore(SystemClock().now_ms)
    common = {
        "port": 0,
        "tables": "t1=classic8",
        "betting_window": 0.2,
        "deal_interval": 0.01,
        "close_pause": 0.01,
        "result_pause": 0.01,
        "next_round_pause": 0.02,
        "lease_ttl": 60.0,  # a lease left behind would keep the table for a minute
        "static_dir": "/nonexistent/baccarat-static",
    }
    first = Node(Settings.from_options(node_id="first", **common), store=store)
    await first.start()
    try:
        async with asyncio.timeout(5 * SCALE):
            await _next_event(store, 0)  # the first node owns the table and plays
        lease = await store.lease("t1")
        assert lease is not None and lease.node == "first"
        async with Node(Settings.from_options(node_id="second", **common), store=store) as second:
            assert not second.loops[0].owning
            await first.stop()
            assert await store.lease("t1") is None
            last = await store.last_seq("t1")
            async with asyncio.timeout(5 * SCALE):
                await _next_event(store, last)  # played by the second node
            assert second.loops[0].owning
            lease = await store.lease("t1")
            assert lease is not None and lease.node == "second"
    finally:
        if not first.draining:
            await first.stop()


# --- parse_tables -----------------------------------------------------------------------------


def test_parse_tables_empty_means_one_table_per_preset() -> None:
    """An empty (or blank) spec runs every preset as a table named after it."""
    assert parse_tables("") == PRESETS
    assert parse_tables("  ") == PRESETS


def test_parse_tables_with_ids() -> None:
    """'id=preset,...' names each table and picks its rules, in order."""
    tables = parse_tables("t1=classic8, vip=nocommission8,t3=classic8")
    assert list(tables) == ["t1", "vip", "t3"]
    assert tables["vip"] == rules_preset("nocommission8")
    assert tables["t1"] == tables["t3"] == rules_preset("classic8")


def test_parse_tables_by_preset_name() -> None:
    """A bare preset name is a table named after it."""
    assert parse_tables("punto6,fourdeck") == {
        "punto6": rules_preset("punto6"),
        "fourdeck": rules_preset("fourdeck"),
    }


@pytest.mark.parametrize(
    ("spec", "complaint"),
    [
        ("t1=classic8,t1=punto6", "twice"),
        ("bad id=classic8", "bad id"),
        ("=classic8", "table id"),
        (",,", "no tables"),
    ],
)
def test_parse_tables_refuses_bad_specs(spec: str, complaint: str) -> None:
    """Duplicate or malformed table ids, or no table at all, are ValueErrors saying why."""
    with pytest.raises(ValueError, match=complaint):
        parse_tables(spec)


def test_parse_tables_unknown_preset() -> None:
    """An unknown preset is a ValueError naming it."""
    with pytest.raises(ValueError, match="baccarat9"):
        parse_tables("t1=baccarat9")


# --- settings from options and the environment -------------------------------------------------


def _settings(*argv: str) -> Settings:
    parser = argparse.ArgumentParser()
    add_serve_arguments(parser)
    return Settings.from_args(parser.parse_args(list(argv)))


@pytest.fixture
def clean_env(monkeypatch: pytest.MonkeyPatch) -> pytest.MonkeyPatch:
    for name in list(os.environ):
        if name.startswith("BACCARAT_"):
            monkeypatch.delenv(name)
    return monkeypatch


def test_defaults_without_options_or_env(clean_env: pytest.MonkeyPatch) -> None:
    """No option and no env: the dataclass defaults."""
    assert _settings() == Settings()


def test_settings_from_env(clean_env: pytest.MonkeyPatch) -> None:
    """BACCARAT_<NAME> sets each setting, converted to the setting's type."""
    clean_env.setenv("BACCARAT_BETTING_WINDOW", "2.5")
    clean_env.setenv("BACCARAT_DEAL_INTERVAL", "0.25")
    clean_env.setenv("BACCARAT_INITIAL_BALANCE", "5000")
    clean_env.setenv("BACCARAT_TABLES", "a=classic8")
    clean_env.setenv("BACCARAT_PORT", "9001")
    clean_env.setenv("BACCARAT_NODE_ID", "node-7")
    settings = _settings()
    window = settings.timings.betting_window
    assert window == 2.5 and isinstance(window, float)
    assert settings.timings.deal_interval == 0.25
    assert settings.initial_balance == 5000 and isinstance(settings.initial_balance, int)
    assert settings.tables == "a=classic8"
    assert settings.port == 9001
    assert settings.resolved_node_id() == "node-7"


def test_command_line_beats_env(clean_env: pytest.MonkeyPatch) -> None:
    """An option on the command line wins over the environment."""
    clean_env.setenv("BACCARAT_BETTING_WINDOW", "2.5")
    clean_env.setenv("BACCARAT_MAX_BUFFER_BYTES", "4096")
    settings = _settings("--betting-window", "7", "--max-buffer-bytes", "8192")
    assert settings.timings.betting_window == 7.0
    assert settings.max_buffer_bytes == 8192


def test_empty_env_means_default(clean_env: pytest.MonkeyPatch) -> None:
    """An empty BACCARAT_ variable is ignored."""
    clean_env.setenv("BACCARAT_BETTING_WINDOW", "")
    assert _settings().timings.betting_window == Settings().timings.betting_window


def test_every_setting_has_an_option(clean_env: pytest.MonkeyPatch) -> None:
    """Each Settings field has a --kebab-case option that names its env variable."""
    parser = argparse.ArgumentParser()
    add_serve_arguments(parser)
    text = parser.format_help()
    for option in OPTIONS:
        assert option.flag in text and option.env in text


async def test_max_bets_per_round_reaches_the_store(clean_env: pytest.MonkeyPatch) -> None:
    """--max-bets-per-round (default 50, BACCARAT_MAX_BETS_PER_ROUND, 1 to 1,000,000) is the
    store's: a player's bet past it in one round is TOO_MANY_BETS."""
    assert Settings().max_bets_per_round == _settings().max_bets_per_round == 50
    clean_env.setenv("BACCARAT_MAX_BETS_PER_ROUND", "7")
    assert _settings().max_bets_per_round == 7
    settings = _settings("--max-bets-per-round", "1")
    with pytest.raises(ValueError, match="--max-bets-per-round must be a whole number from 1"):
        Settings(max_bets_per_round=0)
    clock = ManualClock()
    store = app.make_store(settings, clock)
    rules = PRESETS["classic8"]
    await store.create_table("t", rules)
    await store.ensure_player("p", 10_000)
    opened = open_round(
        TableState("t"), rules, clock.now_ms(), 60_000, random.Random(1).randbytes(32)
    )
    lease = await store.acquire_lease("t", "n", 60_000)
    assert lease is not None
    await store.commit("t", lease.token, 0, opened.state, opened.events)
    await store.place_bet("t", "p", 1, "b-1", "player", 100)
    with pytest.raises(BetRejected) as refused:
        await store.place_bet("t", "p", 1, "b-2", "player", 100)
    assert refused.value.code is RejectCode.TOO_MANY_BETS


async def test_the_audit_limits_reach_the_store(clean_env: pytest.MonkeyPatch) -> None:
    """--audit-days (default 90) and --audit-entries (default 100,000) are the store's: a
    player's log keeps that many entries, none older than that many days."""
    assert (Settings().audit_days, Settings().audit_entries) == (90, 100_000)
    clean_env.setenv("BACCARAT_AUDIT_DAYS", "2")
    settings = _settings("--audit-entries", "3")
    assert (settings.audit_days, settings.audit_entries) == (2, 3)
    with pytest.raises(ValueError, match="--audit-days must be a whole number from 1"):
        Settings(audit_days=0)
    clock = ManualClock()
    store = app.make_store(settings, clock)
    await store.ensure_player("p", 100)
    for i in range(4):
        await store.move_money("p", 1, f"k-{i}")
    assert [e.key for e in await store.audit("p")] == ["k-1", "k-2", "k-3"]
    await clock.advance(2 * 86_400)  # two days old: kept
    assert len(await store.audit("p")) == 3
    await clock.advance(0.001)
    assert await store.audit("p") == []


def test_default_node_id_is_unique() -> None:
    """Without a node id each node gets its own host-pid-random name."""
    first, second = Settings().resolved_node_id(), Settings().resolved_node_id()
    assert first != second and str(os.getpid()) in first


@pytest.mark.parametrize(
    ("option", "env"),
    [
        (["--port", "70000"], {}),
        (["--max-frame-bytes", "10"], {}),
        (["--history-rounds", "0"], {}),
        # issue 7, defect 4: these were accepted and left the tables dead
        (["--betting-window", "nan"], {}),
        (["--betting-window", "inf"], {}),
        (["--lease-ttl", "nan"], {}),
        (["--deal-interval", "nan"], {}),
        (["--next-round-pause", "inf"], {}),
        ([], {"BACCARAT_BETTING_WINDOW": "-inf"}),
        (["--allowed-origins", "example.com"], {}),
        # issue 16, item 17: redis-py read a database it cannot parse as database 0
        (["--redis", "redis://127.0.0.1:6379/abc"], {}),
        ([], {"BACCARAT_REDIS": "redis://127.0.0.1:6379?db=abc"}),
    ],
    ids=repr,
)
def test_serve_refuses_bad_settings_in_one_line(option: list[str], env: dict[str, str]) -> None:
    """A setting out of range stops `baccarat serve` at once: one line, exit status 2."""
    clean = {k: v for k, v in os.environ.items() if not k.startswith("BACCARAT_")}
    done = subprocess.run(
        [str(BACCARAT), "serve", "--port", "0", *option],
        capture_output=True,
        text=True,
        timeout=30,
        check=False,
        env={**clean, **env},
    )
    assert done.returncode == 2, done.stderr
    assert done.stderr.startswith("baccarat serve: ")
    assert len(done.stderr.strip().splitlines()) == 1


_NUMBERS = [o.name for o in OPTIONS if type(o.default) in (int, float)]


@pytest.mark.parametrize("name", _NUMBERS)
def test_every_number_must_be_finite_and_in_range(name: str) -> None:
    """Each numeric setting refuses nan, infinities and values just outside its range, naming
    its option; its bounds themselves are accepted."""
    option = "--" + name.replace("_", "-")
    low, high = _RANGES.get(name, (0, math.inf))
    bad: list[float] = [low - 1, high + 1]
    if isinstance(Settings().option(name), float):
        bad += [math.nan, math.inf, -math.inf, low - 0.001]
    for value in bad:
        with pytest.raises(ValueError, match=f"^{option} must be .*, not "):
            Settings.from_options(**{name: value})
    kind = type(Settings().option(name))
    for value in (low, high):
        if value != math.inf:
            assert Settings.from_options(**{name: kind(value)}).option(name) == value


def test_a_bad_number_is_one_line_through_the_cli(capsys: pytest.CaptureFixture[str]) -> None:
    """The same checks through `baccarat serve` in-process: one line naming the option."""
    for argv in (["--rate-bets", "nan"], ["--drain-seconds", "-1"], ["--max-refusals", "-5"]):
        assert cli_main(["serve", *argv]) == 2
        out, err = capsys.readouterr()
        assert out == "" and err.startswith(f"baccarat serve: {argv[0]} must be ")
        assert len(err.splitlines()) == 1


@pytest.mark.parametrize(
    "url",
    [
        "redis://127.0.0.1:6379",
        "redis://127.0.0.1:6379/",
        "redis://:pass%2Fword@127.0.0.1:6379/15",
        "rediss://127.0.0.1:6380/2?ssl_cert_reqs=none",
        "unix:///tmp/redis.sock?db=3",
        "unix:///tmp/redis.sock",
    ],
)
def test_redis_urls_with_a_database_number_are_accepted(url: str) -> None:
    assert Settings(redis=url).redis == url


@pytest.mark.parametrize(
    ("url", "problem"),
    [
        ("redis://127.0.0.1:6379/abc", "not 'abc'"),
        ("redis://:secret@127.0.0.1:6379/1x", "not '1x'"),
        ("redis://127.0.0.1:6379/-1", "not '-1'"),
        ("redis://127.0.0.1:6379/0/1", "not '0/1'"),
        ("redis://127.0.0.1:6379?db=abc", "not 'abc'"),
        ("unix:///tmp/redis.sock?db=x1", "not 'x1'"),
        ("http://127.0.0.1:6379/0", "not a http URL"),
        ("127.0.0.1:6379", "not a scheme-less URL"),
    ],
)
def test_a_redis_url_whose_database_is_not_a_number_is_refused(url: str, problem: str) -> None:
    """redis-py quietly used database 0 for redis://host:6379/abc (issue 16, item 17): the
    node would have shared another site's data. Refused, naming the bad part, no password."""
    with pytest.raises(ValueError, match=r"^--redis") as refused:
        Settings(redis=url)
    assert str(refused.value).endswith(problem) and "secret" not in str(refused.value)


@pytest.mark.redis
def test_a_database_redis_does_not_have_is_one_line_and_status_2(redis_url: str) -> None:
    """`--redis redis://host:port/99` printed a 53-line traceback (issue 16, item 17): Redis
    refuses the database on connect, and the node says so in one line, exit status 2."""
    base = redis_url.rsplit("/", 1)[0]
    clean = {k: v for k, v in os.environ.items() if not k.startswith("BACCARAT_")}
    done = subprocess.run(
        [str(BACCARAT), "serve", "--port", "0", "--redis", f"{base}/99"],
        capture_output=True,
        text=True,
        timeout=60 * SCALE,
        check=False,
        env=clean,
    )
    assert done.returncode == 2, done.stderr
    assert done.stderr.splitlines() == [
        "baccarat serve: cannot start: redis refuses the database of --redis: "
        "DB index is out of range"
    ]


def test_serve_on_a_busy_port_says_so_in_one_line() -> None:
    """A port already taken ends `baccarat serve` with one clear line and exit status 1."""
    with socket.socket() as busy:
        busy.bind(("127.0.0.1", 0))
        busy.listen()
        port = busy.getsockname()[1]
        done = subprocess.run(
            [sys.executable, "-m", "server.cli", "serve", "--port", str(port)],
            capture_output=True,
            text=True,
            timeout=30,
            check=False,
        )
    assert done.returncode == 1
    assert "cannot start" in done.stderr.strip().splitlines()[-1]


@pytest.mark.parametrize("interval", [0.0, 0.001, 61.0, float("nan"), float("inf")])
def test_totals_interval_is_checked(interval: float) -> None:
    """--totals-interval must be 0.01-60 seconds (nan and inf included): a clear ValueError."""
    with pytest.raises(ValueError, match=r"--totals-interval must be a finite number from 0.01"):
        Settings.from_options(totals_interval=interval)


def test_totals_interval_reaches_the_table_loops() -> None:
    """The node's loops publish bet totals at the configured pace."""
    node = Node(Settings.from_options(totals_interval=0.5, tables="t=classic8"))
    assert node.timings.totals_interval == 0.5
    assert all(loop.timings.totals_interval == 0.5 for loop in node.loops)


def test_the_parts_take_the_settings_groups_as_they_are() -> None:
    """The table loops run on settings.timings and the sessions on settings.limits: the
    groups themselves, not copies made field by field."""
    settings = Settings.from_options(tables="t=classic8", rate_bets=3, rate_burst=1.5)
    assert (settings.limits.bets, settings.limits.burst_s) == (3, 1.5)
    node = Node(settings)
    assert node.timings is settings.timings
    assert all(loop.timings is settings.timings for loop in node.loops)
    assert node.ctx.limits is settings.limits


def test_settings_take_only_options_by_name() -> None:
    """Settings.from_options names options as the command line does; a name that is no
    option (a group's own field name included) is a TypeError."""
    assert Settings.from_options(admin_port=9100).admin.port == 9100
    for name in ("bets", "nope", "retry"):
        with pytest.raises(TypeError, match=name):
            Settings.from_options(**{name: 1})


@pytest.mark.parametrize("rounds", [9, 1_001, -1])
def test_recall_rounds_is_checked(rounds: int) -> None:
    """--recall-rounds must be 10-1000 (regulators ask for at least the last 10)."""
    with pytest.raises(ValueError, match="--recall-rounds must be a whole number from 10 to 1000"):
        Settings(recall_rounds=rounds)


def test_recall_rounds_reaches_the_store() -> None:
    node = Node(Settings(recall_rounds=10, tables="t=classic8"))
    assert isinstance(node.store, MemoryStore) and node.store._recall_rounds == 10


async def test_the_node_sweeps_expired_guests() -> None:
    """Every GUEST_SWEEP_INTERVAL the node forgets the guests that stayed away."""
    clock = ManualClock()
    settings = Settings(port=0, tables="t1=classic8", static_dir="/nonexistent/baccarat-static")
    async with Node(settings, clock=clock) as node:
        await node.store.ensure_player("guest", 1_000, guest_ttl_ms=1_000)
        await node.store.ensure_player("player", 1_000)
        for _ in range(20):  # the node's tasks start and wait on the clock
            await asyncio.sleep(0)
        await clock.advance(GUEST_SWEEP_INTERVAL / 2)
        assert await node.store.balance("guest") == 1_000  # due, but no sweep yet
        await clock.advance(GUEST_SWEEP_INTERVAL / 2)
        assert await node.store.balance("guest") is None
        assert await node.store.balance("player") == 1_000
        assert (await node.store.ledger()).expired == 1_000


SECRET = "s" * 32


def test_demo_mode_and_secret_decide_the_initial_balance_and_the_policy(
    clean_env: pytest.MonkeyPatch,
) -> None:
    """No secret: demo mode, 1,000,000 to start, guests and anonymous spectators on. With a
    secret: 0 to start, guests and anonymous spectators off unless switched on."""
    demo = _settings()
    assert demo.demo and demo.resolved_initial_balance() == 1_000_000
    policy = demo.auth.policy()
    assert policy.demo and policy.guests_allowed and policy.allow_anonymous_spectators
    secured = _settings("--secret", SECRET)
    assert not secured.demo and secured.resolved_initial_balance() == 0
    policy = secured.auth.policy()
    assert policy.secret == SECRET
    assert not policy.guests_allowed and not policy.allow_anonymous_spectators
    opened = _settings(
        "--secret",
        SECRET,
        "--allow-guests",
        "--allow-anonymous-spectators",
        "--initial-balance",
        "7",
    )
    assert opened.auth.policy().guests_allowed and opened.auth.policy().allow_anonymous_spectators
    assert opened.resolved_initial_balance() == 7


def test_yes_no_settings_read_their_variables(clean_env: pytest.MonkeyPatch) -> None:
    """BACCARAT_ALLOW_GUESTS=yes switches guests on; --no-allow-guests wins over it; a value
    that is not yes or no is a clear error."""
    clean_env.setenv("BACCARAT_SECRET", SECRET)
    clean_env.setenv("BACCARAT_ALLOW_GUESTS", "yes")
    assert _settings().auth.allow_guests is True
    assert _settings("--no-allow-guests").auth.allow_guests is False
    clean_env.setenv("BACCARAT_ALLOW_ANONYMOUS_SPECTATORS", "0")
    assert _settings().auth.allow_anonymous_spectators is False
    clean_env.setenv("BACCARAT_ALLOW_GUESTS", "maybe")
    with pytest.raises(ValueError, match="--allow-guests is yes or no"):
        _settings()


@pytest.mark.parametrize(
    ("secret", "problem"),
    [("short", "at least 32"), ("/no/such/secret-file", "no secret file")],
)
def test_a_bad_secret_is_refused_at_start(secret: str, problem: str) -> None:
    """A short secret, or a path naming no file, stops the node with one line."""
    with pytest.raises(ValueError, match=problem):
        Settings.from_options(secret=secret)


def test_a_secret_file_is_read(tmp_path: Path) -> None:
    """--secret may name a file (a Docker or Kubernetes secret): its contents are the secret."""
    path = tmp_path / "secret"
    path.write_text(SECRET + "\n")
    assert Settings.from_options(secret=str(path)).auth.policy().secret == SECRET


class _LosesACancel(MemoryStore):
    """A store whose acquire_lease loses a cancel that comes while it runs, as redis-py's
    calls do on Python 3.11: asyncio.wait_for returns the result and drops a cancel that
    arrives as its write completes (Task.cancelling() still counts the request)."""

    def __init__(self) -> None:
        super().__init__(SystemClock().now_ms)
        self.lose_next = True
        self.losing = asyncio.Event()

    async def acquire_lease(self, table_id: str, node: str, ttl_ms: int) -> Lease | None:
        lease = await super().acquire_lease(table_id, node, ttl_ms)
        if self.lose_next:
            self.lose_next = False
            self.losing.set()
            with contextlib.suppress(asyncio.CancelledError):
                await asyncio.Event().wait()  # until the stop cancels the loop: then lost
        return lease


async def test_a_cancel_lost_in_a_store_call_does_not_hang_the_stop() -> None:
    """Issue 16, item 21: a worker's graceful stop never ended. Its table loop's cancel was
    lost inside the store call that got it the lease (redis-py on Python 3.11), so the loop
    went on to own the table, playing in child tasks that never heard of the cancel, and
    Node.stop waited for that loop for ever. Unbounded here (no STOP_TIMEOUT_S): it ends."""
    store = _LosesACancel()
    settings = Settings.from_options(
        port=0, tables="t1=classic8", betting_window=0.2, static_dir="/nonexistent/static"
    )
    node = Node(settings, store=store)
    await node.start()
    try:
        async with asyncio.timeout(5 * SCALE):
            await store.losing.wait()  # the loop is inside acquire_lease
            await node.stop()
        assert node.loops[0].token is None and await store.lease("t1") is None
    finally:
        for task in node._loop_tasks:  # a hung loop must not outlive the test
            task.cancel()


async def test_a_stop_that_never_ends_is_cut_short(monkeypatch: pytest.MonkeyPatch) -> None:
    """SIGTERM, then a stop that hangs (a store call that never answers): after the drain and
    STOP_TIMEOUT_S the node logs stop_timed_out and quits instead of staying up forever."""
    monkeypatch.setattr(app, "STOP_TIMEOUT_S", 0.2)
    real_stop = Node.stop

    async def stuck(self: Node) -> None:
        await real_stop(self)  # closes what it opened, then never returns
        await asyncio.Event().wait()

    monkeypatch.setattr(Node, "stop", stuck)
    settings = Settings(port=0, tables="classic8", drain_seconds=0, log_format="json")
    serving = asyncio.ensure_future(app._serve(settings, None))
    try:
        for _ in range(500):  # until _serve has put its SIGTERM handler on the loop
            if signal.getsignal(signal.SIGTERM) not in (signal.SIG_DFL, None) or serving.done():
                break
            await asyncio.sleep(0.01)
        os.kill(os.getpid(), signal.SIGTERM)
        with pytest.raises(app.StopTimedOut):
            await asyncio.wait_for(serving, 5)
    finally:
        serving.cancel()
        with contextlib.suppress(BaseException):
            await serving
        asyncio.get_running_loop().remove_signal_handler(signal.SIGTERM)
        asyncio.get_running_loop().remove_signal_handler(signal.SIGINT)
