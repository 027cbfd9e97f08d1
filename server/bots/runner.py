"""`baccarat bots`: run player and spectator bots against a site, show progress, write a report.

One process runs every bot on one asyncio loop; `--procs K` starts K such processes (each with
its share of the bots) and merges their reports. The exit statuses are
server.bots.options.EXIT_STATUSES (`baccarat bots --help` prints them).
"""

from __future__ import annotations

import argparse
import asyncio
import contextlib
import json
import os
import resource
import secrets
import signal
import sys
import tempfile
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

from server.auth import load_secret
from server.bots.bot import Bot, BotConfig, Shared
from server.bots.checker import ProblemKind
from server.bots.options import (
    EXIT_NO_CONNECTION,
    EXIT_PROBLEMS,
    EXIT_USAGE,
    SECRET_ENV,
)
from server.bots.progress import Progress, Tick
from server.bots.stats import Histogram, RunStats, merge_reports
from server.bots.strategy import StrategyName
from server.wire.codec import Encoding

__all__ = [
    "config_from_args",
    "raise_nofile_limit",
    "run_bots",
    "run_command",
    "run_from_args",
]


def raise_nofile_limit() -> int:
    """Lift the soft limit on open files to the hard one (each bot is one socket)."""
    soft, hard = resource.getrlimit(resource.RLIMIT_NOFILE)
    if hard == resource.RLIM_INFINITY or soft < hard:
        target = hard if hard != resource.RLIM_INFINITY else max(soft, 1 << 20)
        with contextlib.suppress(ValueError, OSError):
            resource.setrlimit(resource.RLIMIT_NOFILE, (target, hard))
    return resource.getrlimit(resource.RLIMIT_NOFILE)[0]


def config_from_args(args: argparse.Namespace, secret: str | None) -> BotConfig:
    return BotConfig(
        urls=tuple(args.url),
        tables=tuple(t.strip() for t in args.tables.split(",") if t.strip()),
        encoding=Encoding.JSON if args.encoding == "json" else Encoding.MSGPACK,
        strategy=StrategyName(args.strategy),
        unit=args.unit,
        bets_per_round=args.bets_per_round,
        rounds=args.rounds,
        secret=secret,
        run_id=args.run_id or secrets.token_hex(3),
        seed=args.seed,
        connect_timeout=args.connect_timeout,
        wallet=args.wallet,
    )


# --- one process ----------------------------------------------------------------------------


class _Ticker:
    """Turns the stats into a Tick every interval (rates over the interval)."""

    def __init__(self, stats: RunStats) -> None:
        self.stats = stats
        self.started = time.monotonic()
        self.last = self.started
        self.last_accepted = 0

    def tick(self) -> Tick:
        stats, now = self.stats, time.monotonic()
        rate = (stats.bets_accepted - self.last_accepted) / max(now - self.last, 1e-6)
        self.last, self.last_accepted = now, stats.bets_accepted
        window = stats.tick_events
        stats.tick_events = Histogram()
        return Tick(
            elapsed_s=now - self.started,
            connected=stats.connected,
            total=stats.bots + stats.spectators,
            rounds_checked=stats.rounds_checked,
            bets_accepted=stats.bets_accepted,
            bets_per_s=rate,
            event_p99_ms=window.quantile(0.99),
            ack_p99_ms=stats.bet_ack_latency.quantile(0.99),
            mismatches=stats.mismatches,
            gaps=stats.gaps,
            duplicates=stats.duplicates,
            disconnects=stats.disconnects,
        )


