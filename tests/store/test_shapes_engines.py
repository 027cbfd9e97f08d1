"""What both engines store and answer fits the protocol's shapes (server/wire/shapes.py):
the envelope wire stamps (server/wire/envelope.py: the memory engine's maps, the bytes the
Redis script completes), receipts and settlements."""

from __future__ import annotations

import json

from server.core.table import close_betting, deal_next_card
from server.store.base import Event, Snapshot, Store
from server.wire import shapes
from server.wire.envelope import stamp
from server.wire.shape_check import message_problems
from tests.store import TABLE, Owner, accepted_message, bet, settlement_message

ENVELOPE = ("type", "table", "seq", "round", "ts")


def snapshot_message(snap: Snapshot) -> shapes.Snapshot:
    """The snapshot a session sends for this store read (server/transport/joins.py)."""
    return shapes.snapshot(
        TABLE, snap.seq, snap.epoch, snap.state, 0, snap.rules, snap.bets, snap.totals
    )


def _restamped(event: Event) -> shapes.TableEvent:
    payload = {key: value for key, value in event.items() if key not in ENVELOPE}
    return stamp(event["table"], event["seq"], event["round"], event["ts"], payload)


async def test_stored_events_fit_their_shapes(table: Store) -> None:
    """Every event of settled and voided rounds, as stored and replayed, fits its shape."""
    owner = await Owner(table).start()
    await owner.open()
    await bet(table, "alice", 500, "player")
    await bet(table, "bob", 300, "banker", bet_id="bob-1")
    await owner.publish()
    await owner.finish()
    await owner.open()
    await bet(table, "alice", 100, "tie", round_no=2)
    await owner.void("test")
    stored = await table.events_after(TABLE, 0)
    assert stored is not None
    assert {e["kind"] for e in stored} >= {"round_opened", "card", "round_voided", "bet_totals"}
    replayed = [e for r in (1, 2) for e in await table.round_events(TABLE, r) or []]
    assert replayed == stored
    for event in stored:
        assert message_problems(event) == [], event
        assert list(_restamped(event).items()) == list(event.items())  # envelope first, in order


async def test_committed_events_are_stamped_payloads(table: Store) -> None:
    """A commit's events are exactly stamp(table, seq, round, ts, payload) of the core's
    payloads, key order included, on both engines."""
    owner = await Owner(table).start()
    await owner.open()
    transition = close_betting(owner.state)
    events = await owner.apply(transition)
    expected = [
        stamp(TABLE, event["seq"], 1, event["ts"], payload)
        for event, payload in zip(events, transition.events, strict=True)
    ]
    assert [list(e.items()) for e in events] == [list(e.items()) for e in expected]


async def test_receipts_and_settlements_fit_their_shapes(table: Store) -> None:
    """bet_accepted (also for a repeated bet_id) and settlement messages fit their shapes."""
    owner = await Owner(table).start()
    await owner.open()
    receipt = await bet(table, "alice", 500, "player", bet_id="a-1")
    again = await bet(table, "alice", 100, "tie", bet_id="a-1")
    for message in (accepted_message(receipt), accepted_message(again)):
        assert message_problems(message) == []
    assert accepted_message(receipt) == shapes.bet_accepted(TABLE, 1, "a-1", "player", 500, 9_500)
    await owner.finish()
    settlement = await table.settlement(TABLE, 1, "alice")
    assert settlement is not None
    assert message_problems(settlement_message(settlement)) == []


async def test_a_snapshot_mid_shoe_carries_the_shoes_public_fairness(table: Store) -> None:
    """snapshot.fair, built from the stored state on both engines: the commitment before the
    seal; after it, the root, client seed and entropy (kept in the state blob) that the
    shoe's events published, the next position and each dealt card's proof; no seed."""
    owner = await Owner(table).start()
    opened = await owner.open()
    committed = next(e for e in opened if e["kind"] == "shoe_committed")
    await table.add_entropy(TABLE, "bob", "héllo 🂡")
    early = await table.snapshot(TABLE, None)
    assert early is not None
    fair = snapshot_message(early)["fair"]
    assert fair is not None and fair["sealed"] is False
    assert fair["commitment"] == committed["commitment"] and "root" not in fair
    sealing = await owner.close()
    sealed = next(e for e in sealing if e["kind"] == "shoe_sealed")
    cards = [e for e in await owner.apply(deal_next_card(owner.state)) if e["kind"] == "card"]
    snap = await table.snapshot(TABLE, "alice")
    assert snap is not None
    message = snapshot_message(snap)
    assert message_problems(message) == []
    fair = message["fair"]
    assert fair is not None
    assert (fair["root"], fair["client_seed"], fair["entropy"]) == (
        sealed["root"],
        sealed["client_seed"],
        ["héllo 🂡"],
    )
    assert fair["proofs"] == [
        {"position": c["position"], "salt": c["salt"], "proof": c["proof"]} for c in cards
    ]
    assert fair["position"] == cards[-1]["position"] + 1
    assert owner.state.fair is not None
    assert owner.state.fair.seed.hex() not in json.dumps(message)
