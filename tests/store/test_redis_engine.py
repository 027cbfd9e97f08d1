"""What only the Redis engine has: key layout, stream trimming, races, outages, restarts."""

from __future__ import annotations

import asyncio
import uuid
from typing import Any

import pytest
from redis.asyncio import Redis
from redis.crc import key_slot

from server.core.bets import BetTotals, Spot, SpotLimit, TableLimits
from server.core.errors import BetRejected, RejectCode
from server.core.rules import TableRules
from server.store.audit import DEFAULT_AUDIT_KEEP_MS
from server.store.base import BetReceipt, Store, StoreDataError, StoreUnavailable
from server.store.codec import packb, unpackb
from server.store.redis import RedisStore
from tests.redis_server import RedisProcess, delete_keys
from tests.store import RULES, TABLE, Owner, bet, take
from tests.store.conftest import StoreFactory

pytestmark = pytest.mark.redis


@pytest.fixture
def engine() -> str:
    """Only the Redis engine here."""
    return "redis"


def prefix_of(store: Store) -> str:
    assert isinstance(store, RedisStore)
    return store.key_prefix


async def keys_of(raw: Redis, store: Store) -> list[str]:
    # A set: SCAN may return a key twice while Redis rehashes.
    return sorted({key.decode() async for key in raw.scan_iter(match=f"{prefix_of(store)}:*")})


async def test_keys_of_a_table_share_one_hash_tag(table: Store, raw: Redis) -> None:
    """Every key of a table carries {t:<table>}, every key of a player {p:<player>}."""
    owner = await Owner(table).start()
    await owner.open()
    await bet(table, "alice", 300, "player")
    await bet(table, "bob", 200, "banker")
    await owner.finish()
    prefix = prefix_of(table)
    keys = await keys_of(raw, table)
    table_keys = [k for k in keys if "{t:" in k]
    player_keys = [k for k in keys if "{p:" in k]
    assert {k.removeprefix(f"{prefix}:{{t:{TABLE}}}:") for k in table_keys} >= {
        "state",
        "stream",
        "lease",
        "rounds",
        "round:1",
        "settle:1",
        "bets:1",
        "bettors:1",
        "stake:1:alice",
        "stake:1:bob",
        "totals:1",
        "bet_receipts",
        "receipt_keys:1",
        "mine:1:alice",
        "mine:1:bob",
    }
    assert len({key_slot(k.encode()) for k in table_keys}) == 1
    for player in ("alice", "bob"):
        mine = [k for k in player_keys if f"{{p:{player}}}" in k]
        # receipts live with the round; nothing is left in play once it is settled
        kinds = ("audit", "balance", "history")
        assert mine == [f"{prefix}:{{p:{player}}}:{kind}" for kind in kinds]
    assert sorted(set(keys) - set(table_keys) - set(player_keys)) == [
        f"{prefix}:ledger",
        f"{prefix}:tables",
    ]


async def test_stream_is_trimmed_to_history_events(make_store: StoreFactory, raw: Redis) -> None:
    """The stream holds exactly the last history_events events, with IDs <seq>-0."""
    store = await make_store(history_events=5)
    await store.create_table(TABLE, RULES)
    owner = await Owner(store).start()
    events = await owner.open()
    events += await owner.finish()
    stream = f"{prefix_of(store)}:{{t:{TABLE}}}:stream"
    assert await raw.xlen(stream) == 5
    entries: Any = await raw.xrange(stream)
    assert [entry_id for entry_id, _ in entries] == [
        f"{ev['seq']}-0".encode() for ev in events[-5:]
    ]
    assert [unpackb(fields[b"e"]) for _, fields in entries] == events[-5:]


async def test_close_racing_a_burst_of_bets_accepts_none_after_it(table: Store) -> None:
    """200 concurrent bets racing close_betting: no bet lands after the close, money adds up."""
    players = [f"p{i}" for i in range(40)]
    for player in players:
        await table.ensure_player(player, 1_000)
    owner = await Owner(table).start()
    await owner.open()
    bets = [bet(table, players[i % 40], 100, ("player", "banker")[i % 2]) for i in range(200)]
    calls = [*bets[:100], owner.close(), *bets[100:]]
    results = await asyncio.gather(*calls, return_exceptions=True)
    outcomes = results[:100] + results[101:]
    accepted = [r for r in outcomes if isinstance(r, BetReceipt)]
    refused = [r for r in outcomes if isinstance(r, BetRejected)]
    assert len(accepted) + len(refused) == 200, [r for r in outcomes if isinstance(r, Exception)]
    assert all(r.code is RejectCode.BETTING_CLOSED for r in refused)
    # Exactly the accepted bets are the round's, the ones its settlement will pay.
    placed = await table.round_bets(TABLE, 1)
    assert sorted(b.bet_id for b in placed) == sorted(r.bet_id for r in accepted)
    assert (await table.bet_totals(TABLE, 1)).bets == len(accepted)
    ledger = await table.ledger()
    assert ledger.in_play == sum(r.amount for r in accepted) == 100 * len(accepted)
    assert ledger.balanced
    assert await table.last_seq(TABLE) == len(await table.events_after(TABLE, 0) or [])


