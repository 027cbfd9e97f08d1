"""Token buckets and the flood detector, with time passed in (no clock, no event loop)."""

from __future__ import annotations

import pytest

from server.transport.limits import (
    FLOOD_WINDOW_S,
    ConnectionLimits,
    Kind,
    RateLimits,
    TokenBucket,
    Verdict,
)


def test_a_bucket_allows_its_burst_then_its_rate() -> None:
    """A full bucket passes `capacity` at once, then one token per 1/rate seconds."""
    bucket = TokenBucket(rate=2.0, capacity=3.0, now=100.0)
    assert [bucket.take(100.0) for _ in range(4)] == [True, True, True, False]
    assert not bucket.take(100.4)  # 0.8 of a token
    assert bucket.take(100.5)
    assert not bucket.take(100.5)


def test_a_bucket_never_holds_more_than_its_capacity() -> None:
    """A long silence refills the bucket to capacity, not beyond."""
    bucket = TokenBucket(rate=10.0, capacity=2.0, now=0.0)
    assert bucket.take(0.0) and bucket.take(0.0)
    assert [bucket.take(3600.0) for _ in range(3)] == [True, True, False]


def test_a_clock_going_back_adds_no_tokens() -> None:
    """Time that runs backwards refills nothing."""
    bucket = TokenBucket(rate=1.0, capacity=1.0, now=50.0)
    assert bucket.take(50.0)
    assert not bucket.take(10.0)


def test_each_kind_has_its_own_bucket() -> None:
    """Using up the pings leaves bets, joins and replays untouched."""
    limits = ConnectionLimits(RateLimits(pings=1.0, burst_s=2.0))
    assert [limits.check(Kind.PINGS, 0.0) for _ in range(3)] == [
        Verdict.ALLOWED,
        Verdict.ALLOWED,
        Verdict.REFUSED,
    ]
    for kind in (Kind.BETS, Kind.JOINS, Kind.REPLAYS):
        assert limits.check(kind, 0.0) is Verdict.ALLOWED


def test_a_rate_of_zero_is_unlimited() -> None:
    """rate 0 switches a kind's limit off."""
    limits = ConnectionLimits(RateLimits(bets=0))
    assert all(limits.check(Kind.BETS, 0.0) is Verdict.ALLOWED for _ in range(10_000))


@pytest.mark.parametrize(("rate", "burst_s", "capacity"), [(0.1, 2.0, 1), (5.0, 0.0, 1)])
def test_a_bucket_holds_at_least_one_token(rate: float, burst_s: float, capacity: int) -> None:
    """However small rate x burst, one request can always pass after a silence."""
    limits = ConnectionLimits(RateLimits(joins=rate, burst_s=burst_s))
    verdicts = [limits.check(Kind.JOINS, 0.0) for _ in range(capacity + 1)]
    assert verdicts == [Verdict.ALLOWED] * capacity + [Verdict.REFUSED]


def test_more_refusals_than_allowed_in_the_window_is_flooding() -> None:
    """max_refusals refusals pass as REFUSED; one more within the window is FLOODING."""
    limits = ConnectionLimits(RateLimits(max_refusals=5))
    assert [limits.refuse(1.0) for _ in range(5)] == [Verdict.REFUSED] * 5
    assert limits.refuse(1.0) is Verdict.FLOODING


def test_refusals_spread_over_time_are_forgiven() -> None:
    """The refusals bucket refills over FLOOD_WINDOW_S: a slow trickle is never flooding."""
    limits = ConnectionLimits(RateLimits(max_refusals=5))
    step = FLOOD_WINDOW_S / 5
    assert all(limits.refuse(i * step) is Verdict.REFUSED for i in range(100))


def test_rate_limited_requests_count_as_refusals() -> None:
    """A request over its rate is a refusal: a client that keeps pushing is flooding."""
    limits = ConnectionLimits(RateLimits(pings=1.0, burst_s=1.0, max_refusals=3))
    verdicts = [limits.check(Kind.PINGS, 0.0) for _ in range(5)]
    assert verdicts == [Verdict.ALLOWED] + [Verdict.REFUSED] * 3 + [Verdict.FLOODING]


def test_max_refusals_zero_never_closes() -> None:
    """max_refusals 0: refusals are answered but never close the connection."""
    limits = ConnectionLimits(RateLimits(pings=1.0, max_refusals=0))
    assert all(limits.check(Kind.PINGS, 0.0) is not Verdict.FLOODING for _ in range(1000))
