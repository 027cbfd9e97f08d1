"""The live progress of a bot run: a rich table on a terminal, a plain line otherwise."""

from __future__ import annotations

import sys
from dataclasses import dataclass
from typing import TextIO

from rich.console import Console
from rich.live import Live
from rich.table import Table

__all__ = ["Progress", "Tick"]


@dataclass(frozen=True, slots=True)
class Tick:
    """What one interval of a run looks like."""

    elapsed_s: float
    connected: int
    total: int
    rounds_checked: int
    bets_accepted: int
    bets_per_s: float
    event_p99_ms: float
    ack_p99_ms: float
    mismatches: int
    gaps: int
    duplicates: int
    disconnects: int

    def line(self) -> str:
        return (
            f"bots {self.elapsed_s:6.1f}s connected {self.connected}/{self.total} "
            f"rounds {self.rounds_checked} bets {self.bets_accepted} ({self.bets_per_s:.0f}/s) "
            f"p99 event {self.event_p99_ms:.1f} ms ack {self.ack_p99_ms:.1f} ms "
            f"problems {self.mismatches} mismatch {self.gaps} gap {self.duplicates} dup "
            f"disconnects {self.disconnects}"
        )

    def table(self) -> Table:
        table = Table(title="baccarat bots", show_header=False, min_width=48)
        problems = self.mismatches + self.gaps + self.duplicates
        style = "bold red" if problems else "green"
        rows = [
            ("elapsed", f"{self.elapsed_s:.1f} s"),
            ("connected", f"{self.connected} / {self.total}"),
            ("rounds checked", f"{self.rounds_checked}"),
            ("bets accepted", f"{self.bets_accepted}  ({self.bets_per_s:.0f}/s)"),
            ("p99 event latency", f"{self.event_p99_ms:.2f} ms"),
            ("p99 bet ack", f"{self.ack_p99_ms:.2f} ms"),
            (
                "problems",
                f"[{style}]{self.mismatches} mismatches, {self.gaps} gaps, "
                f"{self.duplicates} duplicates[/]",
            ),
            ("disconnects", f"{self.disconnects}"),
        ]
        for name, value in rows:
            table.add_row(name, value)
        return table


class Progress:
    """`show(tick)` every interval; rich Live when the stream is a terminal."""

    def __init__(self, stream: TextIO | None = None, enabled: bool = True) -> None:
        self.stream = stream or sys.stderr
        self.enabled = enabled
        self.live: Live | None = None
        if enabled and self.stream.isatty():
            self.live = Live(console=Console(file=self.stream), auto_refresh=False)
            self.live.start()

    def show(self, tick: Tick) -> None:
        if not self.enabled:
            return
        if self.live is not None:
            self.live.update(tick.table(), refresh=True)
        else:
            print(tick.line(), file=self.stream, flush=True)

    def close(self) -> None:
        if self.live is not None:
            self.live.stop()
            self.live = None
