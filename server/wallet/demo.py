"""The reference wallet: `baccarat wallet-demo`, the operator's side of docs/wallet.md.

It serves the four calls from a SQLite file (durable: WAL, synchronous FULL, one transaction
per call), idempotent by transaction id (a repeated call gets its first answer again, byte for
byte, and moves nothing; the same id with other data is refused 409), and signs every answer.
A request that is badly signed, or whose timestamp is more than 30 s off, is answered 401 and
books nothing. Players it has not seen start with --initial-balance.

Its own rules, beyond the protocol's (docs/wallet.md, "The reference wallet"):

- A credit must list at least one debit, and each must be a standing debit (booked, not
  cancelled, not in another credit) of the same player, table and round; a second credit for
  the same player and round is refused. Refused with HTTP 409 and an error code
  (ROUND_CREDITED, DEBIT_NOT_STANDING), nothing moved. A standing debit a credit leaves out
  stays standing: only a cancel closes it.
- A cancel of a debit already in a credit is refused 409 (DEBIT_CREDITED): once credited a
  debit cannot be undone.
- Transaction ids must be the server's deterministic ones (400 BAD_TRANSACTION_ID): a check
  that catches a bug of the server; an operator's wallet treats ids as opaque strings.

For tests, `Faults` makes chosen attempts of a call time out, answer 500, answer late, drop the
connection after booking, or answer with a bad signature (docs/wallet.md, "Faults").
"""

from __future__ import annotations

import argparse
import asyncio
import contextlib
import json
import signal
import sqlite3
import sys
import time
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from http import HTTPStatus
from pathlib import Path
from typing import Any, Final

from aiohttp import web

from server.wallet.faults import Fault, Faults, suffer
from server.wallet.protocol import (
    AnswerBody,
    BadRequest,
    BadSignature,
    Call,
    CancelRequest,
    CreditRequest,
    DebitRequest,
    ErrorBody,
    Request,
    Status,
    check_currency,
    check_signature,
    credit_id,
    debit_id,
    encode,
    load_secret,
    parse_request,
    sign,
    signed_headers,
)

__all__ = [
    "DEFAULT_INITIAL_BALANCE",
    "Book",
    "DebitRecord",
    "Fault",
    "Faults",
    "run_from_args",
    "start_wallet",
    "wallet_app",
]

DEFAULT_INITIAL_BALANCE = 1_000_000  # minor units, as the server's demo mode
MAX_BODY_BYTES = 64 * 1024

_SCHEMA: Final = """
CREATE TABLE IF NOT EXISTS players (
    player TEXT PRIMARY KEY,
    balance INTEGER NOT NULL,
    blocked INTEGER NOT NULL DEFAULT 0,
    stake_limit INTEGER
);
-- The first answer to each (call, transaction id), and the request it answered.
CREATE TABLE IF NOT EXISTS answers (
    call TEXT NOT NULL,
    transaction_id TEXT NOT NULL,
    request TEXT NOT NULL,
    answer TEXT NOT NULL,
    PRIMARY KEY (call, transaction_id)
);
-- Every debit booked, and every id cancelled before its debit came (booked = 0).
CREATE TABLE IF NOT EXISTS debits (
    transaction_id TEXT PRIMARY KEY,
    player TEXT NOT NULL,
    table_id TEXT NOT NULL,
    round INTEGER NOT NULL,
    amount INTEGER NOT NULL,
    state TEXT NOT NULL CHECK (state IN ('standing', 'cancelled', 'credited')),
    booked INTEGER NOT NULL,
    credit_id TEXT
);
CREATE TABLE IF NOT EXISTS credits (
    transaction_id TEXT PRIMARY KEY,
    player TEXT NOT NULL,
    table_id TEXT NOT NULL,
    round INTEGER NOT NULL,
    amount INTEGER NOT NULL,
    UNIQUE (player, table_id, round)
);
"""


