"""Client commands: each parses to its dataclass; every malformed one names its error code."""

from __future__ import annotations

from typing import Any

import pytest
from hypothesis import given
from hypothesis import strategies as st

from server.wire import shapes
from server.wire.messages import (
    MAX_ID_LENGTH,
    Bet,
    ErrorCode,
    ErrorReply,
    History,
    Join,
    Leave,
    Ping,
    Replay,
    echo_ref,
    is_encodable,
    parse_command,
)

LONG_ID = "x" * (MAX_ID_LENGTH + 1)
BET: dict[str, Any] = {
    "type": "bet",
    "table": "t1",
    "round": 3,
    "bet_id": "b-1",
    "spot": "banker",
    "amount": 500,
}


def _code(message: object) -> ErrorCode:
    with pytest.raises(ErrorReply) as caught:
        parse_command(message)
    return caught.value.code


# --- every command --------------------------------------------------------------------------


def test_join_without_since() -> None:
    """join with only a table asks for a snapshot (since is None)."""
    assert parse_command({"type": "join", "table": "t1"}) == Join("t1", None)


def test_join_with_since() -> None:
    """join carries `since` through, 0 included; since=None means no since."""
    assert parse_command({"type": "join", "table": "t1", "since": 17}) == Join("t1", 17)
    assert parse_command({"type": "join", "table": "t1", "since": 0}) == Join("t1", 0)
    assert parse_command({"type": "join", "table": "t1", "since": None}) == Join("t1", None)


def test_leave() -> None:
    """leave names a table."""
    assert parse_command({"type": "leave", "table": "t1"}) == Leave("t1")


def test_bet() -> None:
    """bet carries every field; extra fields are ignored."""
    assert parse_command({**BET, "ref": 9}) == Bet("t1", 3, "b-1", "banker", 500)


def test_bet_passes_judged_values_through() -> None:
    """Round, spot and amount are judged by the table and rules, not the parser."""
    odd = {**BET, "round": "three", "spot": ["x"], "amount": -1.5}
    assert parse_command(odd) == Bet("t1", "three", "b-1", ["x"], -1.5)


def test_replay_pages_on_after() -> None:
    """replay takes an optional `after` seq (>= 0) to page through a long round."""
    message = {"type": "replay", "table": "t1", "round": 4, "after": 17}
    assert parse_command(message) == Replay("t1", 4, 17)
    assert parse_command({**message, "after": None}) == Replay("t1", 4)
    assert _code({**message, "after": -1}) is ErrorCode.BAD_FIELD
    assert _code({**message, "after": "17"}) is ErrorCode.BAD_FIELD


def test_replay() -> None:
    """replay names a table and a round."""
    assert parse_command({"type": "replay", "table": "t1", "round": 4}) == Replay("t1", 4)


def test_history_limit_defaults_to_20_and_stops_at_100() -> None:
    """history: `table` and `limit` are optional; no limit means 20; 1-100, else BAD_FIELD
    (issue 8: "limit up to 100, default 20")."""
    assert parse_command({"type": "history"}) == History(None, 20)
    assert parse_command({"type": "history", "table": "t1", "limit": 100}) == History("t1", 100)
    assert parse_command({"type": "history", "limit": 1}) == History(None, 1)
    for limit in (0, 101, -1):
        assert _code({"type": "history", "limit": limit}) is ErrorCode.BAD_FIELD
    assert _code({"type": "history", "limit": "20"}) is ErrorCode.BAD_FIELD


def test_ping() -> None:
    """ping carries a short string or integer ref back, or none."""
    assert parse_command({"type": "ping", "ref": "p1"}) == Ping("p1")
    assert parse_command({"type": "ping", "ref": 7}) == Ping(7)
    assert parse_command({"type": "ping", "ref": 2**64 - 1}) == Ping(2**64 - 1)
    assert parse_command({"type": "ping"}) == Ping(None)


