"""Strategies, latency histograms, report merging and tokens."""

from __future__ import annotations

import asyncio
import importlib.util
import random
from pathlib import Path

import jwt
import pytest

from server.auth import Identity, Role, verify_token
from server.bots.bot import Bot, BotConfig, Shared, with_query
from server.bots.stats import Histogram, RunStats, merge_reports
from server.bots.strategy import Strategy, StrategyName, limits_from_rules
from server.core.bets import Spot
from server.core.rules import PRESETS

SECRET = "a-test-secret-of-at-least-32-bytes!"
ROOT = Path(__file__).resolve().parents[2]
LIMITS = limits_from_rules(PRESETS["classic8"].to_dict())


@pytest.mark.parametrize("name", list(StrategyName))
def test_strategies_stay_within_limits_and_balance(name: StrategyName) -> None:
    """Every bet a strategy makes fits the spot's limits and what the balance still covers."""
    strategy = Strategy(name, LIMITS, random.Random(7), unit=3, bets_per_round=2)
    for balance in (1_000_000, 450, 99, 0):
        for _ in range(50):
            left = balance
            on_spot: dict[Spot, int] = {}
            for spot, amount in strategy.bets(balance):
                on_spot[spot] = on_spot.get(spot, 0) + amount
                left -= amount
                assert LIMITS[spot].minimum <= on_spot[spot] <= LIMITS[spot].maximum
            assert left >= 0
            strategy.settled(sum(on_spot.values()), 0)


def test_martingale_doubles_after_a_loss_and_resets_after_a_win() -> None:
    """Martingale: 100, lose -> 200, lose -> 400, win -> 100."""
    strategy = Strategy(StrategyName.MARTINGALE, LIMITS, random.Random(1))
    stakes = []
    for returned_factor in (0, 0, 2, 0):
        ((spot, amount),) = strategy.bets(1_000_000)
        assert spot is Spot.BANKER
        stakes.append(amount)
        strategy.settled(amount, amount * returned_factor)
    assert stakes == [100, 200, 400, 100]


def test_histogram_quantiles_are_within_the_bucket_width() -> None:
    """p50/p99 of 1..1000 ms within 4%; the max is exact; merging adds up."""
    histogram = Histogram()
    for ms in range(1, 1001):
        histogram.add(float(ms))
    assert histogram.quantile(0.5) == pytest.approx(500, rel=0.04)
    assert histogram.quantile(0.99) == pytest.approx(990, rel=0.04)
    assert histogram.max == 1000.0
    other = Histogram.from_raw(histogram.to_raw())
    other.merge(histogram)
    assert other.count == 2000 and other.quantile(0.5) == pytest.approx(500, rel=0.04)
    assert Histogram().summary()["p99"] == 0.0


def test_reports_of_processes_merge() -> None:
    """Counts add, rejections by code add, histograms merge."""
    a, b = RunStats(bots=2), RunStats(bots=3, spectators=1)
    a.bets_rejected["LIMIT"] += 1
    b.bets_rejected["LIMIT"] += 2
    a.event_latency.add(1.0)
    b.event_latency.add(100.0)
    merged = merge_reports([a.report(raw=True), b.report(raw=True)])
    assert merged["bots"] == 5 and merged["spectators"] == 1
    assert merged["bets_rejected"] == {"LIMIT": 3}
    assert merged["latency_ms"]["event"]["count"] == 2
    assert merged["latency_ms"]["event"]["max"] == 100.0


def test_report_has_the_promised_fields() -> None:
    """The report carries every field the issue names, latencies with p50/p95/p99/max."""
    report = RunStats().report()
    for name in (
        "bots",
        "spectators",
        "connected",
        "rounds_checked",
        "bets_accepted",
        "bets_rejected",
        "mismatches",
        "gaps",
        "duplicates",
        "disconnects",
    ):
        assert name in report
    for name in ("event", "bet_ack"):
        assert set(report["latency_ms"][name]) >= {"p50", "p95", "p99", "max"}


def test_bots_tokens_are_the_servers(tmp_path: Path) -> None:
    """Each bot's token is minted by server.auth (issue 16): the server's verify_token admits
    it, as the bot's player or spectator, with every claim it requires (iat among them)."""
    config = BotConfig(urls=("ws://h:1/ws",), secret=SECRET, run_id="r1")
    shared = Shared(config, RunStats(), asyncio.Semaphore(1))
    player, spectator = Bot(3, False, shared), Bot(4, True, shared)
    assert player.token is not None and spectator.token is not None
    assert verify_token(SECRET, player.token) == Identity("bot-r1-3", "bot 3", Role.PLAYER)
    assert verify_token(SECRET, spectator.token).role is Role.SPECTATOR
    claims = jwt.decode(player.token, SECRET, algorithms=["HS256"])
    assert set(claims) == {"sub", "name", "role", "iat", "exp"}
    url = with_query(player._connect_url(), role="spectator")
    assert url.startswith("ws://h:1/ws?") and "role=spectator" in url and "token=" in url


def test_the_bots_mint_no_tokens_of_their_own() -> None:
    """One place makes tokens: server/auth.py (the bots' twin is gone)."""
    assert importlib.util.find_spec("server.bots.tokens") is None
    sources = (ROOT / "server" / "bots").glob("*.py")
    assert not [path.name for path in sources if "jwt" in path.read_text()]


def test_procs_share_the_bots_without_overlap() -> None:
    """--procs splits bots into near-equal, consecutive, disjoint index ranges."""
    from server.bots.runner import _share

    for total, parts in ((10, 3), (2, 4), (0, 2), (2000, 7)):
        shares = [_share(total, parts, part) for part in range(parts)]
        assert sum(count for _, count in shares) == total
        assert [first for first, _ in shares] == [
            sum(count for _, count in shares[:i]) for i in range(parts)
        ]
        assert max(c for _, c in shares) - min(c for _, c in shares) <= 1


def test_connect_failures_are_said_in_a_few_words() -> None:
    """A refused TCP connect is "connection refused" even when asyncio joins the errors of
    every address it tried; a timeout says how long it waited."""
    from server.bots.bot import connect_failure_reason

    joined = OSError(
        "Multiple exceptions: [Errno 111] Connect call failed ('::1', 1, 0, 0), "
        "[Errno 111] Connect call failed ('127.0.0.1', 1)"
    )
    assert connect_failure_reason(joined, 5) == "connection refused"
    assert connect_failure_reason(ConnectionRefusedError(111, "x"), 5) == "connection refused"
    assert connect_failure_reason(TimeoutError(), 2.5) == "no handshake within 2.5 s"
    assert connect_failure_reason(OSError(-2, "Name or service not known"), 5) == (
        "Name or service not known"
    )
