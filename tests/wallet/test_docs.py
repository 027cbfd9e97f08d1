"""docs/wallet.md is the protocol an operator implements from: its HTTP examples must be
true. Each request and answer there is checked here: signed with the page's example secret,
a body the call takes (or answers), deterministic transaction ids, and the settings it lists
are the server's."""

from __future__ import annotations

import re
from pathlib import Path

import pytest

from server.config import OPTIONS
from server.wallet.protocol import (
    Call,
    check_signature,
    credit_id,
    debit_id,
    parse_answer,
    parse_request,
)

DOC = (Path(__file__).resolve().parents[2] / "docs" / "wallet.md").read_text()
SECRET = b"0f1e2d3c4b5a69788796a5b4c3d2e1f00f1e2d3c4b5a69788796a5b4c3d2e1f0"
HTTP = re.findall(r"```http\n(.*?)```", DOC, re.S)


def _message(block: str) -> tuple[str, dict[str, str], bytes]:
    head, _, body = block.partition("\n\n")
    first, *lines = head.splitlines()
    headers = dict(line.split(": ", 1) for line in lines)
    return first, headers, body.rstrip("\n").encode()


def test_every_call_has_an_example_request_and_answer() -> None:
    requests = [_message(block)[0] for block in HTTP[::2]]
    assert {line.split()[1].rsplit("/", 1)[1] for line in requests} == set(Call)
    assert all(_message(block)[0] == "HTTP/1.1 200 OK" for block in HTTP[1::2])
    assert len(HTTP) % 2 == 0


@pytest.mark.parametrize("number", range(len(HTTP) // 2))
def test_the_examples_are_signed_and_well_formed(number: int) -> None:
    request_line, headers, body = _message(HTTP[2 * number])
    call = Call(request_line.split()[1].rsplit("/", 1)[1])
    timestamp = headers["X-Baccarat-Timestamp"]
    check_signature(SECRET, timestamp, headers["X-Baccarat-Signature"], body, int(timestamp))
    request = dict(parse_request(call, body))
    if call is Call.DEBIT:
        assert request["transaction_id"] == debit_id(
            request["table"], request["round"], request["player"], request["bet_id"]
        )
    elif call is Call.CREDIT:
        assert request["transaction_id"] == credit_id(
            request["table"], request["round"], request["player"]
        )
    elif call is Call.CANCEL:
        assert request["transaction_id"].startswith(
            debit_id(request["table"], request["round"], request["player"], "")
        )
    _, answer_headers, answer = _message(HTTP[2 * number + 1])
    answered = answer_headers["X-Baccarat-Timestamp"]
    check_signature(SECRET, answered, answer_headers["X-Baccarat-Signature"], answer, int(answered))
    parse_answer(call, answer)


def test_the_settings_table_is_the_servers() -> None:
    for name in ("wallet_url", "wallet_secret", "currency", "wallet_timeout", "wallet_retry_hours"):
        option = next(option for option in OPTIONS if option.name == name)
        assert f"| `{option.flag}` | `{option.env}` |" in DOC
