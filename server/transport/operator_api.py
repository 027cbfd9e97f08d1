"""The operator HTTP API (issues 8 and 11), on the admin listener (server/transport/admin.py).

Every route needs `Authorization: Bearer <operator token>`: none or a bad one gets 401, a
valid token of another role 403. Answers are JSON; a refusal is `{"error": code, "message":
...}` with its HTTP status.

- `GET /api/players/{id}`: the player's balance, where it lives (`balance_source`: `store`,
  or `wallet` with --wallet-url: then `balance` is the operator's wallet's latest answer,
  null before any) and latest operator movements.
- `GET /api/players/{id}/audit?since=MS&after=SEQ&limit=N`: a page of the player's audit log,
  oldest first (server/store/audit.py); `baccarat audit --url` pages through it.
- `GET /api/wallet/pending?table=T`: the debits an operator's wallet holds with neither a
  credit nor a cancel acknowledged (server/store/pending.py; `baccarat wallet-pending --url`).
- `POST /api/players/{id}/credit` and `/debit` with `{"amount": 500, "idempotency_key": "k-1"}`:
  move money (the same key twice moves it once; a debit beyond the balance is 409, and so is
  a movement that would take a ledger counter past 2**63 - 1, `ledger_limit`). With an
  operator's wallet (--wallet-url) the wallet holds the money: both are 409
  `wallet_is_external` and nothing moves.
- `GET /api/tables`: every table's state, owner and counts.
- `POST /api/tables/{id}/pause` and `/resume`: no new round opens while paused (the round in
  play finishes); the request is kept in the store, so it holds on every node.

aiohttp parses the request; this module judges its body before reading it: a Content-Length
over MAX_BODY_BYTES is 413 on the head alone, a chunked body 411 (a caller sends its small JSON
with a length), and a body that does not arrive within `body_timeout` is 408. A POST with
neither header has no body (RFC 9112, section 6.3), as `curl -X POST` sends a pause.
"""

from __future__ import annotations

import asyncio
import json
from collections.abc import Awaitable, Callable, Mapping
from dataclasses import dataclass
from http import HTTPStatus
from typing import Any

import structlog
from aiohttp import hdrs, web

from server.auth import AuthError, AuthPolicy, check_player_id
from server.metrics import Metrics
from server.store.audit import AUDIT_PAGE, parse_seq
from server.store.base import StateUnreadable, Store, StoreUnavailable
from server.store.pending import wallet_pending
from server.store.wallet import MOVEMENTS_KEPT, InsufficientFunds, LedgerLimit, check_movement

__all__ = [
    "API_PREFIX",
    "MAX_BODY_BYTES",
    "WALLET_IS_EXTERNAL",
    "ApiError",
    "OperatorApi",
    "error_response",
    "json_response",
    "table_rows",
]

API_PREFIX = "/api/"
MAX_BODY_BYTES = 16 * 1024  # a credit is under 100 bytes of JSON

MAX_KEY_CHARS = 128  # an idempotency key is kept per player; bound what a caller may store
# A JSON integer in a body: an amount below MONEY_LIMIT (2**53) has 16 digits, so this leaves
# room for a sign and leading nonsense while int() stays cheap.
MAX_NUMBER_CHARS = 32

TableRows = Callable[[], Awaitable[list[dict[str, Any]]]]

WALLET_IS_EXTERNAL = (
    "balances live in the operator's wallet (--wallet-url); credit or debit the player there"
)


@dataclass(slots=True)
class ApiError(Exception):
    status: HTTPStatus
    code: str
    message: str
    extra: dict[str, Any] | None = None


def json_response(data: Any, status: HTTPStatus = HTTPStatus.OK) -> web.Response:
    # `body`, not `text`: the Content-Type stays exactly application/json (no charset).
    return web.Response(
        status=status, body=json.dumps(data).encode(), content_type="application/json"
    )


def error_response(error: ApiError) -> web.Response:
    body: dict[str, Any] = {"error": error.code, "message": error.message, **(error.extra or {})}
    response = json_response(body, error.status)
    if error.status is HTTPStatus.UNAUTHORIZED:
        response.headers["WWW-Authenticate"] = 'Bearer realm="baccarat"'
    if error.status is HTTPStatus.METHOD_NOT_ALLOWED and error.extra:
        response.headers["Allow"] = error.extra["allow"]
    return response


