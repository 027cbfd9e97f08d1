"""Strings no encoding can carry (issue 7, defect 1): refused at parsing, nothing debited.

A JSON text frame can hold a lone UTF-16 surrogate ("\\ud800"), and a msgpack str can hold
bytes that are not UTF-8; both decode to strings that UTF-8 cannot encode, so the server could
neither echo them nor store them in Redis. Before the fix such a bet_id was debited on the
memory engine while the client got INTERNAL, and such a ref closed the connection with 1011.
"""

from __future__ import annotations

import json
from typing import Any

import msgpack
import pytest

from server.app import Node
from server.wire.codec import Encoding, Frame
from tests.transport.conftest import TABLE, Client, ClientFactory, NodeFactory, ServerLog

PLACEHOLDER = "\x01\x02\x03"  # replaced by a string UTF-8 cannot carry once encoded


def _bad_frame(message: dict[str, Any], encoding: Encoding) -> Frame:
    """The message with PLACEHOLDER turned into a lone surrogate (JSON: an escape) or into
    invalid UTF-8 (msgpack: the str's bytes)."""
    if encoding is Encoding.JSON:
        return json.dumps(message).replace("\\u0001\\u0002\\u0003", "\\ud800")
    packed: bytes = msgpack.packb(message)
    return packed.replace(b"\xa3\x01\x02\x03", b"\xa3\xed\xa0\x80")


def _bet(round_no: int, **fields: Any) -> dict[str, Any]:
    return {
        "type": "bet",
        "table": TABLE,
        "round": round_no,
        "bet_id": "b",
        "spot": "player",
        "amount": 100,
        **fields,
    }


BAD_BETS = {
    "bet_id": {"bet_id": PLACEHOLDER},
    "table": {"table": PLACEHOLDER},
    "spot": {"spot": PLACEHOLDER},
    "ref": {"ref": PLACEHOLDER},
    "extra-field": {"note": [PLACEHOLDER]},
    "map-key": {PLACEHOLDER: 1},
}


async def _fresh_window(client: Client) -> int:
    snap = await client.join()
    return int((await client.event("round_opened", snap["round"]))["round"])


@pytest.mark.parametrize("encoding", list(Encoding))
async def test_a_bet_with_an_unencodable_string_is_refused_and_debits_nothing(
    server_log: ServerLog,
    make_node: NodeFactory,
    open_client: ClientFactory,
    engine: str,
    encoding: Encoding,
) -> None:
    """Each field (and a key) holding a string UTF-8 cannot carry: `error` BAD_MESSAGE, no
    ref echoed, nothing debited, the connection open; the next good bet is settled."""
    node = await make_node(engine=engine)
    client = await open_client(node, encoding)
    start = client.welcome["balance"]
    round_no = await _fresh_window(client)
    for name, fields in BAD_BETS.items():
        await client.send_frame(_bad_frame(_bet(round_no, **fields), encoding))
        error = await client.reply("error")
        assert (error["code"], "ref" in error) == ("BAD_MESSAGE", False), name
    assert await node.store.balance(client.welcome["player"]) == start
    await client.send(_bet(round_no, bet_id="good"))
    assert (await client.reply("bet_accepted"))["balance"] == start - 100
    settlement = await client.reply("settlement")
    assert [p["bet_id"] for p in settlement["payouts"]] == ["good"]
    ledger = await node.store.ledger()
    assert ledger.balanced and ledger.in_play == 0
    assert server_log.failures() == []


@pytest.mark.parametrize("encoding", list(Encoding))
async def test_an_unencodable_ref_is_not_echoed_and_the_connection_lives(
    server_log: ServerLog,
    make_node: NodeFactory,
    open_client: ClientFactory,
    engine: str,
    encoding: Encoding,
) -> None:
    """A ping or an unknown type whose ref UTF-8 cannot carry: BAD_MESSAGE without a ref
    (it was a 1011 close), and the next ping is answered."""
    node = await make_node(engine=engine)
    client = await open_client(node, encoding)
    for message in ({"type": "ping", "ref": PLACEHOLDER}, {"type": "dance", "ref": PLACEHOLDER}):
        for _ in range(50):  # and no traceback per frame: no traceback at all
            await client.send_frame(_bad_frame(message, encoding))
            error = await client.reply("error")
            assert (error["code"], "ref" in error) == ("BAD_MESSAGE", False)
    assert (await client.ping("after"))["ref"] == "after"
    assert server_log.failures() == []


async def test_a_json_frame_on_a_msgpack_connection_gets_the_same_rule(
    node: Node, open_client: ClientFactory
) -> None:
    """Frames are decoded by frame type: a JSON escape on a msgpack connection is refused
    the same way, and the answer is msgpack."""
    client = await open_client(node, Encoding.MSGPACK)
    await client.send_frame(_bad_frame({"type": "join", "table": PLACEHOLDER}, Encoding.JSON))
    assert (await client.reply("error"))["code"] == "BAD_MESSAGE"


async def test_an_answer_that_cannot_be_encoded_is_replaced_not_fatal(
    server_log: ServerLog, node: Node, open_client: ClientFactory
) -> None:
    """Should a bug ever build an answer its encoding cannot carry, the client gets INTERNAL
    instead, the failure is logged in one line (no traceback), and the connection goes on."""
    client = await open_client(node)
    session = next(iter(node.ctx.sessions))
    session.push({"type": "pong", "ref": "\ud800", "ts": 1})
    error = await client.reply("error")
    assert error["code"] == "INTERNAL" and "ref" not in error
    assert (await client.ping("still"))["ref"] == "still"
    failures = server_log.failures()
    assert [e["event"] for e in failures if isinstance(e, dict)] == ["unsendable_message"]
    assert not any(isinstance(e, dict) and "exc_info" in e for e in failures)
