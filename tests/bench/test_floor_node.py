"""The bets benchmark's `floor` site (bench/floor_node.py): our node, joined as usual, whose
bet frames are answered as the bare acknowledgement peer answers them, without the bet
handler: nothing checked, nothing placed."""

from __future__ import annotations

import asyncio

import msgpack

from bench import bets
from bench.peers import ACK_BALANCE


async def test_the_floor_node_joins_as_ours_and_answers_bets_as_the_bare_peer() -> None:
    site = await bets._start("floor")
    try:
        # The join went through the real handler: welcome, then a betting-phase snapshot.
        ws, round_no, _ = await bets._player(site.servers[0].url)
        # A bet our handler would refuse (no such spot, an amount past every limit) is
        # acknowledged: the floor never reaches the handler, the limits or the store.
        bet = {"type": "bet", "table": bets.TABLE, "round": round_no, "bet_id": "f1"}
        ws.send(msgpack.packb({**bet, "spot": "nowhere", "amount": 10**15}))
        async with asyncio.timeout(10):
            answer = msgpack.unpackb(await ws.recv())
            while answer.get("type") in ("joined", "event"):  # the join's answer, table events
                answer = msgpack.unpackb(await ws.recv())
        assert answer == {
            "type": "bet_accepted",
            **{k: v for k, v in bet.items() if k != "type"},
            "spot": "nowhere",
            "amount": 10**15,
            "balance": ACK_BALANCE,
        }
        ws.abort()
    finally:
        await site.stop()
