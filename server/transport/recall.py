"""Reading back: a held round's events (`replay`) and a player's last rounds (`history`).

Both are plain store reads answered on the session's port; neither touches a feed.
"""

from __future__ import annotations

from typing import Any

from server.transport.context import SessionContext
from server.transport.port import Port
from server.wire import shapes
from server.wire.messages import ErrorCode, ErrorReply, History, Replay

__all__ = ["history", "replay"]


async def replay(port: Port, ctx: SessionContext, command: Replay) -> None:
    ctx.known_table(command.table)
    events = await ctx.store.round_events(command.table, command.round)
    if events is None:
        raise ErrorReply(ErrorCode.NOT_HELD, f"round {command.round} is not held for replay")
    if command.after is not None:
        events = [e for e in events if e["seq"] > command.after]
    # One answer is bounded whatever the round holds; `more` says to ask again with
    # `after` set to the last seq received.
    page = events[: ctx.max_replay_events]
    port.send(shapes.replay(command.table, command.round, page, more=len(events) > len(page)))


async def history(port: Port, ctx: SessionContext, player: str | None, command: History) -> None:
    """Game recall: the player's last rounds, newest first. A spectator or an operator has
    no rounds of its own: an empty list."""
    if command.table is not None:
        ctx.known_table(command.table)
    records: list[dict[str, Any]] = []
    if player is not None:
        records = await ctx.store.history(player, command.table, command.limit)
    port.send(shapes.history([shapes.recalled_round(record) for record in records]))