class Refused(Exception):
    """A request the wallet refuses: HTTP `status` with an error code; nothing was booked."""

    def __init__(self, status: HTTPStatus, code: str, message: str) -> None:
        super().__init__(f"{code}: {message}")
        self.status = status
        self.code = code
        self.message = message


@dataclass(frozen=True, slots=True)
class DebitRecord:
    """A debit as the book holds it (for tests and audits)."""

    transaction_id: str
    player: str
    table: str
    round: int
    amount: int
    state: str  # standing, cancelled or credited
    booked: bool  # False: cancelled before the debit came, nothing was ever taken
    credit_id: str | None


class Book:
    """The wallet's books in SQLite: balances, debits, credits and first answers. Each call is
    one transaction (BEGIN IMMEDIATE ... COMMIT): it happens whole or not at all."""

    def __init__(
        self,
        path: str | Path,
        initial_balance: int = DEFAULT_INITIAL_BALANCE,
        currency: str = "EUR",
    ) -> None:
        self.path = str(path)
        self.initial_balance = initial_balance
        self.currency = check_currency(currency)
        self._db = sqlite3.connect(self.path, isolation_level=None, check_same_thread=False)
        self._db.execute("PRAGMA journal_mode=WAL")
        self._db.execute("PRAGMA synchronous=FULL")
        self._db.execute("PRAGMA busy_timeout=5000")
        self._db.executescript(_SCHEMA)

    def close(self) -> None:
        self._db.close()

    @contextlib.contextmanager
    def _transaction(self) -> Iterator[sqlite3.Connection]:
        self._db.execute("BEGIN IMMEDIATE")
        try:
            yield self._db
        except BaseException:
            self._db.execute("ROLLBACK")
            raise
        self._db.execute("COMMIT")

    # --- the calls ------------------------------------------------------------------------

    def handle(self, call: Call, request: Request) -> AnswerBody:
        """Book one call and return its answer (the first one again for a repeated id).
        Refused (nothing booked) for a request that contradicts the books or the currency."""
        if request["currency"] != self.currency:
            raise Refused(
                HTTPStatus.BAD_REQUEST, "BAD_CURRENCY", f"this wallet keeps {self.currency}"
            )
        if call is Call.BALANCE:
            with self._transaction() as db:
                return {"status": Status.OK, "balance": self._player(db, request["player"])[0]}
        transaction_id: str = request["transaction_id"]  # type: ignore[typeddict-item]
        self._check_id(call, request)
        with self._transaction() as db:
            first = db.execute(
                "SELECT request, answer FROM answers WHERE call = ? AND transaction_id = ?",
                (call.value, transaction_id),
            ).fetchone()
            if first is not None:
                if first[0] != _canonical(request):
                    raise Refused(
                        HTTPStatus.CONFLICT,
                        "TRANSACTION_MISMATCH",
                        f"{call} {transaction_id} was sent before with other data",
                    )
                answer: AnswerBody = json.loads(first[1])
                return answer
            if call is Call.DEBIT:
                answer = self._debit(db, request)  # type: ignore[arg-type]
            elif call is Call.CREDIT:
                answer = self._credit(db, request)  # type: ignore[arg-type]
            else:
                answer = self._cancel(db, request)  # type: ignore[arg-type]
            db.execute(
                "INSERT INTO answers (call, transaction_id, request, answer) VALUES (?, ?, ?, ?)",
                (call.value, transaction_id, _canonical(request), json.dumps(answer)),
            )
            return answer

    @staticmethod
    def _check_id(call: Call, request: Request) -> None:
        r: dict[str, Any] = dict(request)
        if call is Call.DEBIT:
            ok = r["transaction_id"] == debit_id(r["table"], r["round"], r["player"], r["bet_id"])
        elif call is Call.CREDIT:
            ok = r["transaction_id"] == credit_id(r["table"], r["round"], r["player"])
        else:
            prefix = debit_id(r["table"], r["round"], r["player"], "")
            ok = r["transaction_id"].startswith(prefix) and r["transaction_id"] != prefix
        if not ok:
            raise Refused(
                HTTPStatus.BAD_REQUEST,
                "BAD_TRANSACTION_ID",
                f"{call}: transaction_id is not the one the server makes for this {call}",
            )

    def _player(self, db: sqlite3.Connection, player: str) -> tuple[int, bool, int | None]:
        """(balance, blocked, stake limit); a player not seen before starts now."""
        row = db.execute(
            "SELECT balance, blocked, stake_limit FROM players WHERE player = ?", (player,)
        ).fetchone()
        if row is None:
            db.execute(
                "INSERT INTO players (player, balance) VALUES (?, ?)",
                (player, self.initial_balance),
            )
            return self.initial_balance, False, None
        return int(row[0]), bool(row[1]), row[2]

    def _move(self, db: sqlite3.Connection, player: str, amount: int) -> int:
        db.execute("UPDATE players SET balance = balance + ? WHERE player = ?", (amount, player))
        return self._player(db, player)[0]

    def _debit(self, db: sqlite3.Connection, request: DebitRequest) -> AnswerBody:
        tx, player, amount = request["transaction_id"], request["player"], request["amount"]
        balance, blocked, limit = self._player(db, player)
        cancelled = db.execute("SELECT 1 FROM debits WHERE transaction_id = ?", (tx,)).fetchone()
        if cancelled is not None:  # a debit's row before its first answer: a cancel's tombstone
            return {"status": Status.CANCELLED, "balance": balance}
        if blocked:
            return {"status": Status.PLAYER_BLOCKED, "balance": balance}
        if limit is not None and amount > limit:
            return {"status": Status.LIMIT_EXCEEDED, "balance": balance}
        if amount > balance:
            return {"status": Status.INSUFFICIENT_FUNDS, "balance": balance}
        db.execute(
            "INSERT INTO debits (transaction_id, player, table_id, round, amount, state, booked)"
            " VALUES (?, ?, ?, ?, ?, 'standing', 1)",
            (tx, player, request["table"], request["round"], amount),
        )
        return {"status": Status.OK, "balance": self._move(db, player, -amount)}

    def _credit(self, db: sqlite3.Connection, request: CreditRequest) -> AnswerBody:
        tx, player = request["transaction_id"], request["player"]
        table, round_no = request["table"], request["round"]
        done = db.execute(
            "SELECT transaction_id FROM credits WHERE player = ? AND table_id = ? AND round = ?",
            (player, table, round_no),
        ).fetchone()
        if done is not None:
            raise Refused(
                HTTPStatus.CONFLICT, "ROUND_CREDITED", f"this round already has {done[0]}"
            )
        for debit in request["debits"]:
            row = db.execute(
                "SELECT player, table_id, round, state FROM debits WHERE transaction_id = ?",
                (debit,),
            ).fetchone()
            if row is None or tuple(row) != (player, table, round_no, "standing"):
                state = "unknown" if row is None else f"{row[3]} ({row[0]}, {row[1]}, {row[2]})"
                raise Refused(
                    HTTPStatus.CONFLICT,
                    "DEBIT_NOT_STANDING",
                    f"{debit} is no standing debit of this player and round: {state}",
                )
        self._player(db, player)
        db.executemany(
            "UPDATE debits SET state = 'credited', credit_id = ? WHERE transaction_id = ?",
            [(tx, debit) for debit in request["debits"]],
        )
        db.execute(
            "INSERT INTO credits (transaction_id, player, table_id, round, amount)"
            " VALUES (?, ?, ?, ?, ?)",
            (tx, player, table, round_no, request["amount"]),
        )
        return {"status": Status.OK, "balance": self._move(db, player, request["amount"])}

    def _cancel(self, db: sqlite3.Connection, request: CancelRequest) -> AnswerBody:
        tx, player, amount = request["transaction_id"], request["player"], request["amount"]
        balance = self._player(db, player)[0]
        row = db.execute(
            "SELECT amount, state FROM debits WHERE transaction_id = ?", (tx,)
        ).fetchone()
        if row is None:  # never booked: nothing moves, and the debit is refused from now on
            db.execute(
                "INSERT INTO debits (transaction_id, player, table_id, round, amount, state,"
                " booked) VALUES (?, ?, ?, ?, ?, 'cancelled', 0)",
                (tx, player, request["table"], request["round"], amount),
            )
            return {"status": Status.OK, "balance": balance}
        if row[0] != amount:
            raise Refused(HTTPStatus.CONFLICT, "TRANSACTION_MISMATCH", f"the debit was of {row[0]}")
        if row[1] == "credited":
            raise Refused(HTTPStatus.CONFLICT, "DEBIT_CREDITED", "the debit is in a credit")
        db.execute("UPDATE debits SET state = 'cancelled' WHERE transaction_id = ?", (tx,))
        return {"status": Status.OK, "balance": self._move(db, player, amount)}

    # --- for tests, audits and the operator of the demo -----------------------------------

    def balance_of(self, player: str) -> int | None:
        row = self._db.execute("SELECT balance FROM players WHERE player = ?", (player,)).fetchone()
        return None if row is None else int(row[0])

    def set_player(
        self, player: str, balance: int, blocked: bool = False, stake_limit: int | None = None
    ) -> None:
        """Set a player's balance, block it (debits PLAYER_BLOCKED) or cap a stake (debits
        above it LIMIT_EXCEEDED)."""
        with self._transaction() as db:
            db.execute(
                "INSERT INTO players (player, balance, blocked, stake_limit) VALUES (?, ?, ?, ?)"
                " ON CONFLICT (player) DO UPDATE SET balance = excluded.balance,"
                " blocked = excluded.blocked, stake_limit = excluded.stake_limit",
                (player, balance, int(blocked), stake_limit),
            )

    def debits(self) -> list[DebitRecord]:
        rows = self._db.execute(
            "SELECT transaction_id, player, table_id, round, amount, state, booked, credit_id"
            " FROM debits ORDER BY rowid"
        ).fetchall()
        return [DebitRecord(r[0], r[1], r[2], r[3], r[4], r[5], bool(r[6]), r[7]) for r in rows]

    def credits(self) -> dict[str, int]:
        """Each credit's transaction id -> its amount."""
        rows = self._db.execute("SELECT transaction_id, amount FROM credits ORDER BY rowid")
        return {row[0]: int(row[1]) for row in rows}


