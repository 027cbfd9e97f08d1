"""What every session on a node shares: the store, the hub, the tables, limits and policy.

The protocol's units (server/transport/protocol.py and the modules it delegates to) take it
as their one dependency on the node.
"""

from __future__ import annotations

from collections import Counter
from dataclasses import dataclass, field
from typing import Any

from server.auth import AuthPolicy
from server.core.rules import TableRules
from server.metrics import Metrics
from server.store.base import Store
from server.transport.hub import Hub
from server.transport.limits import RateLimits
from server.transport.turn_writes import TurnWrites
from server.transport.wallet_bets import WalletLink
from server.wire.messages import ErrorCode, ErrorReply

__all__ = ["SessionContext"]


@dataclass(slots=True)
class SessionContext:
    """What every session on this node shares."""

    store: Store
    hub: Hub
    tables: dict[str, TableRules]
    node_id: str
    initial_balance: int = 1_000_000  # what a player seen for the first time starts with
    max_buffer_bytes: int = 1 << 20  # a client this far behind is dropped, not waited for
    limits: RateLimits = field(default_factory=RateLimits)
    max_replay_events: int = 500  # events in one replay answer; the client pages on
    metrics: Metrics = field(default_factory=Metrics)
    # Who may connect, and how long a guest's wallet lives after it was last seen.
    auth: AuthPolicy = field(default_factory=lambda: AuthPolicy.configure(None))
    max_connections_per_player: int = 0  # per node; 0: no cap
    sessions: set[Any] = field(default_factory=set)  # the transport's live sessions
    # The guests connected to this node, with their number of connections: each is kept
    # alive while it has one (keep_connected_guests), and its TTL runs from its last close.
    guests: Counter[str] = field(default_factory=Counter)
    # Failures (bugs) already logged with a traceback: later ones get one line each, so a
    # client repeating the frame that triggers a bug cannot fill the log.
    failures_logged: set[str] = field(default_factory=set)
    # The operator's wallet (docs/wallet.md); None: the internal wallet, the store's balances.
    wallet: WalletLink | None = None
    # Direct answers framed at once, written to their sockets at the end of the loop's turn.
    turn_writes: TurnWrites = field(default_factory=TurnWrites)

    @property
    def guest_ttl_ms(self) -> int:
        return self.auth.guest_ttl_s * 1000

    def known_table(self, table_id: str) -> None:
        """Refuse a table this node does not have (UNKNOWN_TABLE)."""
        if table_id not in self.tables:
            raise ErrorReply(ErrorCode.UNKNOWN_TABLE, f"no table {table_id!r}")
