"""Prometheus metrics of one node: the registry, its instruments and one small call per fact.

Each Node owns a `Metrics` with its own CollectorRegistry (tests run several nodes in one
process, and a global registry would mix their counts). The table loops, the hub and the
sessions get that object and call the verbs below; none of them sees prometheus_client.
`render()` is the body of GET /metrics.

A leaf module: it imports nothing from the server, so every layer above the core may use it.
"""

from __future__ import annotations

import time
from bisect import bisect_left
from collections import Counter
from collections.abc import Callable, Iterable, Iterator

from prometheus_client import (
    CollectorRegistry,
    Gauge,
    Histogram,
    ProcessCollector,
    disable_created_metrics,
    generate_latest,
)
from prometheus_client import Counter as PromCounter
from prometheus_client.core import CounterMetricFamily, GaugeMetricFamily, HistogramMetricFamily
from prometheus_client.registry import Collector
from prometheus_client.utils import floatToGoString

__all__ = ["CONTENT_TYPE", "ConnectionCounts", "Metrics"]

# No `*_created` series: they double what Prometheus stores and say only when a node started.
disable_created_metrics()  # type: ignore[no-untyped-call]

# The classic text format, which every Prometheus version reads (generate_latest writes it).
CONTENT_TYPE = "text/plain; version=0.0.4; charset=utf-8"

# (role, encoding) -> open connections, read at scrape time from the node's live sessions, so
# the gauge can never drift from the truth the way paired inc/dec calls can.
ConnectionCounts = Callable[[], Counter[tuple[str, str]]]

# Commit-to-write is ~1 ms on loopback (docs/benchmarks.md); the tail is what matters.
_FANOUT_BUCKETS = (0.0005, 0.001, 0.002, 0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1.0, 2.5)
# A bet is one Lua script: ~0.25 ms p50, ~1.6 ms p99 on loopback.
_BET_BUCKETS = (0.0005, 0.001, 0.002, 0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1.0, 2.5, 5.0)
# A collection stops the loop; the target is no pause over 20 ms (docs/benchmarks.md).
_GC_BUCKETS = (0.0005, 0.001, 0.002, 0.005, 0.01, 0.02, 0.05, 0.1, 0.2, 0.5, 1.0)
# An operator's wallet over HTTP: milliseconds on a LAN, up to --wallet-timeout (2 s).
_WALLET_BUCKETS = (0.002, 0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1.0, 2.0, 5.0, 10.0)


class _Connections(Collector):
    """The connections gauge, computed when Prometheus scrapes."""

    counts: ConnectionCounts = Counter

    def collect(self) -> Iterator[GaugeMetricFamily]:
        family = GaugeMetricFamily(
            "baccarat_connections",
            "Open WebSocket connections by role and encoding",
            labels=["role", "encoding"],
        )
        for (role, encoding), value in sorted(self.counts().items()):
            family.add_metric([role, encoding], value)
        yield family


class _Tally(Collector):
    """A counter by one label, kept as plain integers and read when Prometheus scrapes.

    The bet path counts four things per bet: with prometheus_client's children each count
    takes a lock and a few calls (~1 us of a bet's ~30 on one core, docs/benchmarks.md);
    here it is one dict update. The family is written exactly as a labelled Counter's."""

    def __init__(self, name: str, documentation: str, label: str) -> None:
        self.name, self.documentation, self.label = name, documentation, label
        self.counts: dict[str, int] = {}

    def add(self, value: str, count: int = 1) -> None:
        counts = self.counts
        counts[value] = counts.get(value, 0) + count

    def collect(self) -> Iterator[CounterMetricFamily]:
        family = CounterMetricFamily(self.name, self.documentation, labels=[self.label])
        for value, count in list(self.counts.items()):
            family.add_metric([value], count)
        yield family


class _Timings(Collector):
    """A histogram without labels, kept as plain numbers (see _Tally) and read at scrape."""

    def __init__(self, name: str, documentation: str, buckets: tuple[float, ...]) -> None:
        self.name, self.documentation, self.bounds = name, documentation, buckets
        self.counts = [0] * (len(buckets) + 1)  # per bucket, not cumulative; the last: +Inf
        self.sum = 0.0

    def observe(self, seconds: float) -> None:
        self.counts[bisect_left(self.bounds, seconds)] += 1  # le: a bound counts as inside
        self.sum += seconds

    def collect(self) -> Iterator[HistogramMetricFamily]:
        cumulative, running = [], 0
        for bound, count in zip(
            (*map(floatToGoString, self.bounds), "+Inf"), self.counts, strict=True
        ):
            running += count
            cumulative.append((bound, running))
        family = HistogramMetricFamily(self.name, self.documentation)
        family.add_metric([], cumulative, self.sum)
        yield family