_TOO_LARGE = ApiError(
    HTTPStatus.REQUEST_ENTITY_TOO_LARGE,
    "body_too_large",
    f"the body may have {MAX_BODY_BYTES} bytes",
)


class OperatorApi:
    """Routes /api/...; built by the Node with its auth policy, store and table views."""

    def __init__(
        self,
        auth: AuthPolicy,
        store: Store,
        tables: TableRows,
        on_pause: Callable[[str], None],
        metrics: Metrics,
        body_timeout: float = 10.0,
        wallet_external: bool = False,
    ) -> None:
        self.auth = auth
        self.store = store
        self.tables = tables  # every table's row of GET /api/tables
        self.on_pause = on_pause  # a table's pause request changed: wake its loop if local
        self.metrics = metrics
        self.body_timeout = body_timeout  # seconds a request's body may take to arrive
        self.wallet_external = wallet_external  # --wallet-url: the money is the wallet's
        self.log = structlog.get_logger("operator")

    def authorize(self, headers: Mapping[str, str]) -> str:
        """The operator's player id; ApiError 401 (no or bad token) or 403 (not an operator)."""
        try:
            identity = self.auth.require_operator(headers)
        except AuthError as error:
            code = "forbidden" if error.status == HTTPStatus.FORBIDDEN else "unauthorized"
            raise ApiError(HTTPStatus(error.status), code, error.reason) from None
        return identity.player or "?"

    def refusal(self, headers: Mapping[str, str]) -> web.Response | None:
        """The 401/403 answer for a request without an operator token; None for an operator."""
        try:
            self.authorize(headers)
        except ApiError as error:
            return error_response(error)
        return None

    async def handle(self, request: web.Request) -> web.Response:
        """The aiohttp handler of every path under /api/."""
        action = "unknown"
        try:
            route = request.path.removeprefix(API_PREFIX).split("/")
            action = _action(request.method, route)
            _check_framing(request)  # before the token: a refusal on the head alone
            operator = self.authorize(request.headers)
            response = await self._route(action, route, request, operator)
        except ApiError as error:
            response = error_response(error)
        except StoreUnavailable:
            self.metrics.store_error("operator_api")
            response = error_response(
                ApiError(HTTPStatus.SERVICE_UNAVAILABLE, "unavailable", "storage is unavailable")
            )
        self.metrics.operator_request(action, response.status)
        return response

    async def _route(
        self, action: str, route: list[str], request: web.Request, operator: str
    ) -> web.Response:
        if action == "player":
            return await self._player(_player_id(route[1]))
        if action in ("credit", "debit"):
            player = _player_id(route[1])
            if self.wallet_external:  # before the body: nothing here may move its money
                raise ApiError(HTTPStatus.CONFLICT, "wallet_is_external", WALLET_IS_EXTERNAL)
            return await self._move(action, player, _body(await self._read(request)), operator)
        if action == "audit":
            return await self._audit(_player_id(route[1]), request.query)
        if action == "tables":
            return json_response({"tables": await self.tables()})
        if action == "wallet_pending":
            pending = await wallet_pending(self.store, request.query.get("table") or None)
            return json_response({"pending": [debit.to_dict() for debit in pending]})
        if action in ("pause", "resume"):
            return await self._pause(route[1], action == "pause", operator)
        raise AssertionError(action)  # _action knows every route

    async def _read(self, request: web.Request) -> bytes:
        """The request's body (aiohttp stops it at the app's client_max_size); 408 when it
        does not arrive in time."""
        try:
            async with asyncio.timeout(self.body_timeout):
                return await request.read()
        except web.HTTPRequestEntityTooLarge:
            raise _TOO_LARGE from None
        except TimeoutError:
            raise ApiError(
                HTTPStatus.REQUEST_TIMEOUT,
                "body_timeout",
                f"the body did not arrive within {self.body_timeout:g} s",
            ) from None

    async def _player(self, player: str) -> web.Response:
        balance = await self.store.balance(player)
        if balance is None:
            raise ApiError(HTTPStatus.NOT_FOUND, "unknown_player", f"no player {player!r}")
        shown: int | None = balance
        source = "store"
        if self.wallet_external:  # the store's own balance is not the player's money then
            shown, source = await self.store.wallet_balance(player), "wallet"
        movements = await self.store.movements(player, MOVEMENTS_KEPT)
        return json_response(
            {
                "player": player,
                "balance": shown,
                "balance_source": source,
                "movements": [movement.to_dict() for movement in movements],
            }
        )

    async def _audit(self, player: str, query: Mapping[str, str]) -> web.Response:
        """A page of the player's audit log: `limit` (1-1000) entries from `since` (ms) or
        after the sequence `after`; an empty page once there are no more."""
        since, after = query.get("since"), query.get("after")
        limit = query.get("limit", str(AUDIT_PAGE))
        try:
            since_ms = _whole_number(since) if since is not None else None
            size = _whole_number(limit)
            if after is not None:
                parse_seq(after)
        except ValueError:
            raise ApiError(
                HTTPStatus.BAD_REQUEST,
                "bad_query",
                "since is a time in ms, after a sequence (<ms>-<n>), limit 1-1000",
            ) from None
        if not 1 <= size <= AUDIT_PAGE or (since_ms is not None and since_ms < 0):
            raise ApiError(HTTPStatus.BAD_REQUEST, "bad_query", "limit is 1-1000, since >= 0")
        entries = await self.store.audit(player, since_ms, size, after)
        return json_response({"player": player, "entries": [e.to_dict() for e in entries]})

    async def _move(
        self, action: str, player: str, body: dict[str, Any], operator: str
    ) -> web.Response:
        amount, key = body.get("amount"), body.get("idempotency_key")
        if type(amount) is not int or amount <= 0:
            raise ApiError(
                HTTPStatus.BAD_REQUEST,
                "bad_amount",
                f"amount must be a positive whole number of minor units, not {amount!r}",
            )
        if not isinstance(key, str) or not 0 < len(key) <= MAX_KEY_CHARS or not key.isprintable():
            raise ApiError(
                HTTPStatus.BAD_REQUEST,
                "bad_idempotency_key",
                f"idempotency_key must be 1-{MAX_KEY_CHARS} printable characters",
            )
        delta = amount if action == "credit" else -amount
        try:
            check_movement(delta, key)
            movement = await self.store.move_money(player, delta, key)
        except InsufficientFunds as short:
            raise ApiError(
                HTTPStatus.CONFLICT,
                "insufficient_funds",
                str(short),
                {"player": player, "balance": short.balance},
            ) from None
        except LedgerLimit as full:  # a ledger counter would pass 2**63 - 1
            raise ApiError(
                HTTPStatus.CONFLICT, "ledger_limit", str(full), {"counter": full.counter}
            ) from None
        except ValueError as error:  # past MONEY_LIMIT
            raise ApiError(HTTPStatus.BAD_REQUEST, "bad_amount", str(error)) from None
        balance = await self.store.balance(player)
        self.log.info(
            "operator_" + action, operator=operator, player=player, amount=amount, key=key
        )
        return json_response(
            {
                "player": player,
                "balance": movement.balance if balance is None else balance,
                "movement": movement.to_dict(),
            }
        )

    async def _pause(self, table_id: str, paused: bool, operator: str) -> web.Response:
        if not table_id or await self.store.rules(table_id) is None:
            raise ApiError(HTTPStatus.NOT_FOUND, "unknown_table", f"no table {table_id!r}")
        changed = await self.store.set_paused(table_id, paused)
        if changed:
            self.on_pause(table_id)
            self.log.info(
                "operator_pause" if paused else "operator_resume",
                operator=operator,
                table=table_id,
            )
        return json_response({"table": table_id, "paused": paused, "changed": changed})


