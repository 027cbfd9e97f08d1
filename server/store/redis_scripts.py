"""The Redis engine's Lua scripts (server/store/lua/): which there are, their text, and how a
call's reply is awaited, loading the script when Redis does not hold it yet.

Every check-then-write of the engine is one of these scripts, so it is atomic on the server.
A call goes out as EVALSHA in the turn's pipeline (RedisBase._submit_script); the text is sent
only when Redis answers NOSCRIPT (its first use, or after Redis restarted).
"""

from __future__ import annotations

import asyncio
from collections.abc import Sequence
from importlib import resources
from typing import Any

from redis.asyncio import Redis
from redis.commands.core import AsyncScript
from redis.exceptions import NoScriptError

from server.store.redis_client import reachable

__all__ = ["SCRIPTS", "register_scripts", "script_reply", "script_text"]

SCRIPTS = (
    "create_table",
    "ensure_player",
    "place_bet",
    "add_entropy",
    "commit",
    "acquire_lease",
    "release_lease",
    "lease",
    "snapshot",
    "reset_epoch",
    "move_money",
    "keep_guests",
    "expire_guests",
    "outbox_claim",
    "outbox_done",
    "outbox_retry",
    "outbox_release",
)


def script_text(name: str) -> str:
    """A script's source: the shared library (lib.lua), then the script itself."""
    lua = resources.files("server.store").joinpath("lua")
    return lua.joinpath("lib.lua").read_text() + "\n" + lua.joinpath(f"{name}.lua").read_text()


def register_scripts(redis: Redis) -> dict[str, AsyncScript]:
    """Every script by name, its SHA computed here (nothing is sent to Redis yet)."""
    return {name: redis.register_script(script_text(name)) for name in SCRIPTS}


async def script_reply(
    script: AsyncScript,
    sent: asyncio.Future[Any],
    keys: Sequence[str],
    args: Sequence[object],
) -> Any:
    """The reply of an EVALSHA already sent; a script Redis does not hold is loaded and run."""
    with reachable():
        try:
            return await sent
        except NoScriptError:  # not loaded yet, or Redis restarted: load it and go on
            return await script(keys=keys, args=args)  # type: ignore[arg-type]