class Metrics:
    """Every metric family of a node, and one verb per thing worth counting."""

    def __init__(self) -> None:
        self.registry = CollectorRegistry(auto_describe=True)
        reg = self.registry
        self._connections = _Connections()
        reg.register(self._connections)
        ProcessCollector(registry=reg)  # RSS, CPU, open fds of this process
        # Registered in this order, which is the order /metrics lists them in.
        self._client_traffic(reg)
        self._table_loops(reg)
        self._limits(reg)
        self.gc_pauses = Histogram(
            "baccarat_gc_pause_seconds",
            "Pauses of Python's cyclic garbage collector in this process, by generation "
            "(2: a full collection)",
            ["generation"],
            buckets=_GC_BUCKETS,
            registry=reg,
        )
        self._gc: dict[int, Histogram] = {}
        self._wallet(reg)

    def _client_traffic(self, reg: CollectorRegistry) -> None:
        """Messages in and out, and how long an event and a bet take to reach a client."""
        self.messages_in = _Tally(
            "baccarat_messages_in", "Client messages handled, by type", "type"
        )
        reg.register(self.messages_in)
        self.messages_out = _Tally(
            "baccarat_messages_out", "Messages written to clients, by type", "type"
        )
        reg.register(self.messages_out)
        self.fanout_latency = Histogram(
            "baccarat_fanout_latency_seconds",
            "From a table event's commit (its ts) to its write to this node's subscribers",
            buckets=_FANOUT_BUCKETS,
            registry=reg,
        )
        self.bet_latency = _Timings(
            "baccarat_bet_latency_seconds",
            "From a bet message's arrival to its answer (accepted or rejected)",
            _BET_BUCKETS,
        )
        reg.register(self.bet_latency)
        self.bets = _Tally(
            "baccarat_bets", "Bets answered, by result code (ACCEPTED or the reject code)", "result"
        )
        reg.register(self.bets)

    def _table_loops(self, reg: CollectorRegistry) -> None:
        """What the table loops did: rounds, leases, and the store calls that failed."""
        self.rounds = PromCounter(
            "baccarat_rounds", "Rounds this node settled, by outcome", ["outcome"], registry=reg
        )
        self.rounds_voided = PromCounter(
            "baccarat_rounds_voided", "Rounds this node voided and refunded", registry=reg
        )
        self.lease_acquisitions = PromCounter(
            "baccarat_lease_acquisitions", "Table leases this node took", ["table"], registry=reg
        )
        self.lease_losses = PromCounter(
            "baccarat_lease_losses",
            "Table leases this node lost (expired or fenced off)",
            ["table"],
            registry=reg,
        )
        self.store_errors = PromCounter(
            "baccarat_store_errors",
            "Store calls that failed (store unreachable), by component",
            ["component"],
            registry=reg,
        )

    def _limits(self, reg: CollectorRegistry) -> None:
        """Clients cut off or refused by a limit, and the operator API's requests."""
        self.slow_clients_dropped = PromCounter(
            "baccarat_slow_clients_dropped",
            "Clients cut off for falling too far behind (--max-buffer-bytes)",
            registry=reg,
        )
        self.rate_limited = PromCounter(
            "baccarat_rate_limited",
            "Client messages refused by a rate limit, by kind (bets, pings, joins, replays)",
            ["kind"],
            registry=reg,
        )
        self.operator_requests = PromCounter(
            "baccarat_operator_requests",
            "Operator API requests, by action (credit, debit, player, tables, pause, resume) "
            "and HTTP status",
            ["action", "status"],
            registry=reg,
        )

    def _wallet(self, reg: CollectorRegistry) -> None:
        """The operator's wallet (docs/wallet.md): its calls and the outbox's backlog."""
        self.wallet_calls = PromCounter(
            "baccarat_wallet_calls",
            "Calls to the operator's wallet, by call and outcome (a status, or why the "
            "outcome is unknown: timeout, connection, http_status, conflict, signature, answer)",
            ["call", "status"],
            registry=reg,
        )
        self.wallet_latency = Histogram(
            "baccarat_wallet_call_seconds",
            "How long a call to the operator's wallet took, by call",
            ["call"],
            buckets=_WALLET_BUCKETS,
            registry=reg,
        )
        self.outbox_depth = Gauge(
            "baccarat_wallet_outbox_depth",
            "Credits and cancels owed to the wallet, not yet acknowledged (parked included)",
            registry=reg,
        )
        self.outbox_oldest = Gauge(
            "baccarat_wallet_outbox_oldest_seconds",
            "Age of the oldest credit or cancel owed to the wallet (0: none)",
            registry=reg,
        )
        self.outbox_parked_now = Gauge(
            "baccarat_wallet_outbox_parked",
            "Credits and cancels parked after --wallet-retry-hours, for an operator to resolve",
            registry=reg,
        )
        self.outbox_parks = PromCounter(
            "baccarat_wallet_outbox_parks",
            "Credits and cancels this node parked, by call",
            ["call"],
            registry=reg,
        )

    # --- wiring ---------------------------------------------------------------------------
    def watch_connections(self, counts: ConnectionCounts) -> None:
        """Where the connections gauge reads (role, encoding) counts at each scrape."""
        self._connections.counts = counts

    def render(self) -> bytes:
        """The registry in Prometheus text format (CONTENT_TYPE)."""
        return generate_latest(self.registry)

    # --- transport ------------------------------------------------------------------------
    def message_in(self, kind: str) -> None:
        self.messages_in.add(kind)

    def message_out(self, kind: str, count: int = 1) -> None:
        self.messages_out.add(kind, count)

    def event_written(self, committed_at_ms: int, subscribers: int) -> None:
        """A table event went to `subscribers` clients; it was committed at its `ts` (ms,
        the store's clock), so the latency has a 1 ms resolution."""
        if subscribers:  # no subscriber, no write: nothing to time
            self.message_out("event", subscribers)
            self.fanout_latency.observe(max(0.0, time.time() - committed_at_ms / 1000))

    def bet_took(self, seconds: float) -> None:
        """One bet handled, from its frame's decoding to its answer."""
        self.bet_latency.observe(seconds)

    def bet_answered(self, result: str) -> None:
        self.bets.add(result)

    def slow_client_dropped(self) -> None:
        self.slow_clients_dropped.inc()

    def rate_limit_hit(self, kind: str) -> None:
        """A message refused by a per-connection rate limit (RATE_LIMITED)."""
        self.rate_limited.labels(kind).inc()

    def operator_request(self, action: str, status: int) -> None:
        """An operator API request answered (a 200 credit moved money or replayed a key)."""
        self.operator_requests.labels(action, str(status)).inc()

    # --- runtime and store ----------------------------------------------------------------
    def round_settled(self, outcome: str) -> None:
        self.rounds.labels(outcome).inc()

    def round_voided(self) -> None:
        self.rounds_voided.inc()

    def lease_acquired(self, table: str) -> None:
        self.lease_acquisitions.labels(table).inc()

    def lease_lost(self, table: str) -> None:
        self.lease_losses.labels(table).inc()

    def store_error(self, component: str) -> None:
        self.store_errors.labels(component).inc()

    def gc_paused(self, generation: int, seconds: float) -> None:
        """One collection of `generation` stopped the process for `seconds` (a gc hook)."""
        child = self._gc.get(generation)
        if child is None:
            child = self._gc[generation] = self.gc_pauses.labels(str(generation))
        child.observe(seconds)

    # --- the operator's wallet ------------------------------------------------------------
    def wallet_call(self, call: str, status: str, seconds: float) -> None:
        """One call to the wallet answered (a status) or not (the reason)."""
        self.wallet_calls.labels(call, status).inc()
        self.wallet_latency.labels(call).observe(seconds)

    def outbox_seen(self, depth: int, oldest_s: float, parked: int) -> None:
        self.outbox_depth.set(depth)
        self.outbox_oldest.set(oldest_s)
        self.outbox_parked_now.set(parked)

    def outbox_parked(self, call: str) -> None:
        self.outbox_parks.labels(call).inc()

    def families(self) -> Iterable[str]:
        """Names of the families this node exports (without _total and such suffixes)."""
        return [metric.name for metric in self.registry.collect()]