async def test_a_cancel_redis_py_loses_in_a_write_still_ends_the_call(
    table: Store, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Issue 16, item 21: redis-py sends each command in asyncio.wait_for, which on Python
    3.11 returns the result and drops a cancel that arrives as the write completes. The hub's
    follower, cancelled so, blocked in XREAD again and again, and the node's stop (hub.close
    awaits it) never ended. The store now ends the call with the cancel it was given."""
    from redis.asyncio.connection import Connection

    send = Connection._send_packed_command
    victims: list[asyncio.Task[None]] = []

    async def cancel_as_the_write_completes(self: Connection, command: Any) -> None:
        await send(self, command)
        if victims and any(b"XREAD" in bytes(chunk) for chunk in command):
            victims.pop().cancel()

    monkeypatch.setattr(Connection, "_send_packed_command", cancel_as_the_write_completes)

    async def follow() -> None:
        async for _ in table.follow(TABLE, await table.last_seq(TABLE)):
            pass

    follower = asyncio.create_task(follow())
    victims.append(follower)
    try:  # not awaited directly: a timeout of this test would cancel it once more
        await asyncio.wait({follower}, timeout=10)
        assert not victims and follower.done(), "the lost cancel left it in XREAD for ever"
        assert follower.cancelled()
    finally:
        follower.cancel()


async def test_scripts_survive_a_script_cache_flush(table: Store, raw: Redis) -> None:
    """After SCRIPT FLUSH (as after a restart) the scripts are loaded again on demand."""
    owner = await Owner(table).start()
    await owner.open()
    await raw.script_flush()
    assert (await bet(table, "alice", 100, "player")).balance == 9_900


async def test_calls_of_one_loop_turn_share_one_write(table: Store, raw: Redis) -> None:
    """Concurrent calls go to Redis together (one write per turn of the loop, at most
    BATCH_MAX each, on one connection), and every caller still gets its own answer:
    receipts, refusals of each kind, reads, a script flushed meanwhile."""
    assert isinstance(table, RedisStore)
    link = table._batcher.link

    players = [f"q{i}" for i in range(50)]
    for player in players:
        await table.ensure_player(player, 1_000)
    owner = await Owner(table).start()
    await owner.open()
    await raw.script_flush()  # the first batch finds no script: each call loads it again
    writes = link.writes
    calls: list[Any] = [bet(table, player, 300) for player in players]  # 50 accepted
    calls += [bet(table, "q0", 800, "banker")]  # more than the balance left
    calls += [bet(table, "q1", 100, round_no=7)]  # another round
    calls += [bet(table, "q2", 100, "nowhere")]  # no such spot
    calls += [table.balance("q3"), table.now_ms(), table.head(TABLE)]
    results = await asyncio.gather(*calls, return_exceptions=True)
    assert link.writes - writes == 1
    assert all(isinstance(r, BetReceipt) and r.balance == 700 for r in results[:50]), results
    codes = [r.code for r in results[50:53] if isinstance(r, BetRejected)]
    assert codes == [RejectCode.INSUFFICIENT_FUNDS, RejectCode.WRONG_ROUND, RejectCode.UNKNOWN_SPOT]
    balance, now, head = results[53:]
    assert balance == 1_000  # read in the same pipeline as the bet, which may come first
    assert isinstance(now, int) and now > 0 and head == (await table.head(TABLE))
    writes = link.writes
    many = await asyncio.gather(*(table.balance(p) for p in players * 6))  # 300 calls
    assert many == [700] * 300 and link.writes - writes == 2  # BATCH_MAX is 256
    assert (await table.ledger()).balanced


async def test_the_table_loops_reads_go_in_the_turns_write(table: Store) -> None:
    """What the table loop reads every few steps (a round's totals, whether the table is
    there when it has none, a pause request) goes in the turn's pipeline: one write for the
    totals with or without bets, none through the pooled client; an unknown table is still
    refused."""
    assert isinstance(table, RedisStore)
    link = table._batcher.link
    owner = await Owner(table).start()
    await owner.open()
    writes = link.writes
    assert await table.bet_totals(TABLE, owner.state.round) == BetTotals()
    assert link.writes - writes == 1
    await bet(table, "alice", 100, "player")
    writes = link.writes
    totals = await table.bet_totals(TABLE, owner.state.round)
    assert (totals.bets, totals.bettors, totals.totals["player"]) == (1, 1, 100)
    assert link.writes - writes == 1
    writes = link.writes
    assert not await table.paused(TABLE)
    assert link.writes - writes == 1
    with pytest.raises(BetRejected) as refused:
        await table.bet_totals("nope", 1)
    assert refused.value.code is RejectCode.UNKNOWN_TABLE


@pytest.mark.parametrize("protocol", [2, 3])
async def test_follow_and_the_loops_reads_take_either_protocols_replies(
    redis_url: str, protocol: int
) -> None:
    """The follower's XREAD and the pipelined HGETALL are read as Redis sent them: a map in
    RESP3, a flat array in RESP2 (a URL may ask for either)."""
    prefix = f"test-{uuid.uuid4().hex[:12]}"
    sep = "&" if "?" in redis_url else "?"
    store = RedisStore.from_url(f"{redis_url}{sep}protocol={protocol}", key_prefix=prefix)
    follower = store.follow(TABLE, 0)
    try:
        await store.create_table(TABLE, RULES)
        await store.ensure_player("alice", 10_000)
        owner = await Owner(store).start()
        opened = await owner.open()
        assert await take(follower, len(opened)) == opened
        await bet(store, "alice", 100, "player")
        assert (await store.bet_totals(TABLE, owner.state.round)).totals["player"] == 100
        shown = await owner.publish()
        assert await take(follower, len(shown)) == shown
    finally:
        await follower.aclose()  # type: ignore[attr-defined]
        await store.close()
        await delete_keys(redis_url, [prefix])


async def test_bets_of_one_loop_turn_go_as_one_script_per_table(table: Store, raw: Redis) -> None:
    """Bets placed together go to Redis as one place_bet script per table (at most
    BET_BATCH_MAX bets each), judged one after the other: a bet_id repeated within a batch is
    debited once, and every bet gets its own answer."""
    assert isinstance(table, RedisStore)
    await table.create_table("t2", RULES)
    players = [f"b{i}" for i in range(100)]
    for player in players:
        await table.ensure_player(player, 1_000)
    for table_id in (TABLE, "t2"):
        await (await Owner(table, table_id).start()).open()

    async def scripts_run() -> int:
        stats = await raw.info("commandstats")
        return int(stats["cmdstat_evalsha"]["calls"])

    before = await scripts_run()
    calls: list[Any] = [bet(table, player, 100) for player in players]  # 100 on t1
    calls += [bet(table, "b0", 100, bet_id="twice"), bet(table, "b0", 100, bet_id="twice")]
    calls += [bet(table, player, 200, table_id="t2") for player in players[50:60]]
    calls += [bet(table, "b1", 100, table_id="nowhere")]
    results = await asyncio.gather(*calls, return_exceptions=True)
    # t1: 102 bets in 2 scripts (BET_BATCH_MAX is 64), t2: 1, the unknown table: 1.
    assert await scripts_run() - before == 4
    assert [r.balance for r in results[:100]] == [900] * 100  # type: ignore[union-attr]
    first, again = results[100:102]
    assert isinstance(first, BetReceipt) and again == first and first.balance == 800
    assert [r.balance for r in results[102:112]] == [700] * 10  # type: ignore[union-attr]
    unknown = results[112]
    assert isinstance(unknown, BetRejected) and unknown.code is RejectCode.UNKNOWN_TABLE
    assert await table.balance("b0") == 800 and await table.balance("b50") == 700
    totals = await table.bet_totals(TABLE, 1)
    assert (totals.totals["player"], totals.bettors) == (10_100, 100)
    assert (await table.ledger()).balanced


async def test_a_batch_whose_stakes_pass_2_53_keeps_exact_sums(redis_url: str) -> None:
    """Lua's numbers are doubles: a batch's running sums are written before they would pass
    2**53, so the ledger and the round's totals stay exact (each bet alone always was)."""
    huge = SpotLimit(1, 2**53 - 1)
    rules = TableRules("huge", limits=TableLimits({Spot.PLAYER: huge, Spot.BANKER: huge}))
    store = RedisStore(redis_url, key_prefix=f"huge-{uuid.uuid4().hex[:8]}")
    try:
        await store.create_table(TABLE, rules)
        a, b = 2**52 + 1, 2**52 + 2
        await store.ensure_player("alice", a)
        await store.ensure_player("bob", b)
        owner = await Owner(store).start()
        owner.rules = rules
        await owner.open()
        before = await store.ledger()
        receipts = await asyncio.gather(  # one turn: one script call
            bet(store, "alice", a, bet_id="x1"), bet(store, "bob", b, bet_id="x2")
        )
        assert [r.balance for r in receipts] == [0, 0]
        after = await store.ledger()
        assert after.in_play - before.in_play == a + b
        assert before.balances - after.balances == a + b
        assert (await store.bet_totals(TABLE, 1)).totals["player"] == a + b
    finally:
        await store.close()