def _canonical(request: Request) -> str:
    return json.dumps(request, sort_keys=True, separators=(",", ":"), ensure_ascii=False)


# --- the HTTP side ---------------------------------------------------------------------------

_BOOK: Final = web.AppKey("book", Book)
_SECRET: Final = web.AppKey("secret", bytes)
_FAULTS: Final = web.AppKey("faults", Faults)
_CLOCK: Final[web.AppKey[Callable[[], float]]] = web.AppKey("clock")


def wallet_app(
    book: Book,
    secret: bytes,
    faults: Faults | None = None,
    clock: Callable[[], float] = time.time,
) -> web.Application:
    """The wallet API at `/{call}` (mount it under a path with add_subapp to serve the API at
    http://host/path/{call}). `clock` is the wallet's (unix seconds), for timestamps."""
    app = web.Application(client_max_size=MAX_BODY_BYTES)
    app[_BOOK] = book
    app[_SECRET] = secret
    app[_FAULTS] = faults or Faults()
    app[_CLOCK] = clock
    app.router.add_post("/{call}", _handle)
    return app


def _respond(
    request: web.Request, status: HTTPStatus, body: AnswerBody | ErrorBody, good: bool = True
) -> web.Response:
    raw = encode(body)
    headers = signed_headers(request.app[_SECRET], raw, request.app[_CLOCK]())
    if not good:  # a signature that does not match (the body signed with one byte more)
        headers["X-Baccarat-Signature"] = sign(
            request.app[_SECRET], headers["X-Baccarat-Timestamp"], raw + b" "
        )
    return web.Response(status=status, body=raw, headers=headers, content_type="application/json")