# --- parsing the request ------------------------------------------------------------------

# (method, route shape) -> action; "*" stands for one path segment (an id).
_ROUTES: dict[tuple[str, ...], tuple[str, str]] = {
    ("players", "*"): ("GET", "player"),
    ("players", "*", "credit"): ("POST", "credit"),
    ("players", "*", "debit"): ("POST", "debit"),
    ("players", "*", "audit"): ("GET", "audit"),
    ("tables",): ("GET", "tables"),
    ("wallet", "pending"): ("GET", "wallet_pending"),
    ("tables", "*", "pause"): ("POST", "pause"),
    ("tables", "*", "resume"): ("POST", "resume"),
}


def _action(method: str, route: list[str]) -> str:
    """The route's action; ApiError 404 for no route, 405 for another method."""
    for shape, (wanted, action) in _ROUTES.items():
        if len(shape) == len(route) and all(
            s in ("*", r) for s, r in zip(shape, route, strict=True)
        ):
            if method != wanted:
                raise ApiError(
                    HTTPStatus.METHOD_NOT_ALLOWED,
                    "method_not_allowed",
                    f"use {wanted} here",
                    {"allow": wanted},
                )
            return action
    raise ApiError(HTTPStatus.NOT_FOUND, "not_found", "no such operator route")