async def test_a_damaged_key_fails_only_its_bet_and_leaves_nothing_behind(
    table: Store, raw: Redis
) -> None:
    """Issue 16, item 1: with one player's in_play key of the wrong type, a batch of 10 bets
    whose 10th is that player's places the 9 others (each answered with its receipt) and
    refuses that one with StoreDataError having written nothing: no debit, no bet, no stake.
    A retry of its bet_id is refused the same way and debits nothing; once the key is mended
    it is placed once, and every retry after that gets the first receipt."""
    assert isinstance(table, RedisStore)
    players = [f"p{i}" for i in range(10)]
    for player in players:
        await table.ensure_player(player, 1_000)
    await (await Owner(table).start()).open()
    in_play = table._player_key("p9", "in_play")
    await raw.hset(in_play, "not", "a number")
    calls = [bet(table, player, 100, bet_id=f"b-{player}") for player in players]
    results = await asyncio.gather(*calls, return_exceptions=True)  # one batch
    assert [r.balance for r in results[:9]] == [900] * 9  # type: ignore[union-attr]
    assert isinstance(results[9], StoreDataError), results[9]
    for _ in range(2):  # the retry of the refused bet moves nothing either
        with pytest.raises(StoreDataError):
            await bet(table, "p9", 100, bet_id="b-p9")
    assert await table.balance("p9") == 1_000
    assert [b.player for b in await table.round_bets(TABLE, 1)] == players[:9]
    assert (await table.bet_totals(TABLE, 1)).totals == {"player": 900}
    assert await raw.hgetall(in_play) == {b"not": b"a number"}
    assert (await table.ledger()).balanced
    assert await bet(table, "p0", 100, bet_id="b-p0") == results[0]  # its first receipt
    await raw.delete(in_play)  # mended: the bet goes through, once
    placed = await bet(table, "p9", 100, bet_id="b-p9")
    assert placed.balance == 900 and await bet(table, "p9", 100, bet_id="b-p9") == placed
    assert await table.balance("p9") == 900 and int(await raw.get(in_play)) == 100
    assert (await table.ledger()).balanced


