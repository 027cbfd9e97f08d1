"""The HTTP wallet: the table server as the client of the operator's seamless wallet.

Every call is `POST {URL}/{call}`, signed (server/wallet/protocol.py), on one aiohttp
ClientSession per wallet: a pool of keep-alive connections, and a timeout on every call
(--wallet-timeout, for the whole call: connecting, sending and reading the answer). An answer
counts only if it is HTTP 200, signed with the shared secret within 30 s of this node's clock,
and a known status of that call; anything else, a timeout or a connection error raises
WalletUnknown (the outcome is unknown: never a guess).
"""

from __future__ import annotations

import asyncio
import time
from collections.abc import Callable, Mapping
from http import HTTPStatus

import aiohttp

from server.wallet.base import Answer, Cancel, Credit, Debit, Unknown, Wallet, WalletUnknown
from server.wallet.protocol import (
    SIGNATURE_HEADER,
    TIMESTAMP_HEADER,
    BadAnswer,
    BadSignature,
    BalanceRequest,
    Call,
    Request,
    call_url,
    check_currency,
    check_signature,
    check_wallet_url,
    encode,
    parse_answer,
    signed_headers,
)

__all__ = ["DEFAULT_TIMEOUT_S", "CallObserver", "HttpWallet"]

DEFAULT_TIMEOUT_S = 2.0
MAX_CONNECTIONS = 100  # kept-alive connections to the wallet, at most, per node
KEEPALIVE_S = 30.0  # an idle connection is closed after this

# Called after every call with the call, its outcome (a Status value, or the Unknown reason)
# and the seconds it took: what /metrics counts.
CallObserver = Callable[[Call, str, float], None]


class HttpWallet(Wallet):
    """The operator's wallet at `url` (see the module doc). Use it inside one event loop;
    `close()` releases its connections."""

    in_store = False

    def __init__(
        self,
        url: str,
        secret: bytes,
        currency: str = "EUR",
        timeout: float = DEFAULT_TIMEOUT_S,
        *,
        clock: Callable[[], float] = time.time,
        observe: CallObserver | None = None,
        max_connections: int = MAX_CONNECTIONS,
    ) -> None:
        try:
            super().__init__(check_currency(currency))
        except ValueError as error:
            raise ValueError(f"the currency {error}") from None
        self.url = check_wallet_url(url)
        if len(secret) < 32:
            raise ValueError("the wallet secret must have at least 32 bytes")
        if not 0 < timeout < float("inf"):
            raise ValueError(f"the wallet timeout must be a positive number, not {timeout!r}")
        self._secret = secret
        self.timeout = timeout
        self._clock = clock
        self._observe = observe
        self._max_connections = max_connections
        self._session: aiohttp.ClientSession | None = None

    def _client(self) -> aiohttp.ClientSession:
        if self._session is None or self._session.closed:
            self._session = aiohttp.ClientSession(
                connector=aiohttp.TCPConnector(
                    limit=self._max_connections, keepalive_timeout=KEEPALIVE_S
                ),
                timeout=aiohttp.ClientTimeout(total=self.timeout),
                headers={"User-Agent": "baccarat-live"},
                raise_for_status=False,
            )
        return self._session

    async def close(self) -> None:
        if self._session is not None:
            await self._session.close()
            self._session = None

    async def balance(self, player: str) -> Answer:
        request = BalanceRequest(player=player, currency=self.currency)
        return await self._call(Call.BALANCE, None, request)

    async def debit(self, tx: Debit) -> Answer:
        return await self._call(Call.DEBIT, tx.transaction_id, tx.request(self.currency))

    async def credit(self, tx: Credit) -> Answer:
        return await self._call(Call.CREDIT, tx.transaction_id, tx.request(self.currency))

    async def cancel(self, tx: Cancel) -> Answer:
        return await self._call(Call.CANCEL, tx.transaction_id, tx.request(self.currency))

    async def _call(self, call: Call, transaction_id: str | None, request: Request) -> Answer:
        started = time.monotonic()
        try:
            answer = await self._send(call, transaction_id, request)
        except WalletUnknown as unknown:
            self._observed(call, unknown.reason.value, started)
            raise
        self._observed(call, answer.status.value, started)
        return answer

    def _observed(self, call: Call, outcome: str, started: float) -> None:
        if self._observe is not None:
            self._observe(call, outcome, time.monotonic() - started)

    async def _send(self, call: Call, transaction_id: str | None, request: Request) -> Answer:
        def unknown(reason: Unknown, detail: str) -> WalletUnknown:
            return WalletUnknown(call, transaction_id, reason, detail)

        body = encode(request)
        headers = {
            "Content-Type": "application/json",
            **signed_headers(self._secret, body, self._clock()),
        }
        try:
            async with (
                asyncio.timeout(self.timeout),  # the whole call, whatever aiohttp's phases
                self._client().post(call_url(self.url, call), data=body, headers=headers) as got,
            ):
                answer = await got.read()
                status, answer_headers = got.status, got.headers
        except TimeoutError:
            raise unknown(Unknown.TIMEOUT, f"no answer within {self.timeout:g} s") from None
        except (aiohttp.ClientError, OSError) as error:
            raise unknown(Unknown.CONNECTION, f"{type(error).__name__}: {error}") from None
        if status != HTTPStatus.OK:
            reason = Unknown.CONFLICT if status == HTTPStatus.CONFLICT else Unknown.HTTP_STATUS
            raise unknown(reason, f"HTTP {status}: {_excerpt(answer)}")
        try:
            _check_answer_signature(self._secret, answer_headers, answer, self._clock())
        except BadSignature as error:
            raise unknown(Unknown.SIGNATURE, str(error)) from None
        try:
            known, balance = parse_answer(call, answer)
        except BadAnswer as error:
            raise unknown(Unknown.ANSWER, str(error)) from None
        return Answer(known, balance)


def _check_answer_signature(
    secret: bytes, headers: Mapping[str, str], body: bytes, now: float
) -> None:
    check_signature(secret, headers.get(TIMESTAMP_HEADER), headers.get(SIGNATURE_HEADER), body, now)


def _excerpt(body: bytes) -> str:
    return body[:200].decode("utf-8", "replace")
