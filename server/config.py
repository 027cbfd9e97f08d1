"""Server settings: command-line options, each with an environment variable behind it.

Precedence: an option on the command line, then BACCARAT_* in the environment, then the
default. No setting is required: with none, `baccarat serve` runs the in-memory engine.

Options are flat (`--rate-bets`, BACCARAT_RATE_BETS); Settings keeps the ones a part of the
server takes together in a nested group that the part takes as it is: `timings` (the table
loops' Timings), `limits` (each connection's RateLimits), `auth` (who may connect), `admin`
(the admin listener) and `wallet` (where players' money lives). OPTIONS says where each
option lives.
"""

from __future__ import annotations

import argparse
import math
import os
import secrets
import socket
from dataclasses import dataclass, field, fields
from pathlib import Path
from typing import Any
from urllib.parse import parse_qsl, unquote, urlsplit

from server.auth import DEFAULT_GUEST_TTL_S, MAX_TTL_S, AuthPolicy, load_secret
from server.config_help import HELP as _HELP
from server.runtime.table_loop import Timings
from server.transport.limits import RateLimits
from server.wallet import protocol as wallet_protocol

__all__ = [
    "DEMO_BALANCE",
    "OPTIONS",
    "AdminListener",
    "AuthSettings",
    "Option",
    "Settings",
    "WalletSettings",
    "add_serve_arguments",
]

DEMO_BALANCE = 1_000_000  # minor units a player starts with in demo mode

_REPO_CLIENT = Path(__file__).resolve().parent.parent / "client_demo"


@dataclass(frozen=True, slots=True)
class AuthSettings:
    """Who may connect: the token secret and the guest and spectator switches."""

    secret: str = ""  # the shared token secret, or a file holding it; empty: demo mode
    allow_guests: bool = False  # with a secret: may a connection without a token be a guest?
    allow_anonymous_spectators: bool | None = None  # None: on in demo mode, off with a secret
    guest_ttl: int = DEFAULT_GUEST_TTL_S  # seconds a guest stays after its last connection

    @property
    def demo(self) -> bool:
        """No secret configured: guests play at once with the demo balance."""
        return not self.secret.strip()

    def policy(self, demo_secret: str | None = None) -> AuthPolicy:
        """Who may connect, from the secret and the guest and spectator switches. In demo mode
        the secret is `demo_secret` or this policy's own random one: build it once per node."""
        return AuthPolicy.configure(
            load_secret(self.secret),
            allow_guests=self.allow_guests,
            allow_anonymous_spectators=self.allow_anonymous_spectators,
            guest_ttl_s=self.guest_ttl,
            demo_secret=demo_secret,
        )


@dataclass(frozen=True, slots=True)
class AdminListener:
    """The second listener: /metrics, /status and the operator API (/api/...)."""

    enabled: bool = True  # --no-admin: no second port
    host: str = "127.0.0.1"  # loopback: a scraper or an operator on the host, not the public
    port: int | None = None  # None: the public port + 1 (a free one when that is 0)


@dataclass(frozen=True, slots=True)
class WalletSettings:
    """Where players' money lives: the internal wallet (the store's balances), or the
    operator's seamless wallet over HTTP at `url` (docs/wallet.md)."""

    url: str = ""  # http(s)://host[:port][/path] of the operator's wallet; empty: internal
    secret: str = ""  # the shared secret that signs calls and answers, or a file holding it
    currency: str = "EUR"  # ISO 4217; amounts are integer minor units of it
    timeout: float = 2.0  # seconds a wallet call may take before its outcome is unknown
    retry_hours: float = 24.0  # hours a credit or cancel is retried before it is parked

    @property
    def internal(self) -> bool:
        """No --wallet-url: the store's own balances, as before the operator's wallet."""
        return not self.url

    def check(self) -> None:
        """ValueError naming the option for a bad URL, currency, or a secret that is
        missing (with a URL), short or unreadable."""
        try:
            wallet_protocol.check_currency(self.currency)
        except ValueError as error:
            raise ValueError(f"--currency {error}") from None
        if self.url:
            wallet_protocol.check_wallet_url(self.url)
            if not self.secret.strip():
                raise ValueError("--wallet-url needs --wallet-secret (at least 32 bytes)")
        if self.secret.strip():
            self.secret_bytes()

    def secret_bytes(self) -> bytes | None:
        """The secret's bytes (read from its file if it names one); None when not set."""
        if not self.secret.strip():
            return None
        try:
            return wallet_protocol.load_secret(self.secret.strip())
        except ValueError as error:
            raise ValueError(f"--wallet-secret: {error}") from None


