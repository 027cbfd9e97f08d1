"""Our node with its bet handler taken out: the bets benchmark's `floor` site (bench/bets.py).

`baccarat serve`, unchanged but for one thing: a bet frame is answered as the bare
acknowledgement peer answers it (bench/peers.py `ack_of`: decoded, `bet_accepted`'s shape,
nothing checked, no store), through the node's own WebSocket port (`Session.send`). Every
other frame (the join) goes to the real handler, so the connection is welcomed and joined as
usual. What this node spends per bet is what our node costs outside the bet handler: the
`websockets` connection under our session loop, our writes, and the node's own machinery
running meanwhile (the table loop, the feed, metrics, the collector's settings).

In the same run, the real node's CPU per bet minus this one's is what the bet handler costs,
and a target (1.3 x the bare peer's) minus this one's is what it leaves the handler
(docs/benchmarks.md, "The floors").

    python bench/floor_node.py serve [baccarat serve's options]
"""

from __future__ import annotations

import sys
from pathlib import Path
from typing import cast

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from bench.peers import ACK_BALANCE, ack_of
from server import cli
from server.transport.session import Session
from server.wire.codec import MAX_JSON_DEPTH, Frame, Undecodable, decode
from server.wire.shapes import ServerMessage

_handle_frame = Session._handle_frame


async def answer_bets_as_bare(self: Session, frame: Frame) -> bool:
    """Session._handle_frame with a bet answered by `ack_of`; anything else as the node does."""
    try:
        message = decode(frame, MAX_JSON_DEPTH)
    except Undecodable:
        return await _handle_frame(self, frame)  # closes the connection, as the node does
    if isinstance(message, dict) and message.get("type") == "bet":
        # Through Session.send, as every answer of the node: the buffer check, the encoding,
        # the turn write and the message counter are the floor's too.
        self.send(cast("ServerMessage", ack_of(message, ACK_BALANCE)))
        return True
    return await self.handler.handle(message)


def main() -> int:
    Session._handle_frame = answer_bets_as_bare  # type: ignore[method-assign]
    return cli.main(sys.argv[1:])


if __name__ == "__main__":
    raise SystemExit(main())