@pytest.mark.parametrize(
    "damage",
    [
        "balance_hash",
        "balance_text",
        "in_play_text",
        "in_play_top",
        "stake_text",
        "all_stake_hash",
        "legacy_stake_text",
        "bettors_hash",
        "totals_text",
        "ledger_text",
        "mine_hash",
        "audit_text",
        "receipts_list",
        "receipt_keys_hash",
    ],
)
async def test_every_damaged_value_a_bet_writes_refuses_it_before_any_write(
    table: Store, raw: Redis, damage: str
) -> None:
    """Whatever value a bet would write to is checked first: the bet is refused with
    StoreDataError and Redis holds exactly what it held before."""
    assert isinstance(table, RedisStore)
    await (await Owner(table).start()).open()
    await bet(table, "alice", 100, bet_id="first")  # so the round's keys exist
    prefix = f"{table.key_prefix}:{{t:{TABLE}}}:"
    ledger = f"{table.key_prefix}:ledger"
    if damage == "balance_hash":
        await raw.delete(table._player_key("bob", "balance"))
        await raw.hset(table._player_key("bob", "balance"), "not", "a number")
    elif damage == "balance_text":
        await raw.set(table._player_key("bob", "balance"), "5000.5")
    elif damage == "in_play_text":
        await raw.set(table._player_key("bob", "in_play"), "12abc")
    elif damage == "in_play_top":
        await raw.set(table._player_key("bob", "in_play"), str(2**63 - 1))
    elif damage == "stake_text":
        await raw.hset(prefix + "stake:1:bob", "player", "lots")
    elif damage == "all_stake_hash":
        await raw.set(prefix + "stake:1:bob", "not a hash")
    elif damage == "legacy_stake_text":  # a round open across the upgrade: its stakes hash
        await raw.hset(prefix + "stakes:1", "player:bob", "lots")
    elif damage == "bettors_hash":
        await raw.delete(prefix + "bettors:1")
        await raw.hset(prefix + "bettors:1", "not", "a list")
    elif damage == "totals_text":
        await raw.hset(prefix + "totals:1", "player", "x")
    elif damage == "ledger_text":
        await raw.hset(ledger, "in_play", str(2**63 - 50))  # the next 100 would overflow it
    elif damage == "audit_text":  # the audit log's XADD would fail after the debit
        await raw.set(table._player_key("bob", "audit"), "not a stream")
    elif damage == "receipts_list":  # read first: the lookup fails, before any write
        await raw.delete(prefix + "bet_receipts")
        await raw.rpush(prefix + "bet_receipts", "not a hash")
    elif damage == "receipt_keys_hash":  # written last, with the round's list of bets
        await raw.delete(prefix + "receipt_keys:1")
        await raw.hset(prefix + "receipt_keys:1", "not", "a list")
    else:
        await raw.hset(prefix + "mine:1:bob", "not", "a list")
    before = {key: await raw.dump(key) async for key in raw.scan_iter(f"{table.key_prefix}:*")}
    with pytest.raises(StoreDataError):
        await bet(table, "bob", 100, bet_id="b1")
    after = {key: await raw.dump(key) async for key in raw.scan_iter(f"{table.key_prefix}:*")}
    assert after == before