@pytest.mark.parametrize(
    "ref", [[1, "a"], {"a": 1}, 1.5, b"raw", True, "r" * (MAX_ID_LENGTH + 1), 2**64, -(2**63) - 1]
)
def test_ping_drops_a_ref_it_cannot_echo(ref: object) -> None:
    """A ref that is not a short string or integer is answered as no ref, not an error."""
    assert parse_command({"type": "ping", "ref": ref}) == Ping(None)


def test_ids_at_the_length_limit_are_accepted() -> None:
    """Tables and bet ids of exactly MAX_ID_LENGTH characters are fine."""
    edge = "y" * MAX_ID_LENGTH
    parsed = parse_command({**BET, "table": edge, "bet_id": edge})
    assert parsed == Bet(edge, 3, edge, "banker", 500)


# --- every error path -----------------------------------------------------------------------


@pytest.mark.parametrize("message", [[1, 2], "join", 5, None, b"\x00", ("type", "join")])
def test_not_a_map(message: object) -> None:
    """Anything but a map is BAD_MESSAGE."""
    assert _code(message) is ErrorCode.BAD_MESSAGE


@pytest.mark.parametrize("message", [{}, {"table": "t1"}, {"type": 1}, {"type": None}])
def test_no_string_type(message: object) -> None:
    """A map without a string `type` is BAD_MESSAGE."""
    assert _code(message) is ErrorCode.BAD_MESSAGE


@pytest.mark.parametrize("kind", ["dance", "JOIN", "", "welcome", "snapshot"])
def test_unknown_type(kind: str) -> None:
    """A type the server does not take from clients is UNKNOWN_TYPE."""
    assert _code({"type": kind, "table": "t1"}) is ErrorCode.UNKNOWN_TYPE


@pytest.mark.parametrize(
    ("message", "missing"),
    [
        ({"type": "join"}, "table"),
        ({"type": "join", "since": 3}, "table"),
        ({"type": "leave"}, "table"),
        ({"type": "replay", "table": "t1"}, "round"),
        ({"type": "replay", "round": 1}, "table"),
        *(({k: v for k, v in BET.items() if k != name}, name) for name in BET if name != "type"),
    ],
    ids=repr,
)
def test_missing_field(message: dict[str, Any], missing: str) -> None:
    """A command without one of its fields is MISSING_FIELD, and the message names it."""
    with pytest.raises(ErrorReply) as caught:
        parse_command(message)
    assert caught.value.code is ErrorCode.MISSING_FIELD
    assert repr(missing) in caught.value.message


@pytest.mark.parametrize(
    "message",
    [
        {"type": "join", "table": 1},
        {"type": "join", "table": None},
        {"type": "join", "table": ["t1"]},
        {"type": "join", "table": "t1", "since": "3"},
        {"type": "join", "table": "t1", "since": 3.0},
        {"type": "join", "table": "t1", "since": True},
        {"type": "leave", "table": 7},
        {"type": "replay", "table": "t1", "round": "1"},
        {"type": "replay", "table": "t1", "round": 1.5},
        {"type": "replay", "table": "t1", "round": False},
        {"type": "replay", "table": "t1", "round": 2**63},
        {"type": "replay", "table": "t1", "round": -(2**63) - 1},
        {"type": "join", "table": "t1", "since": 10**30},
        {"type": "replay", "table": "t1", "round": 1, "after": 2**64},
        {"type": "replay", "table": 2, "round": 1},
        {**BET, "table": 1},
        {**BET, "bet_id": 12},
        {**BET, "bet_id": None},
    ],
    ids=repr,
)
def test_mistyped_field(message: dict[str, Any]) -> None:
    """A field of the wrong type is BAD_FIELD."""
    assert _code(message) is ErrorCode.BAD_FIELD


@pytest.mark.parametrize(
    "message",
    [
        {"type": "join", "table": LONG_ID},
        {"type": "join", "table": ""},
        {"type": "leave", "table": LONG_ID},
        {"type": "replay", "table": LONG_ID, "round": 1},
        {**BET, "table": LONG_ID},
        {**BET, "bet_id": LONG_ID},
        {**BET, "bet_id": ""},
    ],
    ids=lambda m: f"{m['type']}-{len(m.get('table', ''))}-{len(m.get('bet_id', ''))}",
)
def test_ids_too_long_or_empty(message: dict[str, Any]) -> None:
    """Ids must be 1 to MAX_ID_LENGTH characters: BAD_FIELD otherwise."""
    assert _code(message) is ErrorCode.BAD_FIELD


