"""Server settings: command-line options, each with an environment variable behind it.

Precedence: an option on the command line, then BACCARAT_* in the environment, then the
default. No setting is required: with none, `baccarat serve` runs the in-memory engine.
"""

from __future__ import annotations

import argparse
import os
import secrets
import socket
from dataclasses import dataclass, fields
from pathlib import Path

__all__ = ["Settings", "add_serve_arguments"]

_REPO_CLIENT = Path(__file__).resolve().parent.parent / "client_demo"


@dataclass(frozen=True, slots=True)
class Settings:
    host: str = "127.0.0.1"
    port: int = 8765
    redis: str = ""  # empty: the in-memory engine
    tables: str = ""  # "id=preset,..." or "preset,..."; empty: one table per preset
    tables_file: str = ""  # a TOML file of tables and their rules, instead of --tables
    betting_window: float = 15.0
    deal_interval: float = 1.0
    close_pause: float = 1.0
    result_pause: float = 1.0
    next_round_pause: float = 3.0
    lease_ttl: float = 3.0
    demo_balance: int = 1_000_000
    node_id: str = ""
    log_format: str = "auto"  # auto (console on a terminal, else JSON), json, console
    log_level: str = "info"
    static_dir: str = str(_REPO_CLIENT)
    max_buffer_bytes: int = 1 << 20
    max_frame_bytes: int = 16 * 1024
    history_events: int = 20_000
    history_rounds: int = 1_000

    def __post_init__(self) -> None:
        if self.log_format not in ("auto", "json", "console"):
            raise ValueError(f"log format must be auto, json or console, not {self.log_format!r}")
        if self.log_level.upper() not in ("DEBUG", "INFO", "WARNING", "ERROR"):
            raise ValueError(f"log level must be debug, info, warning or error: {self.log_level!r}")
        if self.betting_window <= 0 or self.lease_ttl <= 0:
            raise ValueError("betting window and lease ttl must be positive")
        if min(self.deal_interval, self.close_pause, self.result_pause, self.next_round_pause) < 0:
            raise ValueError("pauses cannot be negative")
        if self.demo_balance < 0:
            raise ValueError("demo balance cannot be negative")
        if not 0 <= self.port <= 65535:
            raise ValueError(f"port must be 0-65535, not {self.port}")
        if self.max_buffer_bytes < 1024 or self.max_frame_bytes < 1024:
            raise ValueError("max buffer and max frame sizes must be at least 1024 bytes")
        if self.history_events < 1 or self.history_rounds < 1:
            raise ValueError("history sizes must be at least 1")

    def resolved_node_id(self) -> str:
        return self.node_id or f"{socket.gethostname()}-{os.getpid()}-{secrets.token_hex(2)}"

    @classmethod
    def from_args(cls, args: argparse.Namespace) -> Settings:
        values = {f.name: getattr(args, f.name) for f in fields(cls) if hasattr(args, f.name)}
        return cls(**{k: v for k, v in values.items() if v is not None})


_HELP = {
    "host": "address to listen on",
    "port": "port to listen on (0 picks a free one)",
    "redis": "redis://HOST:PORT/DB: run on the Redis engine (several nodes share tables)",
    "tables": "tables to run: 'id=preset,...' or 'preset,...' (default: one per preset)",
    "tables_file": "TOML file of tables and their rules (instead of --tables)",
    "betting_window": "seconds the betting window stays open",
    "deal_interval": "seconds between two cards",
    "close_pause": "seconds from betting closed to the first card",
    "result_pause": "seconds from the last card to settlement",
    "next_round_pause": "seconds from settlement to the next round",
    "lease_ttl": "seconds a silent owner keeps a table before another node takes it",
    "demo_balance": "balance of each guest player, in minor units",
    "node_id": "this node's name in leases and /status (default: host-pid-random)",
    "log_format": "auto, json or console",
    "log_level": "debug, info, warning or error",
    "static_dir": "folder served at / (the demo client)",
    "max_buffer_bytes": "a client whose unsent data passes this is disconnected",
    "max_frame_bytes": "largest frame a client may send (bigger closes with 1009)",
    "history_events": "events kept per table for reconnect catch-up",
    "history_rounds": "rounds kept per table for replay",
}


def _env(name: str) -> str | None:
    value = os.environ.get(f"BACCARAT_{name.upper()}")
    return value if value not in (None, "") else None


def add_serve_arguments(parser: argparse.ArgumentParser) -> None:
    """Add one option per setting; its default comes from BACCARAT_<NAME> or the dataclass."""
    defaults = Settings()
    for f in fields(Settings):
        default = getattr(defaults, f.name)
        kind = type(default)
        env = _env(f.name)
        # A string default goes through `type` too, so a bad BACCARAT_* value is reported
        # as a usage error of `serve` alone, not a crash of every command.
        value = env if env is not None else default
        parser.add_argument(
            "--" + f.name.replace("_", "-"),
            dest=f.name,
            type=kind,
            default=value,
            help=f"{_HELP[f.name]} (env BACCARAT_{f.name.upper()}; default {value!r})",
        )
