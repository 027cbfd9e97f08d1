"""The seamless-wallet API on the wire, both sides of it (docs/wallet.md, issue 19).

The operator hosts the wallet; the table server is its client. Every call is
`POST {URL}/{call}` with a JSON body and two headers, `X-Baccarat-Timestamp` (unix seconds)
and `X-Baccarat-Signature` (hex HMAC-SHA256 of the secret over `timestamp + "." + body`);
the answer is HTTP 200 with a JSON body signed the same way in its own headers. A timestamp
more than MAX_SKEW_S off the receiver's clock is refused by both sides.

Pure: no clock (callers pass `now`), no I/O but reading a secret file. Money is integer
minor units of one currency (ISO 4217), never a float.
"""

from __future__ import annotations

import hashlib
import hmac
import json
import re
from enum import StrEnum
from pathlib import Path
from typing import Any, Final, NotRequired, TypedDict, cast
from urllib.parse import urlsplit

from server.core.bets import Spot

__all__ = [
    "MAX_AMOUNT",
    "MAX_SKEW_S",
    "MIN_SECRET_BYTES",
    "SIGNATURE_HEADER",
    "STATUSES",
    "TIMESTAMP_HEADER",
    "AnswerBody",
    "BadAnswer",
    "BadRequest",
    "BadSignature",
    "BalanceRequest",
    "Call",
    "CancelRequest",
    "CreditRequest",
    "DebitRequest",
    "ErrorBody",
    "Request",
    "Status",
    "call_url",
    "check_currency",
    "check_signature",
    "check_wallet_url",
    "credit_id",
    "debit_id",
    "encode",
    "load_secret",
    "parse_answer",
    "parse_request",
    "sign",
    "signed_headers",
]

TIMESTAMP_HEADER: Final = "X-Baccarat-Timestamp"
SIGNATURE_HEADER: Final = "X-Baccarat-Signature"
MAX_SKEW_S: Final = 30  # a timestamp further off than this, either way, is refused
MIN_SECRET_BYTES: Final = 32
# Amounts and balances stay below 2**53: exact in every JSON reader (and in Redis's Lua).
MAX_AMOUNT: Final = 2**53
MAX_TRANSACTION_ID: Final = 256  # d:{table 64}:{round}:{player 64}:{bet_id 64} fits
MAX_NAME: Final = 64  # player, table and bet_id: 1-64 characters, as on the WebSocket

_CURRENCY = re.compile(r"[A-Z]{3}")

_SPOTS = frozenset(spot.value for spot in Spot)  # what a debit may name


class Call(StrEnum):
    """The four calls, named as in their path: `POST {URL}/debit`, ..."""

    BALANCE = "balance"
    DEBIT = "debit"
    CREDIT = "credit"
    CANCEL = "cancel"


class Status(StrEnum):
    """The `status` of an answer. Only a debit is ever refused; a refusal moves nothing."""

    OK = "OK"
    INSUFFICIENT_FUNDS = "INSUFFICIENT_FUNDS"  # the balance does not cover the debit
    PLAYER_BLOCKED = "PLAYER_BLOCKED"  # the operator does not let this player bet
    LIMIT_EXCEEDED = "LIMIT_EXCEEDED"  # an operator's limit (stake, loss, session, ...)
    CANCELLED = "CANCELLED"  # this debit's id was cancelled before: never booked


# The statuses each call may answer; any other is an answer the server cannot know.
STATUSES: Final[dict[Call, frozenset[Status]]] = {
    Call.BALANCE: frozenset({Status.OK}),
    Call.DEBIT: frozenset(Status),
    Call.CREDIT: frozenset({Status.OK}),
    Call.CANCEL: frozenset({Status.OK}),
}


# --- bodies ----------------------------------------------------------------------------------


class BalanceRequest(TypedDict):
    player: str
    currency: str


class DebitRequest(TypedDict):
    transaction_id: str  # debit_id(table, round, player, bet_id)
    player: str
    amount: int  # > 0
    currency: str
    table: str
    round: int
    bet_id: str
    spot: str


