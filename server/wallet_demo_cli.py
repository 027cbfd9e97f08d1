"""The options of `baccarat wallet-demo`, the reference operator wallet (server/wallet/demo.py,
docs/wallet.md): kept apart from the wallet itself so that `baccarat --help` loads neither
aiohttp's server nor sqlite."""

from __future__ import annotations

import argparse
import os

__all__ = ["WALLET_DEMO_BALANCE", "WALLET_DEMO_PORT", "add_wallet_demo_arguments"]

WALLET_DEMO_PORT = 8780
WALLET_DEMO_BALANCE = 1_000_000  # server.wallet.demo.DEFAULT_INITIAL_BALANCE


def add_wallet_demo_arguments(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("--host", default="127.0.0.1", help="address to listen on (127.0.0.1)")
    parser.add_argument(
        "--port",
        type=int,
        default=WALLET_DEMO_PORT,
        help=f"port to listen on, 0 picks a free one ({WALLET_DEMO_PORT})",
    )
    parser.add_argument(
        "--secret",
        default=os.environ.get("BACCARAT_WALLET_SECRET") or None,
        help="the shared wallet secret (at least 32 bytes) or a file holding it "
        "(default: $BACCARAT_WALLET_SECRET)",
    )
    parser.add_argument(
        "--db",
        default="wallet-demo.sqlite3",
        metavar="FILE",
        help="the SQLite file of the books, made if missing (wallet-demo.sqlite3)",
    )
    parser.add_argument(
        "--initial-balance",
        type=int,
        default=WALLET_DEMO_BALANCE,
        help=f"minor units a player not seen before starts with ({WALLET_DEMO_BALANCE})",
    )
    parser.add_argument("--currency", default="EUR", help="the ISO 4217 code it keeps (EUR)")
    parser.add_argument(
        "--fault-rate",
        type=float,
        default=0.0,
        help="for tests: the share of calls, 0 to 1, that time out, answer 500, answer late, "
        "drop the connection after booking or answer badly signed (0)",
    )
    parser.add_argument("--fault-seed", type=int, default=None, help="for tests: seeds the faults")
    parser.add_argument(
        "--fault-late",
        type=float,
        default=5.0,
        metavar="SECONDS",
        help="for tests: how late a late answer comes, and how long a timeout hangs (5)",
    )