async def _dumps(raw: Redis, store: RedisStore) -> dict[bytes, bytes | None]:
    """Every key of the store, serialized: equal dumps mean nothing was written."""
    return {key: await raw.dump(key) async for key in raw.scan_iter(f"{store.key_prefix}:*")}


@pytest.mark.parametrize("damage", ["history", "in_play", "house", "stream", "audit"])
async def test_a_commit_that_cannot_write_a_value_writes_nothing(
    table: Store, raw: Redis, damage: str
) -> None:
    """Settling with one value the commit would write damaged (a paid player's history or
    in_play of the wrong type, the ledger's house one payout from 2**63, a stream already past
    the next seq) raises StoreDataError and leaves Redis exactly as it was: the state, the
    balances, the ledger and the events. Once mended, the same settlement goes through."""
    assert isinstance(table, RedisStore)
    owner = await Owner(table, seed=4).start()  # its first shoe: a Banker win
    await owner.open()
    await bet(table, "alice", 1_000, "player")
    await bet(table, "bob", 1_000, "banker")
    await owner.close()
    await owner.deal()
    key = {
        "history": table._player_key("bob", "history"),
        "in_play": table._player_key("bob", "in_play"),
        "house": f"{table.key_prefix}:ledger",
        "stream": f"{table.key_prefix}:{{t:{TABLE}}}:stream",
        "audit": table._player_key("bob", "audit"),
    }[damage]
    saved = await raw.dump(key)
    if damage == "house":
        await raw.hset(key, "house", str(2**63 - 500))  # a lost bet's 1,000 would overflow
        await raw.hset(key, "balances", str(-(2**63) + 500))  # a win's 1,000 would too
    elif damage == "stream":
        await raw.xadd(key, {"e": b"x"}, id="999999-0")
    else:
        await raw.delete(key)
        await raw.hset(key, "not", "a list")
    before = await _dumps(raw, table)
    with pytest.raises(StoreDataError):
        await owner.settle()
    assert await _dumps(raw, table) == before
    await raw.delete(key)
    if saved is not None:
        await raw.restore(key, 0, saved)
    await owner.settle()
    assert await table.settlement(TABLE, 1, "bob") is not None
    assert (await table.ledger()).balanced


@pytest.mark.parametrize("damage", ["movements", "moves", "balance", "ledger", "audit"])
async def test_a_movement_that_cannot_write_a_value_moves_nothing(
    store: Store, raw: Redis, damage: str
) -> None:
    """An operator credit with a key it would write damaged raises StoreDataError and leaves
    Redis exactly as it was (before: the balance and the ledger moved, no movement kept)."""
    assert isinstance(store, RedisStore)
    await store.move_money("alice", 500, "k-0")
    if damage == "ledger":
        await raw.hset(f"{store.key_prefix}:ledger", "operator_in", "lots")
    elif damage == "balance":
        await raw.set(store._player_key("alice", "balance"), "500.0")
    else:
        await raw.delete(store._player_key("alice", damage))
        await raw.set(store._player_key("alice", damage), "not a collection")
    before = await _dumps(raw, store)
    with pytest.raises(StoreDataError):
        await store.move_money("alice", 100, "k-1")
    assert await _dumps(raw, store) == before


async def test_a_new_player_with_a_damaged_ledger_is_not_created(store: Store, raw: Redis) -> None:
    """ensure_player refuses with StoreDataError, creating nothing, when the ledger's issued
    is not an integer (before: the balance was set, the ledger failed)."""
    assert isinstance(store, RedisStore)
    await raw.hset(f"{store.key_prefix}:ledger", "issued", "x")
    before = await _dumps(raw, store)
    with pytest.raises(StoreDataError):
        await store.ensure_player("new", 1_000, 60_000)
    assert await _dumps(raw, store) == before


async def test_a_sweep_skips_a_guest_it_cannot_remove_whole(store: Store, raw: Redis) -> None:
    """A guest whose balance is not an integer is skipped, its keys untouched, and the sweep
    removes the others (before: the script failed, leaving the guests before it removed and
    stopping every later sweep there)."""
    assert isinstance(store, RedisStore)
    for name in ("g0", "g1", "g2"):
        await store.ensure_player(name, 1_000, 60_000)
    await raw.set(store._player_key("g1", "balance"), "1e3")
    assert await store.expire_guests(now_ms=await store.now_ms() + 120_000) == 2
    assert await raw.get(store._player_key("g1", "balance")) == b"1e3"
    assert await store.balance("g0") is None and await store.balance("g2") is None
    ledger = await store.ledger()
    assert (ledger.issued, ledger.expired, ledger.balances) == (3_000, 2_000, 1_000)


