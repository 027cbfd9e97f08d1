"""Counters and latency histograms of a bot run, its JSON report, and merging reports.

Latencies go into log-scale buckets (4% wide) rather than lists, so memory stays flat however
many deliveries a run sees, and the histograms of several processes add up exactly.
"""

from __future__ import annotations

import math
from collections import Counter
from dataclasses import dataclass, field
from typing import Any

from server.bots.checker import Problem, ProblemKind

__all__ = ["Histogram", "RunStats", "merge_reports"]

_GROWTH = math.log(1.04)
KEEP_PROBLEMS = 50  # problem details kept for the report (all are counted)


@dataclass(slots=True)
class Histogram:
    """Milliseconds in log buckets of 4%; the max is exact."""

    buckets: Counter[int] = field(default_factory=Counter)
    count: int = 0
    max: float = 0.0

    def add(self, ms: float) -> None:
        us = ms * 1000.0
        index = 0 if us < 1.0 else int(math.log(us) / _GROWTH) + 1
        self.buckets[index] += 1
        self.count += 1
        if ms > self.max:
            self.max = ms

    def quantile(self, q: float) -> float:
        """The q-quantile (0..1) in ms, to within the bucket width; 0 when empty."""
        if not self.count:
            return 0.0
        rank = max(1, math.ceil(q * self.count))
        seen = 0
        for index in sorted(self.buckets):
            seen += self.buckets[index]
            if seen >= rank:
                if index == 0:
                    return 0.0
                return min(self.max, math.exp((index - 0.5) * _GROWTH) / 1000.0)
        return self.max

    def summary(self) -> dict[str, float | int]:
        return {
            "count": self.count,
            "p50": round(self.quantile(0.50), 3),
            "p95": round(self.quantile(0.95), 3),
            "p99": round(self.quantile(0.99), 3),
            "max": round(self.max, 3),
        }

    def merge(self, other: Histogram) -> None:
        self.buckets.update(other.buckets)
        self.count += other.count
        self.max = max(self.max, other.max)

    def to_raw(self) -> dict[str, Any]:
        return {"buckets": {str(k): v for k, v in self.buckets.items()}, "max": self.max}

    @classmethod
    def from_raw(cls, raw: dict[str, Any]) -> Histogram:
        buckets = Counter({int(k): int(v) for k, v in raw.get("buckets", {}).items()})
        return cls(buckets, sum(buckets.values()), float(raw.get("max", 0.0)))