class CreditRequest(TypedDict):
    transaction_id: str  # credit_id(table, round, player)
    player: str
    amount: int  # >= 0: stake + winnings, the stake on a push, 0 on a loss
    currency: str
    table: str
    round: int
    debits: list[str]  # the round's standing debits of this player, each in one credit only


class CancelRequest(TypedDict):
    transaction_id: str  # the debit's own id
    player: str
    amount: int  # the debit's amount (> 0)
    currency: str
    table: str
    round: int


Request = BalanceRequest | DebitRequest | CreditRequest | CancelRequest


class AnswerBody(TypedDict):
    """An answer of HTTP 200: `balance` (minor units, after the call) is required with OK and
    optional (or null) with a refusal."""

    status: str
    balance: NotRequired[int | None]


class ErrorBody(TypedDict):
    """What the reference wallet answers with an HTTP error (400, 401, 404, 409)."""

    error: str
    message: str


# The fields of each call's body, in the order the server writes them: exactly these.
FIELDS: Final[dict[Call, tuple[str, ...]]] = {
    Call.BALANCE: ("player", "currency"),
    Call.DEBIT: (
        "transaction_id", "player", "amount", "currency", "table", "round", "bet_id", "spot",
    ),
    Call.CREDIT: ("transaction_id", "player", "amount", "currency", "table", "round", "debits"),
    Call.CANCEL: ("transaction_id", "player", "amount", "currency", "table", "round"),
}  # fmt: skip


# --- transaction ids -------------------------------------------------------------------------


def debit_id(table: str, round_no: int, player: str, bet_id: str) -> str:
    """A bet's debit: `d:{table}:{round}:{player}:{bet_id}`; its cancel carries the same id."""
    return f"d:{table}:{round_no}:{player}:{bet_id}"


def credit_id(table: str, round_no: int, player: str) -> str:
    """A player's one credit of a round: `c:{table}:{round}:{player}`."""
    return f"c:{table}:{round_no}:{player}"


# --- signatures ------------------------------------------------------------------------------


class BadSignature(Exception):
    """A request or answer whose timestamp or signature does not hold: treated as not sent."""


def sign(secret: bytes, timestamp: int | str, body: bytes) -> str:
    """hex HMAC-SHA256(secret, timestamp + "." + body), the timestamp in decimal digits."""
    message = str(timestamp).encode("ascii") + b"." + body
    return hmac.new(secret, message, hashlib.sha256).hexdigest()


def signed_headers(secret: bytes, body: bytes, now: float) -> dict[str, str]:
    """The two headers that sign `body` at `now` (unix seconds, the sender's clock)."""
    timestamp = int(now)
    return {TIMESTAMP_HEADER: str(timestamp), SIGNATURE_HEADER: sign(secret, timestamp, body)}


def check_signature(
    secret: bytes, timestamp: str | None, signature: str | None, body: bytes, now: float
) -> None:
    """BadSignature unless `timestamp` is unix seconds within MAX_SKEW_S of `now` and
    `signature` is sign(secret, timestamp, body) (compared in constant time)."""
    if timestamp is None or signature is None:
        raise BadSignature(f"missing {TIMESTAMP_HEADER} or {SIGNATURE_HEADER}")
    if not (timestamp.isascii() and timestamp.isdigit() and len(timestamp) <= 12):
        raise BadSignature(f"{TIMESTAMP_HEADER} must be unix seconds, not {timestamp[:20]!r}")
    if abs(int(timestamp) - now) > MAX_SKEW_S:
        raise BadSignature(f"{TIMESTAMP_HEADER} is more than {MAX_SKEW_S} s off")
    expected = sign(secret, timestamp, body)
    if not hmac.compare_digest(expected, signature.strip().lower()):
        raise BadSignature(f"{SIGNATURE_HEADER} does not match the body")