async def test_a_new_player_with_a_damaged_audit_log_is_not_created(
    store: Store, raw: Redis
) -> None:
    """ensure_player checks the audit log it appends `issue` to before its first write."""
    assert isinstance(store, RedisStore)
    await raw.set(store._player_key("new", "audit"), "not a stream")
    before = await _dumps(raw, store)
    with pytest.raises(StoreDataError):
        await store.ensure_player("new", 1_000, 60_000)
    assert await _dumps(raw, store) == before


async def test_a_sweep_skips_a_guest_whose_audit_log_is_damaged(store: Store, raw: Redis) -> None:
    """A guest whose audit log is not a stream is skipped whole (its `expire` entry could not
    be written): its balance stays, and the ledger counts nothing as expired."""
    assert isinstance(store, RedisStore)
    for name in ("g0", "g1"):
        await store.ensure_player(name, 1_000, 60_000)
    await raw.delete(store._player_key("g1", "audit"))
    await raw.set(store._player_key("g1", "audit"), "not a stream")
    assert await store.expire_guests(now_ms=await store.now_ms() + 120_000) == 1
    assert await store.balance("g1") == 1_000
    assert (await store.ledger()).expired == 1_000  # g0's only
    assert [e.kind for e in await store.audit("g0")] == ["issue", "expire"]


async def test_unreachable_redis_raises_store_unavailable(own_server: RedisProcess) -> None:
    """With Redis down every call raises StoreUnavailable; after a restart the store works."""
    store = RedisStore.from_url(own_server.url)
    try:
        await store.create_table(TABLE, RULES)
        assert await store.ensure_player("alice", 500) == 500
        own_server.stop()
        for call in (
            store.balance("alice"),
            store.now_ms(),
            store.place_bet(TABLE, "alice", 1, "b1", "player", 100),
            store.events_after(TABLE, 0),
            store.ledger(),
        ):
            with pytest.raises(StoreUnavailable):
                await call
        own_server.restart()  # same port, empty: nothing was persisted
        assert await store.balance("alice") is None
        await store.create_table(TABLE, RULES)
        assert await store.ensure_player("alice", 700) == 700
        assert (await store.ledger()).balanced
    finally:
        await store.close()


async def test_follow_raises_store_unavailable_when_redis_stops(own_server: RedisProcess) -> None:
    """A follower blocked in XREAD sees StoreUnavailable, not a raw redis error."""
    store = RedisStore.from_url(own_server.url)
    follower = store.follow(TABLE, 0)
    try:
        await store.create_table(TABLE, RULES)
        owner = await Owner(store).start()
        opened = await owner.open()
        assert await take(follower, len(opened)) == opened
        waiting = asyncio.ensure_future(take(follower, 1))
        await asyncio.sleep(0)  # the follower is now blocked in XREAD
        own_server.stop()
        with pytest.raises(StoreUnavailable):
            await waiting
    finally:
        await follower.aclose()  # type: ignore[attr-defined]
        await store.close()


async def test_a_forgotten_round_leaves_no_key(make_store: StoreFactory, raw: Redis) -> None:
    """Everything a round leaves (events, settlements, bets, stakes, totals, receipts and
    their index entries) is deleted with its archive: nothing grows per player or per bet."""
    store = await make_store(history_rounds=2)
    await store.create_table(TABLE, RULES)
    await store.ensure_player("alice", 10_000)
    owner = await Owner(store).start()
    for round_no in (1, 2, 3):
        await owner.open()
        await bet(store, "alice", 100, "player", round_no=round_no, bet_id=f"a{round_no}")
        await owner.finish()
    prefix = f"{prefix_of(store)}:{{t:{TABLE}}}:"
    keys = {k.removeprefix(prefix) for k in await keys_of(raw, store)}
    assert not {k for k in keys if k.split(":")[1:2] == ["1"]}  # round:1, mine:1:alice, ...
    assert {"round:3", "bets:3", "bettors:3", "totals:3", "receipt_keys:3", "settle:3"} <= keys
    assert {"mine:3:alice", "stake:3:alice"} <= keys
    receipts = await raw.hgetall(prefix + "bet_receipts")
    assert sorted(receipts) == [b"5:alice:a2", b"5:alice:a3"]
    assert [unpackb(receipts[b"5:alice:a" + r])[1] for r in (b"2", b"3")] == [2, 3]
    assert await raw.lrange(prefix + "receipt_keys:3", 0, -1) == [b"5:alice:a3"]