@dataclass(frozen=True, slots=True)
class Settings:
    host: str = "127.0.0.1"
    port: int = 8765
    redis: str = ""  # empty: the in-memory engine
    tables: str = ""  # "id=preset,..." or "preset,..."; empty: one table per preset
    tables_file: str = ""  # a TOML file of tables and their rules, instead of --tables
    timings: Timings = field(default_factory=Timings)
    initial_balance: int | None = None  # None: 1,000,000 in demo mode, 0 with a secret
    node_id: str = ""
    log_format: str = "auto"  # auto (console on a terminal, else JSON), json, console
    log_level: str = "info"
    static_dir: str = str(_REPO_CLIENT)
    max_buffer_bytes: int = 1 << 20
    max_frame_bytes: int = 16 * 1024
    history_events: int = 20_000
    history_rounds: int = 1_000
    max_replay_events: int = 500
    limits: RateLimits = field(default_factory=RateLimits)
    max_connections_per_ip: int = 0
    handshake_timeout: float = 10.0
    allowed_origins: str = ""  # comma-separated; empty: any Origin
    drain_seconds: float = 3.0
    recall_rounds: int = 100  # store.wallet.DEFAULT_RECALL_ROUNDS
    max_bets_per_round: int = 50  # store.base.DEFAULT_MAX_BETS_PER_ROUND
    audit_days: int = 90  # store.audit.DEFAULT_AUDIT_DAYS
    audit_entries: int = 100_000  # store.audit.DEFAULT_AUDIT_ENTRIES
    auth: AuthSettings = field(default_factory=AuthSettings)
    max_connections_per_player: int = 0  # per node; 0: no cap
    workers: int = 1  # processes serving one port (SO_REUSEPORT); more than 1 needs --redis
    admin: AdminListener = field(default_factory=AdminListener)
    wallet: WalletSettings = field(default_factory=WalletSettings)

    def __post_init__(self) -> None:
        if self.log_format not in ("auto", "json", "console"):
            raise ValueError(f"log format must be auto, json or console, not {self.log_format!r}")
        if self.log_level.upper() not in ("DEBUG", "INFO", "WARNING", "ERROR"):
            raise ValueError(f"log level must be debug, info, warning or error: {self.log_level!r}")
        for option in OPTIONS:
            value = self.option(option.name)
            if option.type.startswith("bool") and not isinstance(value, bool | None):
                raise ValueError(
                    f"{option.flag} is yes or no (1/0, true/false, on/off), not {value!r}"
                )
            if isinstance(value, int | float) and not isinstance(value, bool):
                _check_range(option.name, value)
        self.origins()  # raises for a malformed list
        _check_redis_url(self.redis)
        self.auth.policy()  # raises for a short, missing or unreadable secret
        self.wallet.check()

    def option(self, name: str) -> Any:
        """An option's value, by its flat name (as on the command line)."""
        where = _OPTIONS_BY_NAME[name]
        return getattr(getattr(self, where.group) if where.group else self, where.attr)

    @property
    def demo(self) -> bool:
        """No secret configured: guests play at once with the demo balance."""
        return self.auth.demo

    def resolved_initial_balance(self) -> int:
        """What a player seen for the first time starts with."""
        if self.initial_balance is not None:
            return self.initial_balance
        return DEMO_BALANCE if self.demo else 0

    def resolved_admin_port(self) -> int:
        """The admin listener's port: --admin-port, else the public port + 1; 0 (a free one)
        when the public port is 0 too. ValueError when that cannot be a port of its own (checked
        at start, not here: --port 65535 is a good setting as long as the admin port is given)."""
        port = self.admin.port
        if port is None:
            port = self.port + 1 if self.port else 0
        if self.admin.enabled and port > 65535:
            raise ValueError("--admin-port: --port is 65535, so give the admin port yourself")
        if self.admin.enabled and port and port == self.port:
            raise ValueError(f"--admin-port must differ from --port ({port})")
        return port

    def origins(self) -> list[str]:
        """The allowed Origin values; empty means any."""
        origins = [o.strip() for o in self.allowed_origins.split(",") if o.strip()]
        for origin in origins:
            if "://" not in origin or origin.endswith("/"):
                raise ValueError(
                    f"allowed origin {origin!r}: give scheme://host[:port], e.g. https://example.com"
                )
        return origins

    def resolved_node_id(self) -> str:
        return self.node_id or f"{socket.gethostname()}-{os.getpid()}-{secrets.token_hex(2)}"

    @classmethod
    def from_options(cls, **values: Any) -> Settings:
        """Settings from options by their flat names (`betting_window=2`, `rate_bets=5`): the
        ones of a group go to it. A name that is no option is a TypeError, as for the class."""
        own: dict[str, Any] = {}
        grouped: dict[str, dict[str, Any]] = {group: {} for group in _GROUPS}
        for name, value in values.items():
            where = _OPTIONS_BY_NAME.get(name)
            if where is None:
                raise TypeError(f"Settings has no option {name!r}")
            (grouped[where.group] if where.group else own)[where.attr] = value
        return cls(**own, **{group: _GROUPS[group](**kw) for group, kw in grouped.items()})

    @classmethod
    def from_args(cls, args: argparse.Namespace) -> Settings:
        values = {o.name: getattr(args, o.name) for o in OPTIONS if hasattr(args, o.name)}
        return cls.from_options(**{k: v for k, v in values.items() if v is not None})


