"""Check a decoded message against its shape in server/wire/shapes.py, at run time.

mypy checks the code that builds messages; this checks the messages themselves (what the
engines stored, what a capture shows), so tests can hold any message against the one definition
of the protocol. Exact: a missing key, an extra key or a value of another type is a problem.
"""

from __future__ import annotations

import functools
import types
from collections.abc import Mapping
from typing import Any, Literal, Union, get_args, get_origin, get_type_hints, is_typeddict

from server.wire.shapes import EVENT_PAYLOADS, EVENTS, SERVER_MESSAGES

__all__ = ["message_problems", "payload_problems", "shape_problems"]


def message_problems(message: object) -> list[str]:
    """What is wrong with a server message (a table event included); [] if it fits its shape."""
    if not isinstance(message, Mapping):
        return [f"$: a message is a map, not {type(message).__name__}"]
    kind = message.get("type")
    if kind == "event":
        return _by_name(message, "kind", EVENTS)
    return _by_name(message, "type", SERVER_MESSAGES)


def payload_problems(payload: object) -> list[str]:
    """What is wrong with an event payload as the core emits it (kind and fields, no envelope)."""
    if not isinstance(payload, Mapping):
        return [f"$: a payload is a map, not {type(payload).__name__}"]
    return _by_name(payload, "kind", EVENT_PAYLOADS)


def _by_name(message: Mapping[Any, Any], key: str, shapes: Mapping[str, type]) -> list[str]:
    shape = shapes.get(message.get(key))  # type: ignore[arg-type]
    if shape is None:
        return [f"$.{key}: unknown {key} {message.get(key)!r}"]
    return shape_problems(message, shape)


def shape_problems(value: object, shape: object, where: str = "$") -> list[str]:
    """What is wrong with `value` as an instance of `shape` (a TypedDict or a type form)."""
    problems: list[str] = []
    _check(value, shape, where, problems)
    return problems


@functools.cache
def _fields(shape: type) -> tuple[dict[str, Any], frozenset[str]]:
    required: frozenset[str] = shape.__required_keys__  # type: ignore[attr-defined]
    return get_type_hints(shape), required


def _check(value: object, shape: object, where: str, problems: list[str]) -> None:
    if isinstance(shape, type) and is_typeddict(shape):
        _check_typeddict(value, shape, where, problems)
        return
    origin, args = get_origin(shape), get_args(shape)
    if origin is Literal:
        if not any(type(value) is type(arg) and value == arg for arg in args):
            problems.append(f"{where}: {value!r} is not one of {', '.join(map(repr, args))}")
    elif origin is Union or origin is types.UnionType:
        tagged = [arg for arg in args if _tags_match(value, arg)]
        if len(tagged) == 1:  # a union of messages or events: the one its type/kind names
            _check(value, tagged[0], where, problems)
        elif all(shape_problems(value, arg, where) for arg in args):
            problems.append(f"{where}: {value!r} fits none of {shape}")
    elif origin is list:
        if not isinstance(value, list):
            problems.append(f"{where}: expected a list, got {type(value).__name__}")
            return
        for index, item in enumerate(value):
            _check(item, args[0], f"{where}[{index}]", problems)
    elif origin is dict:
        if not isinstance(value, dict):
            problems.append(f"{where}: expected a map, got {type(value).__name__}")
            return
        for key, item in value.items():
            _check(key, args[0], f"{where} key", problems)
            _check(item, args[1], f"{where}.{key}", problems)
    else:
        _check_plain(value, shape, where, problems)


def _tags_match(value: object, shape: object) -> bool:
    """Whether a map carries the `type` and `kind` a TypedDict shape fixes as literals."""
    if not (isinstance(shape, type) and is_typeddict(shape) and isinstance(value, Mapping)):
        return False
    hints, _ = _fields(shape)
    tags = [key for key in ("type", "kind") if get_origin(hints.get(key)) is Literal]
    return bool(tags) and all(value.get(key) in get_args(hints[key]) for key in tags)


def _check_plain(value: object, shape: object, where: str, problems: list[str]) -> None:
    if shape is None or shape is types.NoneType:
        ok = value is None
    elif shape in (int, bool):
        ok = type(value) is shape  # a bool is no int on our wire, and an int no bool
    elif isinstance(shape, type):
        ok = isinstance(value, shape)
    else:
        raise TypeError(f"{where}: the checker cannot read the type form {shape!r}")
    if not ok:
        expected = getattr(shape, "__name__", repr(shape))
        problems.append(f"{where}: expected {expected}, got {type(value).__name__} {value!r}")


def _check_typeddict(value: object, shape: type, where: str, problems: list[str]) -> None:
    if not isinstance(value, Mapping):
        problems.append(f"{where}: expected a {shape.__name__} map, got {type(value).__name__}")
        return
    hints, required = _fields(shape)
    problems.extend(f"{where}: missing {key!r}" for key in hints if key in required - value.keys())
    problems.extend(f"{where}: unexpected key {key!r}" for key in value if key not in hints)
    for key, hint in hints.items():
        if key in value:
            _check(value[key], hint, f"{where}.{key}", problems)