async def test_receipts_of_the_older_layout_still_answer_and_go_with_their_round(
    make_store: StoreFactory, raw: Redis
) -> None:
    """Before the receipts were one table-wide hash (`bet_receipts`), a bet's round was kept
    in `receipt_rounds` and its receipt in `receipts:<r>`. A bet_id placed by the older
    version gets that receipt and debits nothing; forgetting its round deletes both keys."""
    store = await make_store(history_rounds=1)
    await store.create_table(TABLE, RULES)
    await store.ensure_player("alice", 10_000)
    owner = await Owner(store).start()
    await owner.open()
    prefix = f"{prefix_of(store)}:{{t:{TABLE}}}:"
    placed = await bet(store, "alice", 100, "player", bet_id="new")
    # the same bet as the older version would have recorded it, under another bet_id
    older = packb([TABLE, 1, "old", "player", 100, 9_900])
    await raw.hset(prefix + "receipt_rounds", "5:alice:old", "1")
    await raw.hset(prefix + "receipts:1", "5:alice:old", older)
    again = await bet(store, "alice", 100, "player", bet_id="old")
    assert (again.bet_id, again.balance) == ("old", 9_900)
    assert await bet(store, "alice", 100, "player", bet_id="new") == placed
    assert await store.balance("alice") == 9_900
    await owner.finish()
    await owner.open()  # round 2 pushes round 1 out
    keys = {k.removeprefix(prefix) for k in await keys_of(raw, store)}
    assert not keys & {"receipt_rounds", "receipts:1", "bet_receipts", "receipt_keys:1"}
    with pytest.raises(BetRejected) as refused:
        await bet(store, "alice", 100, "player", round_no=1, bet_id="old")
    assert refused.value.code is RejectCode.WRONG_ROUND


async def test_a_round_open_across_the_upgrade_keeps_its_older_stakes(
    make_store: StoreFactory, raw: Redis
) -> None:
    """Before each player's stakes had a hash of their own (`stake:<r>:<player>`), a round
    kept them all in `stakes:<r>` (`<spot>:<player>`, `all:<player>`). A round open across
    the upgrade goes on counting them: the limits see the older stake, a bettor is not
    counted twice, and forgetting the round deletes both layouts' keys."""
    store = await make_store(history_rounds=1)
    await store.create_table(TABLE, RULES)
    await store.ensure_player("alice", 10_000)
    owner = await Owner(store).start()
    await owner.open()
    prefix = f"{prefix_of(store)}:{{t:{TABLE}}}:"
    # alice's 900 on player placed by the older version (its mine list too)
    await raw.hset(prefix + "stakes:1", mapping={"player:alice": 900, "all:alice": 900})
    await raw.rpush(prefix + "mine:1:alice", b"older")
    with pytest.raises(BetRejected) as refused:
        await bet(store, "alice", 200, "player")  # 900 + 200 is past the spot's 1,000
    assert refused.value.code is RejectCode.LIMIT
    await bet(store, "alice", 100, "player")
    await bet(store, "alice", 100, "banker")
    assert (await store.bet_totals(TABLE, 1)).bettors == 0  # counted by the older version
    assert await raw.hgetall(prefix + "stake:1:alice") == {
        b"player": b"1000",
        b"banker": b"100",
        b"all": b"1100",
    }
    await owner.finish()
    await owner.open()  # round 2 pushes round 1 out
    keys = {k.removeprefix(prefix) for k in await keys_of(raw, store)}
    assert not {k for k in keys if k.split(":")[1:2] == ["1"]}


# --- players: guests, movements, history ---------------------------------------------------


async def _footprint(raw: Redis, store: Store) -> tuple[list[str], int, list[bytes]]:
    """The store's keys, the bytes Redis says they take (MEMORY USAGE) but the ledger's, and
    the ledger's fields (its counters' values only grow in digits, never in number). The
    players' audit logs are left out: they outlive the players (see _audit_logs)."""
    keys = [key for key in await keys_of(raw, store) if not key.endswith("}:audit")]
    ledger = f"{prefix_of(store)}:ledger"
    sizes = [await raw.memory_usage(key, samples=0) or 0 for key in keys if key != ledger]
    return keys, sum(sizes), sorted(await raw.hkeys(ledger))