# The nested groups of Settings: its field -> the group's class.
_GROUPS: dict[str, type[Any]] = {
    "timings": Timings,
    "limits": RateLimits,
    "auth": AuthSettings,
    "admin": AdminListener,
    "wallet": WalletSettings,
}

# The options each group holds: option name (--flag, BACCARAT_NAME) -> the group's field. The
# names are older than the groups and stay as they are; a group's other fields (Timings.retry,
# ...) are no options.
_GROUP_OPTIONS: dict[str, dict[str, str]] = {
    "timings": {
        "betting_window": "betting_window",
        "deal_interval": "deal_interval",
        "close_pause": "close_pause",
        "result_pause": "result_pause",
        "next_round_pause": "next_round_pause",
        "lease_ttl": "lease_ttl",
        "totals_interval": "totals_interval",
    },
    "limits": {
        "rate_bets": "bets",
        "rate_pings": "pings",
        "rate_joins": "joins",
        "rate_replays": "replays",
        "rate_burst": "burst_s",
        "max_refusals": "max_refusals",
    },
    "auth": {
        "secret": "secret",
        "allow_guests": "allow_guests",
        "allow_anonymous_spectators": "allow_anonymous_spectators",
        "guest_ttl": "guest_ttl",
    },
    "admin": {"admin": "enabled", "admin_host": "host", "admin_port": "port"},
    "wallet": {
        "wallet_url": "url",
        "wallet_secret": "secret",
        "currency": "currency",
        "wallet_timeout": "timeout",
        "wallet_retry_hours": "retry_hours",
    },
}


@dataclass(frozen=True, slots=True)
class Option:
    """One setting as the command line and the environment know it."""

    name: str  # --name-with-dashes, BACCARAT_NAME
    group: str | None  # the nested group of Settings holding it; None: Settings itself
    attr: str  # its field there
    type: str  # as annotated: "float", "int | None", ...
    default: Any

    @property
    def flag(self) -> str:
        return "--" + self.name.replace("_", "-")

    @property
    def env(self) -> str:
        return "BACCARAT_" + self.name.upper()


def _options() -> tuple[Option, ...]:
    """Every option, in the order of Settings' fields (a group's options where it sits)."""
    options = []
    for own in fields(Settings):
        if own.name not in _GROUPS:
            options.append(Option(own.name, None, own.name, str(own.type), own.default))
            continue
        group = _GROUPS[own.name]
        defaults = group()
        kinds = {f.name: str(f.type) for f in fields(group)}
        for name, attr in _GROUP_OPTIONS[own.name].items():
            options.append(Option(name, own.name, attr, kinds[attr], getattr(defaults, attr)))
    return tuple(options)


OPTIONS = _options()
_OPTIONS_BY_NAME = {option.name: option for option in OPTIONS}


