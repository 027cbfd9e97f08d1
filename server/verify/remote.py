"""Reading a table's events from a running server (`baccarat verify --url ... --table T`).

A spectator connection (or the token's) over `baccarat.v1.json`. First `join` with
`since: 0`: when the table's history still holds seq 1, the catch-up is the whole stream,
in one answer, up to `joined`. When it does not (a `snapshot` with `recovered: false` comes
instead), the events are asked round by round with `replay`: the earliest round still held is
found by bisection (`NOT_HELD` below it), then each round, page by page, through the one
being played. The rounds held are the server's last `--history-rounds` (1000 by default);
older shoes cannot be read, and the first shoe read may start inside a shoe (reported as not
checked). The server's replay rate (`--rate-replays`, 10 a second) paces a long read.
"""

from __future__ import annotations

import asyncio
import json
import urllib.parse
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from typing import Any

from websockets.asyncio.client import ClientConnection, connect
from websockets.exceptions import InvalidHandshake, WebSocketException
from websockets.typing import Subprotocol

__all__ = ["Fetched", "RemoteError", "fetch_table"]

Message = dict[str, Any]
Progress = Callable[[str], None]
TIMEOUT_S = 30.0  # for any one answer
RATE_LIMITED_PAUSE_S = 0.25  # the server's replay rate (--rate-replays) was exceeded: wait


class RemoteError(Exception):
    """The server could not be read: one line for stderr, exit status 2."""


@dataclass(slots=True)
class Fetched:
    welcome: Message
    events: list[Message] = field(default_factory=list)
    replayed_rounds: int = 0


def _with_query(url: str, token: str | None) -> str:
    parts = urllib.parse.urlsplit(url)
    query = urllib.parse.parse_qsl(parts.query)
    query.append(("token", token) if token else ("role", "spectator"))
    return urllib.parse.urlunsplit(parts._replace(query=urllib.parse.urlencode(query)))


async def fetch_table(url: str, table: str, token: str | None, progress: Progress) -> Fetched:
    try:
        async with connect(
            _with_query(url, token),
            subprotocols=[Subprotocol("baccarat.v1.json")],
            open_timeout=TIMEOUT_S,
            max_size=None,
        ) as ws:
            return await _Reader(ws, table, progress).run()
    except (OSError, InvalidHandshake, WebSocketException, TimeoutError) as error:
        raise RemoteError(f"{url}: {type(error).__name__}: {error}") from None


class _Reader:
    def __init__(self, ws: ClientConnection, table: str, progress: Progress) -> None:
        self.ws, self.table, self.progress = ws, table, progress
        self.paced = False  # the server refused a replay as too fast: said once

    async def recv(self) -> Message:
        async with asyncio.timeout(TIMEOUT_S):
            frame = await self.ws.recv()
        message = json.loads(frame)
        if not isinstance(message, dict):
            raise RemoteError(f"the server sent {message!r}")
        return message

    async def send(self, message: Mapping[str, Any]) -> None:
        await self.ws.send(json.dumps(message))

    async def run(self) -> Fetched:
        welcome = await self.recv()
        if welcome.get("type") != "welcome":
            raise RemoteError(f"expected a welcome, got {welcome.get('type')!r}")
        fetched = Fetched(welcome)
        await self.send({"type": "join", "table": self.table, "since": 0})
        snapshot: Message | None = None
        catch_up: list[Message] = []
        while (message := await self.recv()).get("type") != "joined":
            self._check_error(message, "join")
            if message.get("type") == "snapshot" and message.get("table") == self.table:
                snapshot, catch_up = message, []
            elif message.get("type") == "event" and message.get("table") == self.table:
                catch_up.append(message)
        await self.send({"type": "leave", "table": self.table})
        while (await self.recv()).get("type") != "left":
            pass  # live events that came meanwhile: the stream ends at `joined`
        self.progress(f"joined {self.table}: {len(catch_up)} events caught up")
        if snapshot is None:
            fetched.events = catch_up
        else:
            fetched.events = await self._replay_rounds(int(snapshot["round"]))
            fetched.replayed_rounds = len({event["round"] for event in fetched.events})
        return fetched

    def _check_error(self, message: Message, doing: str) -> None:
        if message.get("type") == "error":
            raise RemoteError(
                f"{doing} {self.table}: {message.get('code')}: {message.get('message')}"
            )

    async def _replay_rounds(self, head: int) -> list[Message]:
        """Every round still held, from the earliest through the one being played. A round
        at or below `head` (the snapshot's) that is no longer held dropped out of the history
        while this ran: what came before it is dropped too, so the events stay contiguous. A
        round above it that is not held is not played yet: the end."""
        first = await self._earliest_held(head)
        if first is None:
            self.progress(f"no round of {self.table} is held for replay")
            return []
        self.progress(f"the history starts after seq 0: replaying rounds from {first}")
        events: list[Message] = []
        round_no = first
        while True:
            answer = await self._replay(round_no)
            if answer is None and round_no > head:
                return events
            if answer is None:
                self.progress(f"round {round_no} dropped out of the history meanwhile")
                events = []
            else:
                if events and answer and answer[0]["seq"] != events[-1]["seq"] + 1:
                    # the previous round was being played when it was read: the rest of it
                    events += await self._replay(round_no - 1, after=events[-1]["seq"]) or []
                events += answer
            if (round_no - first) % 50 == 49:
                self.progress(f"replayed rounds {first}-{round_no} (the table is at {head}+)")
            round_no += 1

    async def _earliest_held(self, last_round: int) -> int | None:
        """Held rounds are the last ones: bisect for the first (1 request per halving)."""
        if last_round < 1 or await self._replay(last_round, first_page_only=True) is None:
            return None
        low, high = 1, last_round  # high is held
        while low < high:
            middle = (low + high) // 2
            if await self._replay(middle, first_page_only=True) is None:
                low = middle + 1
            else:
                high = middle
        return high

    async def _replay(
        self, round_no: int, first_page_only: bool = False, after: int | None = None
    ) -> list[Message] | None:
        """The round's events (after seq `after`), every page; None when it is not held."""
        events: list[Message] = []
        request: Message = {"type": "replay", "table": self.table, "round": round_no}
        if after is not None:
            request["after"] = after
        while True:
            answer = await self._ask(request)
            if answer is None:
                return None
            events += [e for e in answer.get("events", []) if isinstance(e, dict)]
            if not answer.get("more") or not events or first_page_only:
                return events
            request = {**request, "after": events[-1]["seq"]}

    async def _ask(self, request: Message) -> Message | None:
        while True:
            await self.send(request)
            while True:
                message = await self.recv()
                if message.get("type") == "replay" and message.get("round") == request["round"]:
                    return message
                if message.get("type") == "error":
                    break
            if message.get("code") == "NOT_HELD":
                return None
            if message.get("code") != "RATE_LIMITED":
                self._check_error(message, f"replay round {request['round']} of")
            if not self.paced:
                self.paced = True
                self.progress("the server limits replays (--rate-replays): pacing the requests")
            await asyncio.sleep(RATE_LIMITED_PAUSE_S)  # a client pacing itself to the server
