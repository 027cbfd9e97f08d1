"""Faults the reference wallet (server/wallet/demo.py) injects for tests: chosen attempts of a
call time out, answer 500, answer late, drop the connection after booking, or answer with a
bad signature (docs/wallet.md, "The reference wallet").

The reference wallet is not the server: like the bots it stands for something outside it (an
operator's wallet that answers late), so its faults wait in wall-clock time.
"""

from __future__ import annotations

import asyncio
import random
from collections import Counter, deque
from dataclasses import dataclass, field
from enum import StrEnum

from server.wallet.protocol import Call

__all__ = ["Fault", "Faults", "suffer"]


class Fault(StrEnum):
    """What an attempt of a call suffers. Each but ERROR books the call first, so the
    wallet has moved the money while the server cannot know it."""

    TIMEOUT = "timeout"  # books, then does not answer for `hang_s`
    ERROR = "error"  # answers HTTP 500 before booking anything
    LATE = "late"  # books, then answers after `late_s`
    DROP = "drop"  # books, then closes the connection without an answer
    BAD_SIGNATURE = "bad_signature"  # books, then answers signed with a wrong signature


@dataclass
class Faults:
    """Which attempts of which calls go wrong. `plan(call, ...)` lists, attempt by attempt,
    the faults of the next attempts of a call (of one transaction id, or balance's player,
    with `key`; of any, without); None in a plan is an attempt that goes right. When no plan
    has an entry left, an attempt goes wrong with probability `rate`, with one of `kinds`."""

    rate: float = 0.0
    kinds: tuple[Fault, ...] = tuple(Fault)
    late_s: float = 5.0
    hang_s: float = 3600.0
    seed: int | None = None
    attempts: Counter[tuple[Call, str]] = field(default_factory=Counter)
    injected: list[tuple[Call, str, Fault]] = field(default_factory=list)
    _plans: dict[tuple[Call, str | None], deque[Fault | None]] = field(default_factory=dict)
    _random: random.Random = field(init=False)

    def __post_init__(self) -> None:
        if not 0 <= self.rate <= 1:
            raise ValueError(f"the fault rate must be from 0 to 1, not {self.rate!r}")
        self._random = random.Random(self.seed)

    def plan(self, call: Call, *faults: Fault | None, key: str | None = None) -> None:
        self._plans.setdefault((call, key), deque()).extend(faults)

    def pick(self, call: Call, key: str) -> Fault | None:
        """The fault of this attempt (counted in `attempts`), or None."""
        self.attempts[(call, key)] += 1
        fault: Fault | None
        for plan_key in ((call, key), (call, None)):
            plan = self._plans.get(plan_key)
            if plan:
                fault = plan.popleft()
                break
        else:
            roll = self.rate and self._random.random() < self.rate
            fault = self._random.choice(self.kinds) if roll else None
        if fault is not None:
            self.injected.append((call, key, fault))
        return fault


async def suffer(
    fault: Fault | None, faults: Faults, transport: asyncio.Transport | None
) -> None:
    """What a booked call's answer suffers: a hang, a delay, or a dropped connection (the
    others, ERROR and BAD_SIGNATURE, are in the answer itself)."""
    if fault is Fault.TIMEOUT:
        await asyncio.sleep(faults.hang_s)
    elif fault is Fault.LATE:
        await asyncio.sleep(faults.late_s)
    elif fault is Fault.DROP:
        if transport is not None:
            transport.abort()
        raise asyncio.CancelledError  # the connection is gone: nothing more to write