@dataclass(slots=True)
class RunStats:
    """Everything one process's bots count; updated from the event loop only."""

    bots: int = 0
    spectators: int = 0
    connected: int = 0  # open connections now
    ever_connected: int = 0  # connections that got a welcome, reconnects included
    connect_failures: int = 0
    connect_errors: Counter[str] = field(default_factory=Counter)  # failures by reason
    never_connected: int = 0  # bots that never got a welcome (set at the end of the run)
    refused: int = 0  # bots the server refused for good (they stopped trying)
    lost: int = 0  # bots that had connected, were dropped and failed to reconnect by the end
    no_table: int = 0  # bots whose site runs none of the tables asked for
    disconnects: int = 0
    rounds_checked: int = 0
    rounds_unchecked: int = 0
    rounds_completed: int = 0
    payouts_checked: int = 0
    settlements: int = 0
    bets_sent: int = 0
    bets_accepted: int = 0
    bets_rejected: Counter[str] = field(default_factory=Counter)
    bets_unanswered: int = 0
    mismatches: int = 0
    gaps: int = 0
    missed_events: int = 0
    duplicates: int = 0
    resyncs: int = 0
    events: int = 0
    event_latency: Histogram = field(default_factory=Histogram)
    bet_ack_latency: Histogram = field(default_factory=Histogram)
    problems: list[dict[str, str]] = field(default_factory=list)
    # The progress display's window: reset at every tick.
    tick_events: Histogram = field(default_factory=Histogram)

    def problem(self, problem: Problem) -> None:
        if problem.kind is ProblemKind.MISMATCH:
            self.mismatches += 1
        elif problem.kind is ProblemKind.GAP:
            self.gaps += 1
        elif problem.kind is ProblemKind.DUPLICATE:
            self.duplicates += 1
        if problem.kind is ProblemKind.CONNECT:
            self.problems.insert(0, problem.to_dict())  # first: it explains the rest
            del self.problems[KEEP_PROBLEMS:]
        elif len(self.problems) < KEEP_PROBLEMS:
            self.problems.append(problem.to_dict())

    def connect_failed(self, reason: str) -> None:
        self.connect_failures += 1
        self.connect_errors[reason] += 1

    def connections_ended(
        self, asked: int, never: int, refused_after_welcome: list[str], lost: list[str]
    ) -> None:
        """At the end of a run: bots that never connected, were refused on reconnecting, or
        were dropped and failed to come back are problems that say why (the reasons their
        handshakes failed with)."""
        self.never_connected = never
        self.lost = len(lost)
        for bots, what in (
            (refused_after_welcome, "were refused when reconnecting"),
            (lost, "were dropped and could not reconnect"),
        ):
            if bots:
                said = "; ".join(f"{n}: {reason}" for reason, n in Counter(bots).most_common())
                detail = f"{len(bots)} of {asked} bots {what} ({said})"
                self.problem(Problem(ProblemKind.CONNECT, "", detail))
        if never:
            detail = f"{never} of {asked} bots never connected: {self.connect_reasons()}"
            self.problem(Problem(ProblemKind.CONNECT, "", detail))

    def connect_reasons(self) -> str:
        if not self.connect_errors:
            return "no connect failure; still connecting when the run ended"
        shown = self.connect_errors.most_common(3)
        said = [f"{n} connect failure{'s' if n > 1 else ''}: {reason}" for reason, n in shown]
        others = self.connect_failures - sum(n for _, n in shown)
        if others:
            said.append(f"{others} for other reasons")
        return "; ".join(said)

    def event_seen(self, latency_ms: float) -> None:
        self.events += 1
        self.event_latency.add(latency_ms)
        self.tick_events.add(latency_ms)

    @property
    def problem_count(self) -> int:
        return self.mismatches + self.gaps + self.duplicates

    def report(self, raw: bool = False) -> dict[str, Any]:
        """The JSON report; `raw` adds the histograms so reports of processes can be merged."""
        report: dict[str, Any] = {
            "bots": self.bots,
            "spectators": self.spectators,
            "connected": self.ever_connected,
            "connected_at_end": self.connected,
            "connect_failures": self.connect_failures,
            "connect_errors": dict(self.connect_errors.most_common()),
            "never_connected": self.never_connected,
            "refused": self.refused,
            "lost": self.lost,
            "no_table": self.no_table,
            "rounds_checked": self.rounds_checked,
            "rounds_unchecked": self.rounds_unchecked,
            "rounds_completed": self.rounds_completed,
            "payouts_checked": self.payouts_checked,
            "settlements": self.settlements,
            "bets_sent": self.bets_sent,
            "bets_accepted": self.bets_accepted,
            "bets_rejected": dict(sorted(self.bets_rejected.items())),
            "bets_unanswered": self.bets_unanswered,
            "mismatches": self.mismatches,
            "gaps": self.gaps,
            "missed_events": self.missed_events,
            "duplicates": self.duplicates,
            "resyncs": self.resyncs,
            "disconnects": self.disconnects,
            "events": self.events,
            "latency_ms": {
                "event": self.event_latency.summary(),
                "bet_ack": self.bet_ack_latency.summary(),
            },
            "problems": self.problems,
        }
        if raw:
            report["histograms"] = {
                "event": self.event_latency.to_raw(),
                "bet_ack": self.bet_ack_latency.to_raw(),
            }
        return report


_SUMMED = (
    "bots",
    "spectators",
    "connected",
    "connected_at_end",
    "connect_failures",
    "never_connected",
    "refused",
    "lost",
    "no_table",
    "rounds_checked",
    "rounds_unchecked",
    "rounds_completed",
    "payouts_checked",
    "settlements",
    "bets_sent",
    "bets_accepted",
    "bets_unanswered",
    "mismatches",
    "gaps",
    "missed_events",
    "duplicates",
    "resyncs",
    "disconnects",
    "events",
)


def merge_reports(reports: list[dict[str, Any]]) -> dict[str, Any]:
    """One report from several processes' raw reports (counts add, histograms merge)."""
    merged: dict[str, Any] = {name: sum(r.get(name, 0) for r in reports) for name in _SUMMED}
    rejected: Counter[str] = Counter()
    for report in reports:
        rejected.update(report.get("bets_rejected", {}))
    merged["bets_rejected"] = dict(sorted(rejected.items()))
    errors: Counter[str] = Counter()
    for report in reports:
        errors.update(report.get("connect_errors", {}))
    merged["connect_errors"] = dict(errors.most_common())
    latency = {}
    for name in ("event", "bet_ack"):
        histogram = Histogram()
        for report in reports:
            histogram.merge(Histogram.from_raw(report.get("histograms", {}).get(name, {})))
        latency[name] = histogram.summary()
    merged["latency_ms"] = latency
    merged["problems"] = [p for r in reports for p in r.get("problems", [])][:KEEP_PROBLEMS]
    return merged
