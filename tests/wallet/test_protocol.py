"""The protocol's pure pieces: ids, signatures, secrets, URLs, and the wallet settings."""

from __future__ import annotations

import hashlib
import hmac
import json
from pathlib import Path

import pytest

from server.config import Settings
from server.wallet.protocol import (
    BadAnswer,
    BadRequest,
    BadSignature,
    Call,
    call_url,
    check_signature,
    check_wallet_url,
    credit_id,
    debit_id,
    load_secret,
    parse_answer,
    parse_request,
    sign,
)

KEY = b"k" * 32


def test_transaction_ids_are_deterministic() -> None:
    assert debit_id("classic8", 12, "alice", "b-1") == "d:classic8:12:alice:b-1"
    assert credit_id("classic8", 12, "alice") == "c:classic8:12:alice"


def test_the_signature_is_hmac_sha256_of_timestamp_dot_body() -> None:
    body = b'{"player":"alice","currency":"EUR"}'
    expected = hmac.new(KEY, b"1700000000." + body, hashlib.sha256).hexdigest()
    assert sign(KEY, 1700000000, body) == sign(KEY, "1700000000", body) == expected
    check_signature(KEY, "1700000000", expected, body, now=1700000000)
    check_signature(KEY, "1700000000", expected.upper(), body, now=1700000030)


@pytest.mark.parametrize(
    ("timestamp", "signature", "body", "now"),
    [
        ("1700000000", None, b"{}", 1700000000),
        (None, "ab", b"{}", 1700000000),
        ("1700000000", sign(KEY, 1700000000, b"{}"), b"{} ", 1700000000),  # another body
        ("1700000000", sign(b"j" * 32, 1700000000, b"{}"), b"{}", 1700000000),  # another key
        ("1700000000", sign(KEY, 1700000000, b"{}"), b"{}", 1700000031),  # stale
        ("1700000000", sign(KEY, 1700000000, b"{}"), b"{}", 1699999969),  # from the future
        ("1.7e9", sign(KEY, "1.7e9", b"{}"), b"{}", 1700000000),
        ("-5", sign(KEY, "-5", b"{}"), b"{}", 0),
    ],
)
def test_a_signature_that_does_not_hold_is_refused(
    timestamp: str | None, signature: str | None, body: bytes, now: float
) -> None:
    with pytest.raises(BadSignature):
        check_signature(KEY, timestamp, signature, body, now)


def test_the_secret_is_a_value_or_a_file_of_at_least_32_bytes(tmp_path: Path) -> None:
    secret_file = tmp_path / "wallet-secret"
    secret_file.write_text("s" * 40 + "\n")
    assert load_secret(str(secret_file)) == b"s" * 40
    assert load_secret("v" * 32) == b"v" * 32
    for bad in ("v" * 31, "", str(tmp_path / "missing"), "./nope"):
        with pytest.raises(ValueError):
            load_secret(bad)
    (tmp_path / "short").write_text("abc")
    with pytest.raises(ValueError, match="3 bytes"):
        load_secret(str(tmp_path / "short"))


def test_a_call_goes_to_the_url_as_given_then_slash_and_its_name() -> None:
    assert call_url("http://h/wallet", Call.DEBIT) == "http://h/wallet/debit"
    assert call_url("https://h:8443", Call.BALANCE) == "https://h:8443/balance"


@pytest.mark.parametrize(
    "url",
    ["ftp://h/w", "h/w", "http:///w", "http://h/w/", "http://h/", "http://h/w?x=1",
     "http://h/w#f", "http://h:99999/w"],
)  # fmt: skip
def test_a_wallet_url_the_calls_cannot_follow_is_refused(url: str) -> None:
    with pytest.raises(ValueError, match="--wallet-url"):
        check_wallet_url(url)


# --- settings --------------------------------------------------------------------------------


def test_the_wallet_settings_default_to_the_internal_wallet() -> None:
    wallet = Settings().wallet
    assert wallet.internal and wallet.currency == "EUR"
    assert (wallet.timeout, wallet.retry_hours) == (2.0, 24.0)
    assert wallet.secret_bytes() is None


def test_the_wallet_settings_of_an_operators_wallet(tmp_path: Path) -> None:
    secret = tmp_path / "secret"
    secret.write_text("z" * 32)
    wallet = Settings.from_options(
        wallet_url="https://wallet.example/api/v1",
        wallet_secret=str(secret),
        currency="JPY",
        wallet_timeout=0.5,
        wallet_retry_hours=1.5,
    ).wallet
    assert not wallet.internal
    assert wallet.secret_bytes() == b"z" * 32
    assert (wallet.currency, wallet.timeout, wallet.retry_hours) == ("JPY", 0.5, 1.5)


@pytest.mark.parametrize(
    ("options", "message"),
    [
        ({"wallet_url": "ftp://h/w", "wallet_secret": "x" * 32}, "--wallet-url must be http"),
        ({"wallet_url": "http://h/w/", "wallet_secret": "x" * 32}, "must not end with '/'"),
        ({"wallet_url": "http://h/w"}, "--wallet-url needs --wallet-secret"),
        ({"wallet_url": "http://h/w", "wallet_secret": "short"}, "--wallet-secret: "),
        ({"wallet_secret": "/no/such/file"}, "--wallet-secret: no wallet secret file"),
        ({"currency": "eur"}, "--currency must be three upper-case letters"),
        ({"currency": "EURO"}, "--currency must be three upper-case letters"),
        ({"wallet_timeout": 0.0}, "--wallet-timeout must be a finite number from 0.01 to 60"),
        ({"wallet_timeout": float("nan")}, "--wallet-timeout"),
        ({"wallet_retry_hours": 0.0}, "--wallet-retry-hours must be"),
    ],
)
def test_bad_wallet_settings_are_refused_naming_the_option(
    options: dict[str, object], message: str
) -> None:
    with pytest.raises(ValueError, match=message.replace("(", r"\(")) as refused:
        Settings.from_options(**options)
    assert "x" * 32 not in str(refused.value)  # no secret in a message


def test_a_body_nested_too_deep_is_a_bad_answer_or_request_not_a_crash() -> None:
    """json raises RecursionError on `[[[[...`: from the wallet that is no answer (the server
    treats it as unknown), and to the reference wallet no request."""
    deep = b"[" * 100_000 + b"]" * 100_000
    with pytest.raises(BadAnswer):
        parse_answer(Call.DEBIT, deep)
    with pytest.raises(BadRequest):
        parse_request(Call.DEBIT, deep)


@pytest.mark.parametrize("spot", [["player"], {"a": 1}, 5, None])
def test_a_debit_naming_no_spot_is_a_bad_field(spot: object) -> None:
    body = {
        "transaction_id": "d:t:1:ann:b-1", "player": "ann", "amount": 100, "currency": "EUR",
        "table": "t", "round": 1, "bet_id": "b-1", "spot": spot,
    }  # fmt: skip
    with pytest.raises(BadRequest) as refused:
        parse_request(Call.DEBIT, json.dumps(body).encode())
    assert refused.value.code == "BAD_FIELD"
