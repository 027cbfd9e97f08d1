"""A player's entropy for the shoe being committed (docs/fairness.md): taken by the store,
from whichever node the player is connected to, and announced as the table's
`entropy_accepted` event.

Everyone following the table hears the event from the feed, the sender included; a sender
not following the table gets the event straight away instead, as its answer. A refusal is an
`error` with the store's code (ENTROPY_CLOSED, ENTROPY_ALREADY_SENT, ENTROPY_FULL); a
spectator's or operator's entropy is NOT_A_PLAYER.
"""

from __future__ import annotations

from typing import Protocol

from server.store.base import EntropyRefused
from server.transport.context import SessionContext
from server.transport.port import Port
from server.wire.messages import Entropy, ErrorCode, ErrorReply

__all__ = ["add"]


class Sender(Protocol):
    port: Port
    joined: tuple[str, ...]


async def add(sender: Sender, ctx: SessionContext, player: str | None, entropy: Entropy) -> None:
    """Take `player`'s value; ErrorReply with the refusal's code otherwise."""
    if player is None:
        raise ErrorReply(ErrorCode.NOT_A_PLAYER, "only players send entropy")
    ctx.known_table(entropy.table)
    try:
        event = await ctx.store.add_entropy(entropy.table, player, entropy.value)
    except EntropyRefused as refused:
        raise ErrorReply(ErrorCode(refused.code), refused.message) from None
    # This node's followers hear it at once if it is next in line, else from the feed.
    ctx.hub.offer(entropy.table, [event])
    if entropy.table not in sender.joined:
        sender.port.send(event)