# Accepted range of each number (inclusive). Seconds become milliseconds (the betting window,
# the lease) so tiny values would round to 0; upper bounds catch a unit mistake or an overflow
# long before it can leave a table dead. A number not listed must be finite and >= 0.
_RANGES: dict[str, tuple[float, float]] = {
    "port": (0, 65535),
    "betting_window": (0.01, 3600),
    "deal_interval": (0, 600),
    "close_pause": (0, 600),
    "result_pause": (0, 600),
    "next_round_pause": (0, 3600),
    "lease_ttl": (0.1, 3600),
    "initial_balance": (0, 10**12),  # sums of balances stay exact integers in Redis's Lua
    "max_buffer_bytes": (1024, 1 << 30),
    "max_frame_bytes": (1024, 1 << 24),
    "history_events": (1, 10_000_000),
    "history_rounds": (1, 1_000_000),
    "max_replay_events": (1, 100_000),
    "rate_bets": (0, 1_000_000),
    "rate_pings": (0, 1_000_000),
    "rate_joins": (0, 1_000_000),
    "rate_replays": (0, 1_000_000),
    "rate_burst": (0, 3600),
    "max_refusals": (0, 1_000_000),
    "max_connections_per_ip": (0, 1_000_000),
    "handshake_timeout": (0.1, 600),
    "drain_seconds": (0, 3600),
    "totals_interval": (0.01, 60),
    "guest_ttl": (1, MAX_TTL_S),
    "max_connections_per_player": (0, 1_000_000),
    "recall_rounds": (10, 1000),  # regulators ask for at least the last 10
    "max_bets_per_round": (1, 1_000_000),
    "audit_days": (1, 36_500),
    "audit_entries": (1, 100_000_000),
    "workers": (1, 64),
    "admin_port": (0, 65535),
    "wallet_timeout": (0.01, 60),
    "wallet_retry_hours": (0.01, 8760),  # up to a year
}


def _number(value: float) -> str:
    return str(int(value)) if float(value).is_integer() else f"{value:g}"


def _check_range(name: str, value: float) -> None:
    """Finite and within the setting's range, or a ValueError naming the option."""
    low, high = _RANGES.get(name, (0, math.inf))
    if math.isfinite(value) and low <= value <= high:
        return
    kind = "a whole number" if isinstance(value, int) else "a finite number"
    span = (
        f"at least {_number(low)}"
        if high == math.inf
        else f"from {_number(low)} to {_number(high)}"
    )
    option = "--" + name.replace("_", "-")
    raise ValueError(f"{option} must be {kind} {span}, not {value!r}")


_REDIS_SCHEMES = ("redis", "rediss", "unix")


def _check_redis_url(url: str) -> None:
    """A --redis URL redis-py reads as we mean it, or a ValueError saying why. redis-py takes
    a database it cannot read as a number (redis://host:6379/abc) for database 0: a node
    would quietly share another site's data. The message never shows the URL's password."""
    if not url:
        return
    parts = urlsplit(url)
    if parts.scheme not in _REDIS_SCHEMES:
        raise ValueError(
            f"--redis must be redis://HOST:PORT/DB, rediss://HOST:PORT/DB or unix://PATH?db=DB, "
            f"not a {parts.scheme or 'scheme-less'} URL"
        )
    databases = [value for key, value in parse_qsl(parts.query) if key == "db"]
    if parts.scheme != "unix" and unquote(parts.path) not in ("", "/"):
        databases.append(unquote(parts.path)[1:])
    for database in databases:
        if not (database.isascii() and database.isdigit()):
            raise ValueError(
                f"--redis: the database must be a whole number (redis://HOST:PORT/0), "
                f"not {database!r}"
            )


def _env(name: str) -> str | None:
    value = os.environ.get(f"BACCARAT_{name.upper()}")
    return value if value not in (None, "") else None


_TRUE = ("1", "true", "yes", "on")
_FALSE = ("0", "false", "no", "off")


def _env_bool(value: str) -> bool | str:
    """A yes/no variable's value; anything else is kept as given, for Settings to refuse
    (so a bad variable is an error of `serve` alone)."""
    if value.lower() in _TRUE:
        return True
    if value.lower() in _FALSE:
        return False
    return value


def add_serve_arguments(parser: argparse.ArgumentParser) -> None:
    """Add one option per setting; its default comes from BACCARAT_<NAME> or the dataclass.
    A yes/no setting is a pair of flags (`--allow-guests` / `--no-allow-guests`)."""
    for option in OPTIONS:
        default = option.default
        env = _env(option.name)
        help_text = f"{_HELP[option.name]} (env {option.env}; default {default!r})"
        if option.type.startswith("bool"):
            value = _env_bool(env) if env is not None else default
            parser.add_argument(
                option.flag,
                dest=option.name,
                action=argparse.BooleanOptionalAction,
                default=value,
                help=help_text,
            )
            continue
        kind: Any = int if option.type.startswith("int") else type(default)
        # A string default goes through `type` too, so a bad BACCARAT_* value is reported
        # as a usage error of `serve` alone, not a crash of every command.
        parser.add_argument(
            option.flag,
            dest=option.name,
            type=kind,
            default=env if env is not None else default,
            help=help_text.replace(f"default {default!r}", f"default {env or default!r}"),
        )
