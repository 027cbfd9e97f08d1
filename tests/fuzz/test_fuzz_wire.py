"""Every frame decodes or is refused, parses to a command or an error with a code, and every
answer built from it can be encoded in both encodings: no exception escapes."""

from __future__ import annotations

from dataclasses import fields

from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from server.wire import shapes
from server.wire.codec import Encoding, Undecodable, decode, encode
from server.wire.messages import ErrorCode, ErrorReply, echo_ref, parse_command
from tests.fuzz import EXAMPLES
from tests.fuzz.strategies import FrameSpec, frame_specs, frames_of


@settings(
    max_examples=EXAMPLES or 300,
    deadline=None,
    suppress_health_check=[HealthCheck.too_slow, HealthCheck.data_too_large],
)
@given(frame_specs(), st.integers(0, 10_000))
def test_any_frame_decodes_parses_and_answers_cleanly(spec: FrameSpec, round_no: int) -> None:
    """decode -> parse_command -> the answer's encoding: each step succeeds or refuses with
    its own error; a refused message's answer (with its echoed ref) is always sendable."""
    payload, is_text = frames_of(spec, round_no)
    if is_text:
        try:
            frame: bytes | str = payload.decode("utf-8")
        except UnicodeDecodeError:
            return  # the WebSocket layer closes such a text frame (1007) before we see it
    else:
        frame = payload
    try:
        message = decode(frame)
    except Undecodable:
        return  # answered by closing with 1003
    ref = echo_ref(message)
    try:
        command = parse_command(message)
    except ErrorReply as error:
        answer = shapes.error(error.code, error.message, ref)
    else:
        values = (getattr(command, f.name) for f in fields(command))  # no deep copy: junk
        echoed = [value for value in values if isinstance(value, str)]  # ids
        answer = {"type": "pong", "ref": ref, "echoed": echoed}
    assert answer.get("code", ErrorCode.BAD_MESSAGE) in set(ErrorCode)
    for encoding in Encoding:  # anything the server echoes of the message can be sent
        encode(answer, encoding)
