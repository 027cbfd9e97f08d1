"""Per-connection rate limits: one token bucket per kind of request, and a flood detector.

A bucket refills at `rate` tokens a second and holds `burst` seconds' worth (at least one
token), so a client may send a short burst, then its steady rate. Each refusal (a message over
its rate, or one refused at parsing) also takes a token from a refusals bucket that holds
`max_refusals` and refills over FLOOD_WINDOW_S: a client refused more often than that keeps
flooding and is closed (1008). Time is passed in, so the arithmetic is tested without a clock.
"""

from __future__ import annotations

from dataclasses import dataclass
from enum import Enum, StrEnum

__all__ = ["FLOOD_WINDOW_S", "ConnectionLimits", "Kind", "RateLimits", "TokenBucket", "Verdict"]

FLOOD_WINDOW_S = 10.0


class Kind(StrEnum):
    """The kinds of request limited separately; `leave` counts as a join."""

    BETS = "bets"
    PINGS = "pings"
    JOINS = "joins"
    REPLAYS = "replays"


class Verdict(Enum):
    ALLOWED = "allowed"
    REFUSED = "refused"  # answer RATE_LIMITED (or the refusal already made) and go on
    FLOODING = "flooding"  # too many refusals: close the connection with 1008


@dataclass(frozen=True, slots=True)
class RateLimits:
    """Requests per second for each kind (0 = unlimited), the burst in seconds, and how many
    refusals within FLOOD_WINDOW_S a connection may collect (0 = never closed for it)."""

    bets: float = 50.0
    pings: float = 20.0
    joins: float = 10.0
    replays: float = 10.0
    burst_s: float = 2.0
    max_refusals: int = 100

    def rate(self, kind: Kind) -> float:
        rate: float = getattr(self, kind.value)
        return rate


class TokenBucket:
    __slots__ = ("capacity", "rate", "stamp", "tokens")

    def __init__(self, rate: float, capacity: float, now: float) -> None:
        self.rate = rate
        self.capacity = capacity
        self.tokens = capacity  # a new connection may burst at once
        self.stamp = now

    def take(self, now: float) -> bool:
        """Take one token if there is one (after refilling for the time since last asked)."""
        elapsed = max(0.0, now - self.stamp)  # a clock never runs back here, but be safe
        self.tokens = min(self.capacity, self.tokens + elapsed * self.rate)
        self.stamp = now
        if self.tokens >= 1.0:
            self.tokens -= 1.0
            return True
        return False


class ConnectionLimits:
    """One connection's buckets: `check` a request of a kind, `refuse` any other refusal.

    A bucket is made when its kind is first asked for: a new bucket is full, and so is one
    never used since the connection opened, so that is the same, and an idle connection holds
    none."""

    __slots__ = ("buckets", "limits", "refusals")

    def __init__(self, limits: RateLimits) -> None:
        self.limits = limits  # shared by every connection of the node
        self.buckets: dict[Kind, TokenBucket] | None = None
        self.refusals: TokenBucket | None = None

    def check(self, kind: Kind, now: float) -> Verdict:
        buckets = self.buckets
        bucket = None if buckets is None else buckets.get(kind)
        if bucket is None:
            rate = self.limits.rate(kind)
            if rate <= 0:
                return Verdict.ALLOWED
            bucket = TokenBucket(rate, max(1.0, rate * self.limits.burst_s), now)
            if buckets is None:
                buckets = self.buckets = {}
            buckets[kind] = bucket
        if bucket.take(now):
            return Verdict.ALLOWED
        return self.refuse(now)

    def refuse(self, now: float) -> Verdict:
        """Count one refusal; FLOODING once more than max_refusals fall in the window."""
        if self.limits.max_refusals <= 0:
            return Verdict.REFUSED
        if self.refusals is None:
            count = float(self.limits.max_refusals)
            self.refusals = TokenBucket(count / FLOOD_WINDOW_S, count, now)
        if self.refusals.take(now):
            return Verdict.REFUSED
        return Verdict.FLOODING