def load_secret(value: str) -> bytes:
    """The wallet secret from --wallet-secret / BACCARAT_WALLET_SECRET: the stripped contents
    of the file it names (a Docker or Kubernetes secret file), else the value itself.
    ValueError (one line, no secret in it) for a missing or unreadable file or a secret
    shorter than MIN_SECRET_BYTES."""
    path = Path(value).expanduser()
    if value and path.is_file():
        try:
            secret = path.read_text(encoding="utf-8").strip()
        except (OSError, UnicodeDecodeError) as error:
            raise ValueError(f"cannot read wallet secret file {value}: {error}") from None
    elif value.startswith(("/", "./", "../", "~")):
        raise ValueError(f"no wallet secret file at {value}")
    else:
        secret = value
    size = len(secret.encode("utf-8"))
    if size < MIN_SECRET_BYTES:
        raise ValueError(
            f"the wallet secret is {size} bytes; it must have at least {MIN_SECRET_BYTES} "
            "(e.g. `openssl rand -hex 32`)"
        )
    return secret.encode("utf-8")


# --- settings --------------------------------------------------------------------------------


def check_currency(currency: object) -> str:
    """An ISO 4217 code: three upper-case letters (EUR, USD, JPY); ValueError otherwise."""
    if not isinstance(currency, str) or not _CURRENCY.fullmatch(currency):
        raise ValueError(f"must be three upper-case letters (ISO 4217), not {currency!r}")
    return currency


def check_wallet_url(url: str) -> str:
    """A wallet URL the calls can be appended to: http(s)://host[:port][/path], no query, no
    fragment, no trailing `/` (the server adds `/debit`, ...); ValueError otherwise. The
    message never shows the URL's user or password."""
    parts = urlsplit(url)
    if parts.scheme not in ("http", "https") or not parts.hostname:
        raise ValueError(
            f"--wallet-url must be http://HOST[:PORT][/PATH] or https://..., "
            f"not a {parts.scheme or 'scheme-less'} URL"
        )
    if parts.query or parts.fragment or url.endswith(("?", "#")):
        raise ValueError("--wallet-url must have no query or fragment")
    if url.endswith("/"):
        raise ValueError(
            "--wallet-url must not end with '/': the server adds /balance, /debit, ... to it"
        )
    try:
        parts.port  # noqa: B018 - raises for a port that is no number or out of range
    except ValueError:
        raise ValueError("--wallet-url has a port that is not 0-65535") from None
    return url


def call_url(base: str, call: Call) -> str:
    """`POST {URL}/{call}`: the URL as given, path included, then `/` and the call name."""
    return f"{base}/{call.value}"


# --- encoding and checking bodies ------------------------------------------------------------


def encode(body: Request | AnswerBody | ErrorBody) -> bytes:
    """A body as sent: compact JSON in UTF-8 (the signature covers exactly these bytes)."""
    return json.dumps(body, separators=(",", ":"), ensure_ascii=False).encode("utf-8")


class BadRequest(Exception):
    """A request body the wallet cannot take: HTTP 400 with this code and message."""

    def __init__(self, code: str, message: str) -> None:
        super().__init__(f"{code}: {message}")
        self.code = code
        self.message = message


class BadAnswer(Exception):
    """An answer body that is not a known answer to the call: the outcome is unknown."""


def _decode(raw: bytes) -> Any:
    return json.loads(raw.decode("utf-8"))


def _is_int(value: object) -> bool:
    return type(value) is int


def _check_amount(name: str, value: object, low: int) -> None:
    if not _is_int(value) or not low <= value < MAX_AMOUNT:  # type: ignore[operator]
        raise BadRequest("BAD_AMOUNT", f"{name} must be a whole number from {low} below 2**53")


def _check_name(body: dict[str, Any], name: str, longest: int = MAX_NAME) -> None:
    value = body[name]
    if not isinstance(value, str) or not 0 < len(value) <= longest:
        raise BadRequest("BAD_FIELD", f"{name!r} must be a string of 1-{longest} characters")