async def run_bots(
    config: BotConfig,
    bots: int,
    spectators: int,
    duration: float | None = None,
    grace: float = 30.0,
    interval: float = 2.0,
    on_tick: Callable[[Tick, RunStats], None] = lambda tick, stats: None,
    first_bot: int = 0,
    first_spectator: int = 0,
    connect_concurrency: int = 100,
) -> RunStats:
    """Run the bots until every one has seen `config.rounds` rounds, `duration` has passed,
    or SIGINT/SIGTERM; then stop betting, wait up to `grace` for settlements, and close."""
    stats = RunStats(bots=bots, spectators=spectators)
    shared = Shared(config, stats, asyncio.Semaphore(connect_concurrency))
    everyone = [Bot(first_bot + i, False, shared) for i in range(bots)]
    everyone += [Bot(first_spectator + i, True, shared) for i in range(spectators)]
    all_done = asyncio.Event()

    def one_done() -> None:
        if all(bot.done for bot in everyone):
            all_done.set()

    shared.on_done = one_done
    interrupted = asyncio.Event()
    loop = asyncio.get_running_loop()
    for sig in (signal.SIGINT, signal.SIGTERM):
        with contextlib.suppress(NotImplementedError, RuntimeError):
            loop.add_signal_handler(sig, interrupted.set)
    tasks = [asyncio.create_task(bot.run()) for bot in everyone]
    ticker = _Ticker(stats)
    try:
        await _until_end(config, stats, ticker, all_done, interrupted, duration, interval, on_tick)
        shared.draining = True
        if not interrupted.is_set():
            await _settle(everyone, grace, interrupted)
        _finish(everyone, stats)
    finally:
        shared.stop.set()
        await asyncio.gather(*(bot.close() for bot in everyone), return_exceptions=True)
        await asyncio.gather(*tasks, return_exceptions=True)
        for sig in (signal.SIGINT, signal.SIGTERM):
            with contextlib.suppress(NotImplementedError, RuntimeError):
                loop.remove_signal_handler(sig)
    on_tick(ticker.tick(), stats)
    return stats


def _finish(everyone: list[Bot], stats: RunStats) -> None:
    """Every bot stops; how their connections ended goes into the stats."""
    for bot in everyone:
        bot.finish()
    stats.refused = sum(bot.refused is not None for bot in everyone)
    stats.connections_ended(
        len(everyone),
        never=sum(not bot.welcomed for bot in everyone),
        refused_after_welcome=[bot.refused for bot in everyone if bot.welcomed and bot.refused],
        lost=[bot.lost for bot in everyone if bot.lost],
    )


async def _until_end(
    config: BotConfig,
    stats: RunStats,
    ticker: _Ticker,
    all_done: asyncio.Event,
    interrupted: asyncio.Event,
    duration: float | None,
    interval: float,
    on_tick: Callable[[Tick, RunStats], None],
) -> None:
    deadline = time.monotonic() + duration if duration else None
    ends = asyncio.ensure_future(_first(all_done.wait(), interrupted.wait()))
    try:
        while not ends.done():
            now = time.monotonic()
            if deadline is not None and now >= deadline:
                return
            if not stats.ever_connected and now - ticker.started > config.connect_timeout:
                return  # nobody can connect: give up
            step = interval if deadline is None else min(interval, deadline - now)
            await asyncio.wait([ends], timeout=step)
            on_tick(ticker.tick(), stats)
    finally:
        ends.cancel()


async def _first(*waits: Any) -> None:
    tasks = [asyncio.ensure_future(w) for w in waits]
    try:
        await asyncio.wait(tasks, return_when=asyncio.FIRST_COMPLETED)
    finally:
        for task in tasks:
            task.cancel()


async def _settle(everyone: list[Bot], grace: float, interrupted: asyncio.Event) -> None:
    """Wait (up to `grace`) for bets in flight to be answered and settled."""
    deadline = time.monotonic() + grace
    while time.monotonic() < deadline and not interrupted.is_set():
        if not any(bot.outstanding for bot in everyone if bot.ws is not None):
            return
        with contextlib.suppress(TimeoutError):
            await asyncio.wait_for(interrupted.wait(), 0.1)


# --- the command ----------------------------------------------------------------------------


def _exit_status(report: dict[str, Any]) -> int:
    if report["mismatches"] or report["gaps"] or report["duplicates"]:
        return EXIT_PROBLEMS
    if report.get("no_table"):
        print("baccarat bots: the site runs none of the --tables asked for", file=sys.stderr)
        return EXIT_USAGE
    if report["never_connected"] or report["refused"] or report["lost"]:
        return EXIT_NO_CONNECTION
    if not report["connected"] and report["bots"] + report["spectators"]:
        return EXIT_NO_CONNECTION
    return 0


def _write_report(report: dict[str, Any], path: str | None) -> None:
    text = json.dumps(report, indent=2)
    if path:
        Path(path).write_text(text + "\n")
    else:
        print(text, flush=True)