def _error(request: web.Request, status: HTTPStatus, code: str, message: str) -> web.Response:
    return _respond(request, status, ErrorBody(error=code, message=message))


async def _handle(request: web.Request) -> web.StreamResponse:
    try:
        call = Call(request.match_info["call"])
    except ValueError:
        return _error(request, HTTPStatus.NOT_FOUND, "UNKNOWN_CALL", "no such call")
    raw = await request.read()
    secret, clock = request.app[_SECRET], request.app[_CLOCK]
    try:
        check_signature(
            secret,
            request.headers.get("X-Baccarat-Timestamp"),
            request.headers.get("X-Baccarat-Signature"),
            raw,
            clock(),
        )
    except BadSignature as error:
        return _error(request, HTTPStatus.UNAUTHORIZED, "BAD_SIGNATURE", str(error))
    try:
        body = parse_request(call, raw)
    except BadRequest as error:
        return _error(request, HTTPStatus.BAD_REQUEST, error.code, error.message)
    faults = request.app[_FAULTS]
    key = body["player"] if call is Call.BALANCE else body["transaction_id"]  # type: ignore[typeddict-item]
    fault = faults.pick(call, key)
    if fault is Fault.ERROR:
        return _error(request, HTTPStatus.INTERNAL_SERVER_ERROR, "FAULT", "injected fault")
    try:
        answer = request.app[_BOOK].handle(call, body)
    except Refused as refused:
        return _error(request, refused.status, refused.code, refused.message)
    await suffer(fault, faults, request.transport)
    return _respond(request, HTTPStatus.OK, answer, good=fault is not Fault.BAD_SIGNATURE)


