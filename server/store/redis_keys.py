"""The Redis engine's key layout: one place that names every key and channel it uses.

Every key of one table carries the hash tag `{t:<table>}` and every key of one player
`{p:<player>}`, so each lives in one slot; docs/redis.md has the layout and what each key
holds. The Lua scripts get these names as KEYS (or a table's prefix, for its per-round keys).
"""

from __future__ import annotations

__all__ = ["TABLE_KEYS_CACHED", "KeyLayout", "TableKeys"]

TABLE_KEYS_CACHED = 1024  # tables whose key names are kept made


class TableKeys:
    """One table's keys; all share the hash tag {t:<table>} so they sit in one slot."""

    __slots__ = ("lease", "paused", "prefix", "rounds", "state", "stream")

    def __init__(self, key_prefix: str, table_id: str) -> None:
        self.prefix = f"{key_prefix}:{{t:{table_id}}}:"
        self.state = self.prefix + "state"
        self.stream = self.prefix + "stream"
        self.rounds = self.prefix + "rounds"
        self.lease = self.prefix + "lease"
        self.paused = self.prefix + "paused"

    def per_round(self, kind: str, round_no: int) -> str:
        return f"{self.prefix}{kind}:{round_no}"


class KeyLayout:
    """The keys of one store (one key prefix): the node-wide ones made once, a table's kept
    made (every bet names them), a player's made per call."""

    def __init__(self, key_prefix: str) -> None:
        self.prefix = key_prefix
        self.tables = f"{key_prefix}:tables"  # list: the table ids, in creation order
        self.ledger = f"{key_prefix}:ledger"  # hash: the money counters (Ledger)
        # The guests' expiries (zset, by the store's clock) and their TTLs (hash).
        self.guests = (f"{key_prefix}:guests", f"{key_prefix}:guest_ttl")
        self.settled = f"{key_prefix}:settled"  # pub/sub: a paying commit's notice
        # The wallet outbox (server/store/outbox.py): one hash per entry under `outbox`
        # (`<outbox>e:<key>`), and the zsets of entries by next attempt (or claim's end), by
        # creation (queued ones), and the parked ones by creation.
        self.outbox = f"{key_prefix}:outbox:"
        self.outbox_sets = (self.outbox + "due", self.outbox + "age", self.outbox + "parked")
        self._tables: dict[str, TableKeys] = {}

    def table(self, table_id: str) -> TableKeys:
        keys = self._tables.get(table_id)
        if keys is None:
            if len(self._tables) >= TABLE_KEYS_CACHED:  # ids from callers: keep it bounded
                self._tables.clear()
            keys = self._tables[table_id] = TableKeys(self.prefix, table_id)
        return keys

    def player(self, player: str, kind: str) -> str:
        return f"{self.prefix}:{{p:{player}}}:{kind}"
