"""A committed shoe survives its owner (issue 18), on both engines: the owner dies mid-shoe,
another node takes the table over and deals on from the same seed, root and positions; every
card checks against the root the first owner sealed, and the seed revealed at the end
recomputes the whole shoe (server.core.fair.ShoeChecker over the recorded events). The seed
is never in an event before its reveal, nor in a snapshot."""

from __future__ import annotations

import asyncio
import contextlib
import json
import random
from functools import partial

from server.core.cards import Card, Suit
from server.core.fair import ShoeChecker, decode_proof
from server.core.table import Phase, TableState
from server.runtime.clock import ManualClock
from server.runtime.table_loop import TableLoop, Timings
from server.store.base import Event, Store
from server.wire import shapes
from tests.store import RULES, TABLE

TIMINGS = Timings(
    betting_window=1.0,  # on Redis judged by Redis's real clock: time to send entropy
    deal_interval=1.0,
    close_pause=1.0,
    result_pause=1.0,
    next_round_pause=1.0,
    lease_ttl=3.0,
    retry=0.5,
)


def _loop(store: Store, clock: ManualClock, node: str, seed: int) -> TableLoop:
    seeds = partial(random.Random(seed).randbytes, 32)
    return TableLoop(store, TABLE, RULES, node, clock, TIMINGS, seeds=seeds)


async def _until(clock: ManualClock, store: Store, done: object) -> None:
    """Move the manual clock until the stored header satisfies `done`. On Redis each betting
    window also takes its real time (Redis's clock judges it): bounded by a real timeout."""
    assert callable(done)
    async with asyncio.timeout(90):
        while True:
            header = await store.load_header(TABLE)
            if header is not None and done(header):
                return
            await clock.advance(0.25)


def _card(face: dict[str, object]) -> Card:
    suit = face["suit"]
    return Card(str(face["rank"]), Suit(suit) if isinstance(suit, str) else None)


def _check_shoe(events: list[Event], shoe: int) -> ShoeChecker:
    """Feed one shoe's events to a ShoeChecker; every step must check."""
    mine = [e for e in events if e.get("shoe") == shoe or e["kind"] == "card"]
    [committed] = [e for e in mine if e["kind"] == "shoe_committed"]
    checker = ShoeChecker(committed["commitment"])
    started = False
    for e in events:
        if e["kind"] == "shoe_committed":
            started = e["shoe"] == shoe
        if not started:
            continue
        if e["kind"] == "shoe_sealed":
            assert e["alg"] == "bac-shoe-v1"
            low, high = e["cut_from_end"]
            mismatch = checker.sealed(
                entropy=e["entropy"],
                client_seed=bytes.fromhex(e["client_seed"]),
                root=bytes.fromhex(e["root"]),
                decks=e["decks"],
                cut_from_end=(low, high),
            )
            assert mismatch is None, mismatch
        elif e["kind"] == "shoe_shuffled":
            checker.shuffled(e["cut_index"])
        elif e["kind"] == "burn":
            shown = [(e["position"], e["shown"], e["salt"], e["proof"])]
            shown += [(b["position"], b["card"], b["salt"], b["proof"]) for b in e["burnt"]]
            for position, face, salt, proof in shown:
                mismatch = checker.card(
                    position, _card(face), bytes.fromhex(salt), decode_proof(proof)
                )
                assert mismatch is None, mismatch
        elif e["kind"] == "card":
            face = {"rank": e["rank"], "suit": e["suit"]}
            mismatch = checker.card(
                e["position"], _card(face), bytes.fromhex(e["salt"]), decode_proof(e["proof"])
            )
            assert mismatch is None, mismatch
        elif e["kind"] == "shoe_revealed":
            assert checker.revealed(bytes.fromhex(e["seed"])) is None
            return checker
    raise AssertionError(f"shoe {shoe} was never revealed")


async def test_a_shoe_taken_over_keeps_its_seed_root_and_positions(
    any_store: Store, clock: ManualClock
) -> None:
    await any_store.create_table(TABLE, RULES)
    first = _loop(any_store, clock, "first", seed=1)
    task = asyncio.create_task(first.run())
    await _until(clock, any_store, lambda h: h.phase is Phase.BETTING)
    await any_store.add_entropy(TABLE, "alice", "alice's luck")
    await any_store.add_entropy(TABLE, "bob", "🂡 bob")
    # Mid-shoe, mid-coup: round 2, two cards dealt.
    await _until(clock, any_store, lambda h: h.round == 2 and h.phase is Phase.DEALING)
    for _ in range(20):
        state = await any_store.load_state(TABLE)
        if state is not None and state.dealt >= 2:
            break
        await clock.advance(0.25)
    token = first.token
    task.cancel()  # a crash: the lease is not released by the loop
    with contextlib.suppress(asyncio.CancelledError):
        await task
    assert token is not None
    before = await any_store.load_state(TABLE)
    assert before is not None and before.fair is not None and before.fair.sealed
    assert before.shoe_number == 1 and before.dealt >= 2
    snapshot = shapes.snapshot(TABLE, 0, "e", before, 0, RULES)
    await any_store.release_lease(TABLE, "first", token)  # it lapses (quicker on Redis)
    second = _loop(any_store, clock, "second", seed=2)  # another seed source: not used
    async with asyncio.timeout(120):
        task = asyncio.create_task(second.run())
        try:
            await _until(clock, any_store, lambda h: h.shoe_number == 2)
        finally:
            task.cancel()
            with contextlib.suppress(asyncio.CancelledError):
                await task
    assert second.token is not None and second.token != token
    events = await any_store.events_after(TABLE, 0, limit=10_000) or []
    assert [e["seq"] for e in events] == list(range(1, len(events) + 1))
    checker = _check_shoe(events, 1)
    [sealed] = [e for e in events if e["kind"] == "shoe_sealed" and e["shoe"] == 1]
    assert sealed["entropy"] == ["alice's luck", "🂡 bob"]
    # Positions 0.. with no gap across the two owners, to the end of the shoe.
    assert [p for p, _ in checker.dealt] == list(range(len(checker.dealt)))
    assert checker.dealt[-1][0] >= before.round_start + before.dealt
    # The seed was secret until its reveal: in no event before, in no snapshot.
    seed = before.fair.seed.hex()
    revealed = next(i for i, e in enumerate(events) if e["kind"] == "shoe_revealed")
    assert events[revealed]["seed"] == seed
    assert seed not in json.dumps(events[:revealed], ensure_ascii=False)
    assert seed not in json.dumps(snapshot) and seed not in repr(before)


async def test_the_loop_draws_a_fresh_seed_for_every_shoe(clock: ManualClock) -> None:
    """By default each shoe's seed comes from the OS CSPRNG: two shoes, two commitments."""
    from server.store.memory import MemoryStore

    store = MemoryStore(clock.now_ms)
    await store.create_table(TABLE, RULES)
    loop = TableLoop(store, TABLE, RULES, "a", clock, TIMINGS)
    seeds = [loop.seeds() for _ in range(2)]
    assert len(set(seeds)) == 2 and all(len(seed) == 32 for seed in seeds)
    assert isinstance(await store.load_state(TABLE), TableState)
