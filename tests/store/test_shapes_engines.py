"""What both engines store and answer fits the protocol's shapes (server/wire/shapes.py):
the envelope wire stamps (server/wire/envelope.py: the memory engine's maps, the bytes the
Redis script completes), receipts and settlements."""

from __future__ import annotations

from server.core.table import close_betting
from server.store.base import Event, Store
from server.wire import shapes
from server.wire.envelope import stamp
from server.wire.shape_check import message_problems
from tests.store import TABLE, Owner, accepted_message, bet, settlement_message

ENVELOPE = ("type", "table", "seq", "round", "ts")


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