def _summary(report: dict[str, Any]) -> str:
    lat = report["latency_ms"]
    lines = [
        f"baccarat bots: {report['connected']} connections, {report['rounds_checked']} rounds "
        f"checked, {report['bets_accepted']} bets accepted, {report['mismatches']} mismatches, "
        f"{report['gaps']} gaps, {report['duplicates']} duplicates, {report['disconnects']} "
        f"disconnects; event p99 {lat['event']['p99']} ms, bet ack p99 {lat['bet_ack']['p99']} ms"
    ]
    lines += [
        f"baccarat bots: {problem['detail']}"
        for problem in report["problems"]
        if problem["kind"] == ProblemKind.CONNECT
    ]
    return "\n".join(lines)


def _runner() -> Callable[[Any], Any]:
    try:
        import uvloop
    except ImportError:
        return asyncio.run
    run: Callable[[Any], Any] = uvloop.run
    return run


def _secret_option(args: argparse.Namespace) -> str | None:
    """--secret as given (a secret or a file holding it), else $BACCARAT_SECRET."""
    value: str | None = args.secret if args.secret is not None else os.environ.get(SECRET_ENV)
    return value


def run_from_args(args: argparse.Namespace) -> int:
    try:
        secret = load_secret(_secret_option(args))
    except ValueError as error:  # a short secret, a missing or empty file: as `serve` says it
        print(f"baccarat bots: --secret: {error}", file=sys.stderr)
        return EXIT_USAGE
    raise_nofile_limit()
    config = config_from_args(args, secret)
    if args.procs > 1:
        return _run_procs(args, config)
    if args.child:
        return _run_child(args, config)
    progress = Progress(enabled=not args.quiet)
    try:
        report, status = _runner()(run_command(args, config, progress))
    finally:
        progress.close()
    _write_report(report, args.report)
    print(_summary(report), file=sys.stderr)
    return int(status)


async def run_command(
    args: argparse.Namespace, config: BotConfig, progress: Progress
) -> tuple[dict[str, Any], int]:
    """One process's run of `baccarat bots`: its report and exit status."""
    stats = await run_bots(
        config,
        args.bots,
        args.spectators,
        duration=args.duration,
        grace=args.grace,
        interval=args.interval,
        on_tick=lambda tick, _: progress.show(tick),
        connect_concurrency=args.connect_concurrency,
    )
    report = stats.report()
    return report, _exit_status(report)


def _run_child(args: argparse.Namespace, config: BotConfig) -> int:
    """One of --procs: progress as JSON lines on stdout, the raw report to --report."""

    def emit(tick: Tick, stats: RunStats) -> None:
        line = {
            "connected": tick.connected,
            "total": tick.total,
            "rounds_checked": tick.rounds_checked,
            "bets_accepted": tick.bets_accepted,
            "bets_per_s": tick.bets_per_s,
            "event_p99_ms": tick.event_p99_ms,
            "ack_p99_ms": tick.ack_p99_ms,
            "mismatches": tick.mismatches,
            "gaps": tick.gaps,
            "duplicates": tick.duplicates,
            "disconnects": tick.disconnects,
        }
        print(json.dumps(line), flush=True)

    stats = _runner()(
        run_bots(
            config,
            args.bots,
            args.spectators,
            duration=args.duration,
            grace=args.grace,
            interval=args.interval,
            on_tick=emit,
            first_bot=args.first_bot,
            first_spectator=args.first_spectator,
            connect_concurrency=args.connect_concurrency,
        )
    )
    _write_report(stats.report(raw=True), args.report)
    return 0


def _share(total: int, parts: int, part: int) -> tuple[int, int]:
    """(first index, count) of `part` when `total` is split into `parts` near-equal shares."""
    base, extra = divmod(total, parts)
    first = part * base + min(part, extra)
    return first, base + (1 if part < extra else 0)