@pytest.mark.parametrize("since", [-1, -1000])
def test_negative_since(since: int) -> None:
    """join with a negative `since` is BAD_FIELD."""
    assert _code({"type": "join", "table": "t1", "since": since}) is ErrorCode.BAD_FIELD


SURROGATES = ["\ud800", "a\udfffb", "\udc80"]


@pytest.mark.parametrize("bad", SURROGATES)
@pytest.mark.parametrize(
    "place",
    ["table", "bet_id", "spot", "ref", "type", "extra", "key", "nested", "since", "amount"],
)
def test_a_string_utf8_cannot_carry_is_bad_message_anywhere(bad: str, place: str) -> None:
    """A lone surrogate in any string, map keys and unused fields included, refuses the whole
    message with BAD_MESSAGE: nothing the server accepts is a string it cannot send or store."""
    message: dict[Any, Any] = dict(BET)
    if place in ("table", "bet_id", "spot", "ref", "since", "amount"):
        message[place] = bad
    elif place == "type":
        message["type"] = "bet" + bad
    elif place == "extra":
        message["pad"] = ["ok", {"deep": bad}]
    elif place == "key":
        message[bad] = 1
    else:
        message["pad"] = {"k": [[[{bad: "v"}]]]}
    assert _code(message) is ErrorCode.BAD_MESSAGE
    assert _code({"type": "ping", "ref": "ok", "x": bad}) is ErrorCode.BAD_MESSAGE


def test_a_ref_utf8_cannot_carry_is_never_echoed() -> None:
    """echo_ref drops a ref with a lone surrogate: the BAD_MESSAGE answer carries no ref."""
    assert echo_ref({"type": "ping", "ref": "\ud800"}) is None
    assert echo_ref({"type": "ping", "ref": "é✓"}) == "é✓"


def test_is_encodable_walks_deep_values_without_recursion() -> None:
    """A value nested deeper than Python recurses is walked (iteratively) all the same."""
    deep: object = "\ud800"
    for _ in range(5000):
        deep = [deep]
    assert not is_encodable(deep)
    assert is_encodable({"é": ["✓", {"k": 1}], 2: b"\xff"})


def test_an_unknown_type_is_quoted_short() -> None:
    """The error for an unknown type quotes at most MAX_ID_LENGTH of it: answers never grow
    with the input."""
    with pytest.raises(ErrorReply) as caught:
        parse_command({"type": "x" * 10_000})
    assert len(caught.value.message) < 200


def test_error_message_shape() -> None:
    """Error answers carry type, code and message, plus the client's ref when it sent one."""
    assert shapes.error("BAD_FIELD", "nope") == {
        "type": "error",
        "code": "BAD_FIELD",
        "message": "nope",
    }
    assert shapes.error(ErrorCode.NOT_HELD, "gone", ref=3).get("ref") == 3


_json_values = st.recursive(
    st.none() | st.booleans() | st.integers() | st.floats() | st.text(max_size=8),
    lambda inner: (
        st.lists(inner, max_size=4) | st.dictionaries(st.text(max_size=6), inner, max_size=4)
    ),
    max_leaves=12,
)
_commands = st.fixed_dictionaries(
    {"type": st.sampled_from(["join", "leave", "bet", "replay", "ping", "nope"])},
    optional=dict.fromkeys(
        ("table", "since", "round", "bet_id", "spot", "amount", "ref"), _json_values
    ),
)


@given(st.one_of(_json_values, _commands))
def test_any_decoded_value_parses_or_is_refused_with_a_code(message: object) -> None:
    """Whatever a client sends, parsing gives a command or an ErrorReply, never a crash."""
    code: object = None
    try:
        parse_command(message)
    except ErrorReply as error:
        code = error.code
    assert code is None or code in set(ErrorCode)