async def test_a_thousand_guest_visits_leave_redis_no_bigger(table: Store, raw: Redis) -> None:
    """1,000 connect/disconnect cycles (a guest each, some with operator money) leave the same
    keys taking no more memory once the guests expired, and the ledger balanced; but for each
    guest's audit log, which expires by itself once it has kept its entries audit_keep_ms."""
    store = table  # a table and two players that stay
    await store.ensure_player("warm-up", 1_000, guest_ttl_ms=1)  # the ledger's fields exist
    await store.move_money("warm-up", 1, "k")
    assert await store.expire_guests(now_ms=await store.now_ms() + 10) == 1
    before, db_before = await _footprint(raw, store), await raw.dbsize()
    for i in range(1_000):
        await store.ensure_player(f"guest-{i}", 1_000_000, guest_ttl_ms=5)
        if i % 100 == 0:
            await store.move_money(f"guest-{i}", 500, f"k-{i}")
    assert len(await keys_of(raw, store)) > 1_000  # a balance each while they were around
    assert await store.expire_guests(now_ms=await store.now_ms() + 10) == 1_000
    keys, size, ledger_fields = await _footprint(raw, store)
    assert keys == before[0] and ledger_fields == before[2]
    assert size <= before[1]
    assert await raw.dbsize() == db_before + 1_000
    logs = [key for key in await keys_of(raw, store) if key.endswith("}:audit")]
    assert len(logs) == 1_000 + 3  # and alice's, bob's and warm-up's
    for log in logs:
        assert 0 < await raw.pttl(log) <= DEFAULT_AUDIT_KEEP_MS
    ledger = await store.ledger()
    assert ledger.balanced and ledger.balances == 15_000  # alice's and bob's
    assert ledger.expired == ledger.issued - 15_000 + ledger.operator_in - ledger.operator_out


async def test_guest_and_wallet_keys(table: Store, raw: Redis) -> None:
    """A player's keys share {p:<player>}; guests are one sorted set of expiries and one hash
    of TTLs; a stake in play has a key only while it is in play; expiry deletes them all."""
    prefix = prefix_of(table)
    owner = await Owner(table).start()
    await owner.open()
    await table.ensure_player("g", 1_000, guest_ttl_ms=60_000)
    await bet(table, "g", 100)
    await table.move_money("g", 5, "k-1")
    mine = [k for k in await keys_of(raw, table) if "{p:g}" in k]
    assert mine == [f"{prefix}:{{p:g}}:{kind}" for kind in sorted(KINDS_WHILE_PLAYING)]
    assert len({key_slot(k.encode()) for k in mine}) == 1
    expiry = await raw.zscore(f"{prefix}:guests", "g")
    assert expiry is not None and expiry > await table.now_ms()
    assert await raw.hget(f"{prefix}:guest_ttl", "g") == b"60000"
    await owner.finish()
    assert await raw.exists(f"{prefix}:{{p:g}}:in_play") == 0
    assert await table.expire_guests(now_ms=int(expiry)) == 1
    # but the audit log, which ends with the expiry and stays for audit_keep_ms
    assert [k for k in await keys_of(raw, table) if "{p:g}" in k] == [f"{prefix}:{{p:g}}:audit"]
    assert 0 < await raw.pttl(f"{prefix}:{{p:g}}:audit") <= DEFAULT_AUDIT_KEEP_MS
    assert await raw.exists(f"{prefix}:guests", f"{prefix}:guest_ttl") == 0


KINDS_WHILE_PLAYING = ("audit", "balance", "in_play", "movements", "moves", "move_keys")


async def test_a_sweep_goes_past_guests_with_stakes_in_play(
    table: Store, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Guests kept for a stake in play do not stop a sweep: it pages past them, batch by
    batch, and removes every other due guest."""
    monkeypatch.setattr("server.store.redis_guests.EXPIRE_BATCH", 2)
    owner = await Owner(table).start()
    await owner.open()
    for i in range(3):  # due first, and playing
        await table.ensure_player(f"playing-{i}", 1_000, guest_ttl_ms=1)
        await bet(table, f"playing-{i}", 100)
    for i in range(5):
        await table.ensure_player(f"idle-{i}", 1_000, guest_ttl_ms=2)
    later = await table.now_ms() + 1_000
    assert await table.expire_guests(now_ms=later) == 5
    await owner.finish()
    assert await table.expire_guests(now_ms=later) == 3
    assert (await table.ledger()).balanced


@pytest.mark.parametrize(
    "args",
    [
        ("EVALSHA", "ab12", 2, "k1", "k2", "", 100, b"\x00\xffbin", "é"),
        ("CLIENT SETINFO", "LIB-NAME", "redis-py"),
        (b"HMGET", b"key", "f1", "f2"),
        ("SET", "k", 2.5),
    ],
    ids=["script", "two-word-command", "bytes", "float"],
)
def test_commands_are_packed_as_redis_py_packs_them(args: tuple[Any, ...]) -> None:
    """The C packer writes the very bytes redis-py's own packer writes."""
    from redis.asyncio import Connection

    from server.store.redis_client import PackingConnection as _Connection

    ours, theirs = _Connection(), Connection()
    assert b"".join(ours.pack_command(*args)) == b"".join(theirs.pack_command(*args))
    pair = [args, ("PING",)]
    assert b"".join(ours.pack_commands(pair)) == b"".join(theirs.pack_commands(pair))