async def start_wallet(
    app: web.Application, host: str = "127.0.0.1", port: int = 0
) -> tuple[web.AppRunner, int]:
    """Serve `app` on host:port (0 picks a free port); the runner and the port bound."""
    runner = web.AppRunner(app, handle_signals=False, access_log=None, shutdown_timeout=1.0)
    await runner.setup()
    site = web.TCPSite(runner, host, port)
    try:
        await site.start()
    except BaseException:
        await runner.cleanup()
        raise
    return runner, int(runner.addresses[0][1])


# --- baccarat wallet-demo ----------------------------------------------------------------------


def run_from_args(args: argparse.Namespace) -> int:
    """Run `baccarat wallet-demo` until SIGINT or SIGTERM; ValueError for a bad setting."""
    if not args.secret:
        raise ValueError("no secret: pass --secret or set BACCARAT_WALLET_SECRET")
    secret = load_secret(args.secret)
    try:
        check_currency(args.currency)
    except ValueError as error:
        raise ValueError(f"--currency {error}") from None
    if not 0 <= args.port <= 65535:
        raise ValueError(f"--port must be 0 to 65535, not {args.port}")
    if not 0 <= args.initial_balance < 2**53:
        raise ValueError("--initial-balance must be a whole number from 0 below 2**53")
    if not 0 < args.fault_late <= 3600:
        raise ValueError("--fault-late must be above 0 and at most 3600 seconds")
    faults = Faults(
        rate=args.fault_rate, seed=args.fault_seed, late_s=args.fault_late, hang_s=args.fault_late
    )
    book = Book(args.db, args.initial_balance, args.currency)
    try:
        asyncio.run(_serve(wallet_app(book, secret, faults), args.host, args.port, args.db))
    except OSError as error:
        print(f"baccarat wallet-demo: cannot start: {error}", file=sys.stderr)
        return 1
    finally:
        book.close()
    return 0


async def _serve(app: web.Application, host: str, port: int, db: str) -> None:
    runner, bound = await start_wallet(app, host, port)
    stop = asyncio.Event()
    loop = asyncio.get_running_loop()
    for signum in (signal.SIGINT, signal.SIGTERM):
        loop.add_signal_handler(signum, stop.set)
    print(f"baccarat wallet-demo: serving on http://{host}:{bound} (books in {db})",
          file=sys.stderr, flush=True)  # fmt: skip
    try:
        await stop.wait()
    finally:
        await runner.cleanup()
