"""Bad input over the wire: error answers that keep the connection, and closing codes."""

from __future__ import annotations

import json
from typing import Any

import msgpack
import pytest
from websockets.exceptions import ConnectionClosed

from server.app import Node
from server.wire.codec import Encoding, Frame
from tests.transport.conftest import TABLE, ClientFactory, NodeFactory, assert_table_deals

BAD_COMMANDS: list[tuple[Any, str]] = [
    ([1, 2], "BAD_MESSAGE"),
    ("join", "BAD_MESSAGE"),
    (None, "BAD_MESSAGE"),
    ({"table": TABLE}, "BAD_MESSAGE"),
    ({"type": 5}, "BAD_MESSAGE"),
    ({"type": "dance"}, "UNKNOWN_TYPE"),
    ({"type": "join"}, "MISSING_FIELD"),
    ({"type": "replay", "table": TABLE}, "MISSING_FIELD"),
    ({"type": "bet", "table": TABLE, "round": 1, "spot": "player", "amount": 100}, "MISSING_FIELD"),
    ({"type": "join", "table": 5}, "BAD_FIELD"),
    ({"type": "join", "table": TABLE, "since": "3"}, "BAD_FIELD"),
    ({"type": "join", "table": TABLE, "since": -1}, "BAD_FIELD"),
    ({"type": "join", "table": "x" * 65}, "BAD_FIELD"),
    ({"type": "replay", "table": TABLE, "round": "1"}, "BAD_FIELD"),
    ({"type": "join", "table": "nope"}, "UNKNOWN_TABLE"),
    ({"type": "leave", "table": "nope"}, "UNKNOWN_TABLE"),
    ({"type": "replay", "table": TABLE, "round": 10**9}, "NOT_HELD"),
]


def _frame(message: Any, encoding: Encoding) -> Frame:
    if encoding is Encoding.JSON:
        return json.dumps(message)
    packed: bytes = msgpack.packb(message)
    return packed


@pytest.mark.parametrize("encoding", list(Encoding))
async def test_bad_commands_get_errors_and_the_connection_stays_usable(
    node: Node, open_client: ClientFactory, encoding: Encoding
) -> None:
    """Each malformed command answers `error` with its code; the next command still works."""
    client = await open_client(node, encoding)
    for number, (message, code) in enumerate(BAD_COMMANDS):
        await client.send_frame(_frame(message, encoding))
        error = await client.reply("error")
        assert error["code"] == code, message
        assert error["message"]
        pong = await client.ping(number)
        assert pong["ref"] == number
    await client.join()  # and it can still watch the table
    await client.event("card")


async def test_an_error_carries_the_clients_ref(node: Node, open_client: ClientFactory) -> None:
    """An error to a command with a `ref` echoes it, so the client can match the answer."""
    client = await open_client(node)
    await client.send({"type": "dance", "ref": "r-1"})
    error = await client.reply("error")
    assert (error["code"], error["ref"]) == ("UNKNOWN_TYPE", "r-1")


async def test_a_json_integer_too_big_for_msgpack_is_not_echoed(
    node: Node, open_client: ClientFactory
) -> None:
    """On a msgpack connection a JSON ref beyond 64 bits is dropped, not a 1011 close."""
    client = await open_client(node, Encoding.MSGPACK)
    await client.send_frame(json.dumps({"type": "ping", "ref": 10**23}))
    assert (await client.reply("pong"))["ref"] is None
    await client.send_frame(json.dumps({"type": "dance", "ref": -(10**23)}))
    error = await client.reply("error")
    assert error["code"] == "UNKNOWN_TYPE" and "ref" not in error
    assert (await client.ping(2**64 - 1))["ref"] == 2**64 - 1


async def test_the_other_encoding_is_understood_and_answered_in_ours(
    node: Node, open_client: ClientFactory
) -> None:
    """A JSON connection accepts a msgpack (binary) frame and answers in JSON."""
    client = await open_client(node, Encoding.JSON)
    await client.send_frame(msgpack.packb({"type": "ping", "ref": "bin"}))
    pong = await client.reply("pong")  # recv() checks it came as a text frame
    assert pong["ref"] == "bin"


@pytest.mark.parametrize(
    ("encoding", "frame"),
    [
        (Encoding.MSGPACK, b"\xc1"),
        (Encoding.MSGPACK, b"\x92\x01"),
        (Encoding.MSGPACK, b"\x81\x91\x01\x02"),
        (Encoding.JSON, b"\xc1\xc1"),
        (Encoding.JSON, "{not json"),
        (Encoding.MSGPACK, "[" * 3000 + "]" * 3000),
    ],
    ids=["reserved-byte", "truncated", "unhashable-key", "binary-on-json", "bad-json", "deep"],
)
async def test_undecodable_frame_closes_with_1003(
    node: Node, open_client: ClientFactory, encoding: Encoding, frame: Frame
) -> None:
    """A frame that is no valid value closes the connection with 1003; the node goes on."""
    client = await open_client(node, encoding)
    await client.send_frame(frame)
    with pytest.raises(ConnectionClosed) as closed:
        await client.expect(lambda m: False)
    assert closed.value.rcvd is not None and closed.value.rcvd.code == 1003
    await assert_table_deals(node, open_client)


async def test_json_nested_past_the_limit_closes_with_1003_before_parsing(
    node: Node, open_client: ClientFactory
) -> None:
    """The server checks its clients' JSON frames for nesting (MAX_JSON_DEPTH) before parsing
    them: one level within is parsed and answered, one level past closes with 1003 and says
    why, though json could parse it."""
    client = await open_client(node, Encoding.JSON)
    within = '{"type":"ping","ref":"in","pad":' + "[" * 31 + "]" * 31 + "}"
    await client.send_frame(within)
    assert (await client.reply("pong"))["ref"] == "in"
    await client.send_frame('{"type":"ping","pad":' + "[" * 32 + "]" * 32 + "}")
    with pytest.raises(ConnectionClosed) as closed:
        await client.expect(lambda m: False)
    assert closed.value.rcvd is not None and closed.value.rcvd.code == 1003
    assert "nested deeper than 32" in closed.value.rcvd.reason
    await assert_table_deals(node, open_client)


async def test_oversized_frame_closes_with_1009(
    make_node: NodeFactory, open_client: ClientFactory
) -> None:
    """A frame over max_frame_bytes closes with 1009; one just under it is served."""
    node = await make_node(max_frame_bytes=1024)
    client = await open_client(node)
    await client.send({"type": "ping", "ref": "near", "pad": "x" * 900})
    assert (await client.reply("pong"))["ref"] == "near"
    await client.send({"type": "ping", "ref": "over", "pad": "x" * 2000})
    with pytest.raises(ConnectionClosed) as closed:
        await client.expect(lambda m: False)
    assert closed.value.rcvd is not None and closed.value.rcvd.code == 1009
    await assert_table_deals(node, open_client)
