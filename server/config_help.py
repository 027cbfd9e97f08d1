"""The help text of every option of `baccarat serve`, by its flat name (server.config.OPTIONS):
what `--help` prints and docs/configuration.md's table shows (tests/test_docs_config.py
holds the two together)."""

__all__ = ["HELP"]

HELP = {
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
    "initial_balance": "minor units a player seen for the first time starts with "
    "(default: 1000000 in demo mode, 0 with a secret)",
    "node_id": "this node's name in leases and /status (default: host-pid-random)",
    "log_format": "auto, json or console",
    "log_level": "debug, info, warning or error",
    "static_dir": "folder served at / (the demo client)",
    "max_buffer_bytes": "a client whose unsent data passes this is disconnected",
    "max_frame_bytes": "largest frame a client may send (bigger closes with 1009)",
    "history_events": "events kept per table for reconnect catch-up",
    "history_rounds": "rounds kept per table for replay",
    "totals_interval": "at most this often (seconds) a table shows its bet totals while betting",
    "max_replay_events": "most events in one replay answer (the client pages on with 'after')",
    "rate_bets": "bets per second per connection (0: no limit)",
    "rate_pings": "pings per second per connection (0: no limit)",
    "rate_joins": "joins and leaves per second per connection (0: no limit)",
    "rate_replays": "replays per second per connection (0: no limit)",
    "rate_burst": "seconds of each rate a connection may send at once",
    "max_refusals": "refusals in 10 s after which a connection is closed with 1008 (0: never)",
    "max_connections_per_ip": "open connections per client address (0: no cap); more get 429",
    "handshake_timeout": "seconds a client has to complete the WebSocket handshake",
    "allowed_origins": "comma-separated Origin values browsers may connect from (empty: any)",
    "drain_seconds": "on SIGTERM, seconds /readyz answers 503 before connections close",
    "recall_rounds": "rounds each player can look back at (history), 10-1000",
    "max_bets_per_round": "bets a player may have accepted in one round of a table; more get "
    "bet_rejected TOO_MANY_BETS",
    "audit_days": "days each player's audit log keeps an entry of a money movement",
    "audit_entries": "most entries each player's audit log keeps (the oldest go first)",
    "secret": "shared secret that signs tokens, or a file holding it (empty: demo mode)",
    "allow_guests": "with a secret, a connection without a token gets a guest player",
    "allow_anonymous_spectators": "a connection without a token may watch (default: on in demo "
    "mode, off with a secret)",
    "guest_ttl": "seconds a guest player (and its money) is kept after its last connection closed",
    "max_connections_per_player": "open connections per player on this node (0: no cap); "
    "more get 429",
    "workers": "processes sharing the port (SO_REUSEPORT), 1-64; more than 1 needs --redis",
    "admin": "serve /metrics, /status and /api/... on the admin listener (--no-admin: none)",
    "admin_host": "address the admin listener binds (keep it off the public network)",
    "admin_port": "port of the admin listener (default: --port + 1; 0 picks a free one)",
    "wallet_url": "http(s)://HOST[:PORT][/PATH] of the operator's seamless wallet "
    "(docs/wallet.md); empty: the internal wallet",
    "wallet_secret": "shared secret that signs wallet calls and answers (at least 32 bytes), "
    "or a file holding it",
    "currency": "ISO 4217 code of the players' money; amounts are integer minor units of it",
    "wallet_timeout": "seconds a wallet call may take; a call without an answer by then has "
    "an unknown outcome",
    "wallet_retry_hours": "hours a credit or cancel is retried, backing off from 1 s to "
    "5 min, before it is parked and reported",
}