def parse_request(call: Call, raw: bytes) -> Request:
    """The request body of `call`, checked: a JSON object with exactly the call's fields
    (so a body signed for one call is refused by another), strings of 1-64 characters
    (transaction ids up to 256), amounts whole numbers below 2**53 (> 0 for a debit and a
    cancel, >= 0 for a credit), `round` >= 0, `spot` a spot of the game, `currency` three
    upper-case letters, `debits` a non-empty list of distinct transaction ids. BadRequest
    otherwise."""
    try:
        body = _decode(raw)
    except (UnicodeDecodeError, ValueError, RecursionError):  # nesting too deep: not a body
        raise BadRequest("BAD_JSON", "the body is not a JSON object in UTF-8") from None
    if not isinstance(body, dict):
        raise BadRequest("BAD_JSON", "the body is not a JSON object")
    wanted = FIELDS[call]
    missing = [name for name in wanted if name not in body]
    if missing:
        raise BadRequest("MISSING_FIELD", f"{call}: missing {', '.join(missing)}")
    extra = sorted(str(name) for name in body if name not in wanted)
    if extra:
        raise BadRequest("UNKNOWN_FIELD", f"{call}: no field {', '.join(extra)}")
    _check_name(body, "player")
    try:
        check_currency(body["currency"])
    except ValueError as error:
        raise BadRequest("BAD_CURRENCY", f"'currency' {error}") from None
    if call is Call.BALANCE:
        return BalanceRequest(player=body["player"], currency=body["currency"])
    _check_name(body, "transaction_id", MAX_TRANSACTION_ID)
    _check_name(body, "table")
    _check_amount("amount", body["amount"], 0 if call is Call.CREDIT else 1)
    if not _is_int(body["round"]) or not 0 <= body["round"] < MAX_AMOUNT:
        raise BadRequest("BAD_FIELD", "'round' must be a whole number >= 0")
    if call is Call.DEBIT:
        _check_name(body, "bet_id")
        if not isinstance(body["spot"], str) or body["spot"] not in _SPOTS:
            raise BadRequest("BAD_FIELD", f"'spot' must be one of {', '.join(Spot)}")
        return cast(DebitRequest, body)
    if call is Call.CREDIT:
        debits = body["debits"]
        if not isinstance(debits, list) or not all(
            isinstance(d, str) and 0 < len(d) <= MAX_TRANSACTION_ID for d in debits
        ):
            raise BadRequest("BAD_FIELD", "'debits' must be a list of transaction ids")
        if not debits:
            raise BadRequest("BAD_FIELD", "'debits' must name the debits the credit closes")
        if len(set(debits)) != len(debits):
            raise BadRequest("BAD_FIELD", "'debits' names a debit twice")
        return cast(CreditRequest, body)
    return cast(CancelRequest, body)


def parse_answer(call: Call, raw: bytes) -> tuple[Status, int | None]:
    """The status and balance of an HTTP 200 answer to `call`. BadAnswer unless it is a JSON
    object whose `status` is one `call` may answer (STATUSES) and whose `balance` is a whole
    number from 0 below 2**53 (required with OK, else optional or null)."""
    try:
        body = _decode(raw)
    except (UnicodeDecodeError, ValueError, RecursionError):  # nesting too deep: not a body
        raise BadAnswer("the answer is not JSON in UTF-8") from None
    if not isinstance(body, dict):
        raise BadAnswer("the answer is not a JSON object")
    try:
        status = Status(str(body.get("status")))
    except ValueError:
        raise BadAnswer(f"unknown status {str(body.get('status'))[:40]!r}") from None
    if status not in STATUSES[call]:
        raise BadAnswer(f"{call} cannot answer {status}")
    balance = body.get("balance")
    if balance is None and status is not Status.OK:
        return status, None
    if not isinstance(balance, int) or isinstance(balance, bool) or not 0 <= balance < MAX_AMOUNT:
        raise BadAnswer(f"balance must be a whole number from 0 below 2**53, not {balance!r}")
    return status, balance