def _check_framing(request: web.Request) -> None:
    """ApiError for a body we will not read: too long by its Content-Length, or chunked."""
    if hdrs.TRANSFER_ENCODING in request.headers:
        raise ApiError(
            HTTPStatus.LENGTH_REQUIRED, "length_required", "send the body with a Content-Length"
        )
    if (request.content_length or 0) > MAX_BODY_BYTES:
        raise _TOO_LARGE


def _player_id(value: str) -> str:
    try:
        return check_player_id(value)
    except ValueError as error:
        raise ApiError(HTTPStatus.BAD_REQUEST, "bad_player", str(error)) from None


class _BadNumber(ValueError):
    """A number in a body that we will not read (overlong, or not JSON at all)."""


def _whole_number(text: str) -> int:
    # Bounded before int(): Python refuses a string of more than 4,300 digits with a
    # ValueError (and longer ones cost quadratic time below that limit).
    if len(text) > MAX_NUMBER_CHARS:
        raise _BadNumber(f"a number of {len(text)} characters (at most {MAX_NUMBER_CHARS})")
    return int(text)


def _not_a_number(name: str) -> Any:
    raise _BadNumber(f"{name} is not a JSON number")  # Python's json would read it as a float


def _body(raw: bytes) -> dict[str, Any]:
    """The request's JSON object; ApiError 400 otherwise."""
    try:
        body = json.loads(raw, parse_int=_whole_number, parse_constant=_not_a_number)
    except _BadNumber as error:
        raise ApiError(
            HTTPStatus.BAD_REQUEST, "bad_json", f"the body must be a JSON object: {error}"
        ) from None
    except (UnicodeDecodeError, ValueError, RecursionError):  # JSONDecodeError is a ValueError
        raise ApiError(
            HTTPStatus.BAD_REQUEST, "bad_json", "the body must be a JSON object"
        ) from None
    if not isinstance(body, dict):
        raise ApiError(HTTPStatus.BAD_REQUEST, "bad_json", "the body must be a JSON object")
    return body


# Used by GET /api/tables; here so the Node only supplies the node-local counts.
async def table_rows(store: Store, subscribers: Mapping[str, int]) -> list[dict[str, Any]]:
    """Every table in the store: its phase and round, whether it is paused (asked, and held
    by its owner), its owner's lease, this round's bettors and stakes, this node's
    subscribers."""
    rows = []
    for table_id in sorted(await store.table_ids()):
        lease = await store.lease(table_id)
        row: dict[str, Any] = {
            "table": table_id,
            "paused": await store.paused(table_id),
            "owner": lease.node if lease else None,
            "lease_token": lease.token if lease else None,
            "lease_expires_at": lease.expires_at_ms if lease else None,
            "subscribers": subscribers.get(table_id, 0),
        }
        try:
            snap = await store.snapshot(table_id, None)
        except StateUnreadable as error:
            row["error"] = str(error)
            rows.append(row)
            continue
        if snap is not None:
            row.update(
                phase=snap.state.phase.value,
                round=snap.state.round,
                holding=snap.state.paused,  # the owner applied the pause: no round is open
                seq=snap.seq,
                rules=snap.rules.name,
                bettors=snap.bettors,
                staked=sum(snap.totals.values()),
            )
        rows.append(row)
    return rows