def _child_argv(args: argparse.Namespace, config: BotConfig, part: int, report: str) -> list[str]:
    first_bot, bots = _share(args.bots, args.procs, part)
    first_spec, specs = _share(args.spectators, args.procs, part)
    argv = [sys.executable, "-m", "server.cli", "bots", "--child", "--url", ",".join(args.url)]
    options: dict[str, object] = {
        "--bots": bots,
        "--spectators": specs,
        "--first-bot": first_bot,
        "--first-spectator": first_spec,
        "--tables": args.tables,
        "--duration": args.duration,
        "--rounds": args.rounds,
        "--strategy": args.strategy,
        "--unit": args.unit,
        "--bets-per-round": args.bets_per_round,
        "--encoding": args.encoding,
        "--report": report,
        "--grace": args.grace,
        "--interval": args.interval,
        "--connect-concurrency": max(1, args.connect_concurrency // args.procs),
        "--connect-timeout": args.connect_timeout,
        "--seed": None if args.seed is None else args.seed + part,
        "--run-id": config.run_id,
    }
    for name, value in options.items():
        if value is not None and value != "":
            argv += [name, str(value)]
    return [*argv, "--wallet"] if args.wallet else argv


def _child_env(args: argparse.Namespace) -> dict[str, str]:
    """The children read the secret as the parent did, from the environment (never argv,
    which every user of the machine can read)."""
    env = dict(os.environ)
    value = _secret_option(args)
    if value is None:
        env.pop(SECRET_ENV, None)
    else:
        env[SECRET_ENV] = value
    return env


def _run_procs(args: argparse.Namespace, config: BotConfig) -> int:
    progress = Progress(enabled=not args.quiet)
    with tempfile.TemporaryDirectory(prefix="baccarat-bots-") as folder:
        reports = [os.path.join(folder, f"part{i}.json") for i in range(args.procs)]
        try:
            _runner()(_drive_children(args, config, reports, progress))
        finally:
            progress.close()
        parts = []
        for path in reports:
            try:
                parts.append(json.loads(Path(path).read_text()))
            except (OSError, ValueError):
                print(f"baccarat bots: a process left no report ({path})", file=sys.stderr)
                return EXIT_PROBLEMS
    report = merge_reports(parts)
    report["procs"] = args.procs
    _write_report(report, args.report)
    print(_summary(report), file=sys.stderr)
    return _exit_status(report)


async def _drive_children(
    args: argparse.Namespace, config: BotConfig, reports: list[str], progress: Progress
) -> None:
    children = [
        await asyncio.create_subprocess_exec(
            *_child_argv(args, config, part, report),
            stdout=asyncio.subprocess.PIPE,
            env=_child_env(args),
        )
        for part, report in enumerate(reports)
    ]
    latest: list[dict[str, Any]] = [{} for _ in children]
    started = time.monotonic()
    shown = [0.0]  # when the display was last refreshed: once per interval, not per child
    loop = asyncio.get_running_loop()

    def forward(sig: signal.Signals) -> None:
        for child in children:
            if child.returncode is None:
                child.send_signal(sig)

    for sig in (signal.SIGINT, signal.SIGTERM):
        loop.add_signal_handler(sig, forward, sig)

    async def read(index: int) -> None:
        stream = children[index].stdout
        assert stream is not None
        while line := await stream.readline():
            with contextlib.suppress(ValueError):
                latest[index] = json.loads(line)
            now = time.monotonic()
            if now - shown[0] >= args.interval * 0.9:
                shown[0] = now
                progress.show(_merged_tick(latest, now - started))

    try:
        await asyncio.gather(*(read(i) for i in range(len(children))))
        await asyncio.gather(*(child.wait() for child in children))
        progress.show(_merged_tick(latest, time.monotonic() - started))
    finally:
        for sig in (signal.SIGINT, signal.SIGTERM):
            loop.remove_signal_handler(sig)


def _merged_tick(latest: list[dict[str, Any]], elapsed: float) -> Tick:
    def total(name: str) -> int:
        return sum(int(part.get(name, 0)) for part in latest)

    def worst(name: str) -> float:
        return max((float(part.get(name, 0.0)) for part in latest), default=0.0)

    return Tick(
        elapsed_s=elapsed,
        connected=total("connected"),
        total=total("total"),
        rounds_checked=total("rounds_checked"),
        bets_accepted=total("bets_accepted"),
        bets_per_s=sum(float(part.get("bets_per_s", 0.0)) for part in latest),
        event_p99_ms=worst("event_p99_ms"),  # the worst process's p99: a bound, not a merge
        ack_p99_ms=worst("ack_p99_ms"),
        mismatches=total("mismatches"),
        gaps=total("gaps"),
        duplicates=total("duplicates"),
        disconnects=total("disconnects"),
    )
