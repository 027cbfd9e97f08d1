"""The protocol's typed shapes: they cover every message and event kind, their constructors build
today's exact wire, the documented examples fit them, and the runtime checker is exact."""

from __future__ import annotations

import json
import random
import re
from pathlib import Path
from typing import Any, Literal, get_args, get_type_hints

import pytest

from server.core import events
from server.core.bets import Bet, BetTotals, Outcome, Payout, Spot
from server.core.cards import parse_card
from server.core.events import EventKind
from server.core.roads import build_roads, parse_results
from server.core.rules import PRESETS, TableRules
from server.core.table import (
    Phase,
    TableState,
    close_betting,
    coup_of,
    deal_next_card,
    open_round,
    publish_totals,
    settle_round,
    void_round,
)
from server.wire import shapes
from server.wire.envelope import stamp
from server.wire.shape_check import message_problems, payload_problems, shape_problems
from tests.wire.today import problems_today

DOCS = Path(__file__).resolve().parents[2] / "docs" / "protocol.md"
RULES = PRESETS["classic8"]


def _literal(shape: type, key: str) -> str:
    """The single literal value a shape's key must have (its `type` or `kind`)."""
    hint = get_type_hints(shape)[key]
    (value,) = get_args(hint)
    assert isinstance(value, str)
    return value


# --- coverage ---------------------------------------------------------------------------------


def test_every_message_type_has_its_shape() -> None:
    """SERVER_MESSAGES maps each type name to the shape whose `type` literal is that name."""
    assert {name: _literal(shape, "type") for name, shape in shapes.SERVER_MESSAGES.items()} == {
        name: name for name in shapes.SERVER_MESSAGES
    }
    assert set(shapes.SERVER_MESSAGES) == {
        "welcome", "snapshot", "joined", "left", "pong", "error", "bet_accepted",
        "bet_rejected", "settlement", "balance", "replay", "history",
    }  # fmt: skip


def test_every_core_event_kind_has_its_shape() -> None:
    """Each kind the core emits has an event and a payload shape."""
    kinds = {kind.value for kind in EventKind}
    assert set(shapes.EVENTS) == kinds
    assert set(shapes.EVENT_PAYLOADS) == kinds
    for kind in kinds:
        assert _literal(shapes.EVENTS[kind], "kind") == kind
        assert _literal(shapes.EVENT_PAYLOADS[kind], "kind") == kind
        assert _literal(shapes.EVENTS[kind], "type") == "event"


def test_event_keys_come_envelope_first() -> None:
    """An event's keys are in wire order: type, table, seq, round, ts, kind, then the payload."""
    for kind, shape in shapes.EVENTS.items():
        payload_keys = list(shapes.EVENT_PAYLOADS[kind].__annotations__)
        assert list(shape.__annotations__) == ["type", "table", "seq", "round", "ts", *payload_keys]


def test_optional_keys_are_really_optional() -> None:
    """Only welcome.token, snapshot.recovered and error.ref may be absent."""
    optional = {
        name: set(shape.__optional_keys__)  # type: ignore[attr-defined]
        for name, shape in shapes.SERVER_MESSAGES.items()
        if shape.__optional_keys__  # type: ignore[attr-defined]
    }
    assert optional == {"welcome": {"token"}, "snapshot": {"recovered"}, "error": {"ref"}}


# --- constructors build today's wire ----------------------------------------------------------


@pytest.mark.parametrize("rules", PRESETS.values(), ids=lambda r: r.name)
def test_rules_view_is_rules_to_dict(rules: TableRules) -> None:
    """rules_view is exactly TableRules.to_dict(), key order included; table_info adds id first."""
    view = shapes.rules_view(rules)
    assert list(view.items()) == list(rules.to_dict().items())
    assert list(shapes.table_info("t1", rules).items()) == [("id", "t1"), *view.items()]
    assert shape_problems(view, shapes.RulesView) == []


@pytest.mark.parametrize("results", ["", "B", "BPPBTBBBPPPTTB", "PPPPPPPPBBBB"])
def test_roads_view_is_roads_to_dict(results: str) -> None:
    """roads_view is Roads.to_dict() and fits RoadsView."""
    roads = build_roads(parse_results(results))
    assert shapes.roads_view(roads) == roads.to_dict()
    assert shape_problems(shapes.roads_view(roads), shapes.RoadsView) == []


def test_piece_constructors() -> None:
    """Cards, bets and payouts as the wire shows them."""
    assert shapes.card_view("player", parse_card("Kh")) == {
        "hand": "player",
        "rank": "K",
        "suit": "h",
    }
    assert shapes.card_view("banker", parse_card("10")) == {
        "hand": "banker",
        "rank": "10",
        "suit": None,
    }
    assert shapes.bet_view(Bet("b-1", "alice", Spot.TIE, 50)) == {
        "bet_id": "b-1",
        "spot": "tie",
        "amount": 50,
    }
    payout = Payout("b-1", "alice", Spot.BANKER, 1000, Outcome.WIN, 1950)
    assert list(shapes.payout_view(payout).items()) == list(payout.to_dict().items())


def test_bet_accepted_and_settlement_keys_in_order() -> None:
    """bet_accepted and settlement (the answers to a bet and to its round), in key order."""
    built = shapes.bet_accepted("t1", 2, "b-1", "banker", 1000, 999_000)
    assert list(built.items()) == [
        ("type", "bet_accepted"),
        ("table", "t1"),
        ("round", 2),
        ("bet_id", "b-1"),
        ("spot", "banker"),
        ("amount", 1000),
        ("balance", 999_000),
    ]
    payouts = [shapes.payout_view(Payout("b-1", "a", Spot.TIE, 100, Outcome.LOSE, 0))]
    assert list(shapes.settlement("t1", 2, payouts, 5).items()) == [
        ("type", "settlement"),
        ("table", "t1"),
        ("round", 2),
        ("payouts", payouts),
        ("balance", 5),
    ]


@pytest.mark.parametrize("ref", [None, "r1", 7])
def test_error_carries_ref_only_when_there_is_one(ref: str | int | None) -> None:
    """error(): type, code, message, then ref only when there is one."""
    expected = [("type", "error"), ("code", "BAD_FIELD"), ("message", "m")]
    expected += [("ref", ref)] if ref is not None else []
    assert list(shapes.error("BAD_FIELD", "m", ref).items()) == expected


def test_small_message_constructors() -> None:
    """joined, left, pong, bet_rejected, replay and history, each fitting its shape."""
    built = [
        shapes.joined("t1", 3, "e1"),
        shapes.left("t1"),
        shapes.pong(None, 5),
        shapes.pong("p", 5),
        shapes.bet_rejected("b-1", "t1", "NOT_A_PLAYER", "spectators cannot bet"),
        shapes.replay("t1", 1, [], more=False),
        shapes.history([]),
    ]
    for message in built:
        assert message_problems(message) == []
    assert list(built[4]) == ["type", "bet_id", "table", "code", "message"]


def test_welcome_constructor() -> None:
    """welcome lists every table with its rules, the role, and the token only when given."""
    tables = {"t1": RULES}
    plain = shapes.welcome("alice", 10, tables, "baccarat.v1.json", "n1", "player", name="Alice")
    assert list(plain) == [
        *("type", "player", "name", "balance", "tables", "encoding", "node", "role"),
    ]
    assert plain["name"] == "Alice"
    assert plain["tables"] == [{"id": "t1", **RULES.to_dict()}]
    guest = shapes.welcome("guest-1", 10, tables, "baccarat.v1.json", "n1", "player", "tok")
    assert guest["token"] == "tok"
    watcher = shapes.welcome(None, None, tables, "baccarat.v1.msgpack", "n1", "spectator")
    for message in (plain, guest, watcher):
        assert message_problems(message) == []


def _dealing_state() -> TableState:
    state = open_round(TableState("t1"), RULES, 1_000, 5_000, random.Random(3).randbytes(32)).state
    state = close_betting(state).state
    for _ in range(3):
        state = deal_next_card(state).state
    return state


def test_snapshot_constructor_in_the_middle_of_a_deal() -> None:
    """snapshot builds the state's cards, roads and timing like the session does today."""
    state = _dealing_state()
    bets = [Bet("b-1", "alice", Spot.PLAYER, 100)]
    message = shapes.snapshot(
        "t1", 9, "e1", state, 2_000, RULES, bets, {"player": 100}, 1, 900, recovered=False
    )
    assert message_problems(message) == []
    assert message["phase"] == "dealing" and message["time_left_ms"] == 0
    assert message["cards"] == [
        shapes.card_view(hand, card) for hand, card in coup_of(state).deal_order[:3]
    ]
    assert message["roads"] == build_roads(state.results, state.pairs).to_dict()
    assert message["bets"] == [{"bet_id": "b-1", "spot": "player", "amount": 100}]
    assert (message["totals"], message["bettors"], message["recovered"]) == (
        {"player": 100},
        1,
        False,
    )
    assert list(message)[:4] == ["type", "table", "seq", "epoch"]


def test_snapshot_roads_carry_each_rounds_pairs() -> None:
    """The snapshot's road cells say which coups had a pair, from the state's pair codes;
    the fields that were there before keep their values."""
    state = TableState("t1", phase=Phase.SETTLED, round=4, results="BTPB", pairs="2130")
    roads = shapes.snapshot("t1", 9, "e1", state, 2_000, RULES)["roads"]
    assert shape_problems(roads, shapes.RoadsView) == []
    bead = [(c["winner"], c["player_pair"], c["banker_pair"]) for c in roads["bead_plate"]]
    assert bead == [
        ("banker", False, True),
        ("tie", True, False),
        ("player", True, True),
        ("banker", False, False),
    ]
    big = [(c["winner"], c["ties"], c["player_pair"], c["banker_pair"]) for c in roads["big_road"]]
    assert big == [
        ("banker", 1, False, True),
        ("player", 0, True, True),
        ("banker", 0, False, False),
    ]
    before = {"row", "col", "winner", "ties"}
    assert [{k: v for k, v in c.items() if k in before} for c in roads["big_road"]] == [
        {"row": 0, "col": 0, "winner": "banker", "ties": 1},
        {"row": 0, "col": 1, "winner": "player", "ties": 0},
        {"row": 0, "col": 2, "winner": "banker", "ties": 0},
    ]


def test_snapshot_constructor_while_betting_and_for_a_spectator() -> None:
    """time_left_ms counts down while betting; a spectator's snapshot has no balance."""
    state = open_round(TableState("t1"), RULES, 1_000, 5_000, random.Random(3).randbytes(32)).state
    message = shapes.snapshot("t1", 3, "e1", state, 2_000, RULES)
    assert (message["phase"], message["time_left_ms"], message["cards"]) == ("betting", 4_000, [])
    assert message["balance"] is None and "recovered" not in message
    assert message_problems(message) == []


def test_history_round_constructor() -> None:
    """A recalled round: table, round, time, bets, cards in deal order, totals, winner, payouts,
    balance after."""
    state = _dealing_state()
    coup = coup_of(state)
    bet = Bet("b-1", "alice", Spot.BANKER, 1000)
    payout = Payout("b-1", "alice", Spot.BANKER, 1000, Outcome.WIN, 1950)
    entry = shapes.history_round(
        "t1", 1, 1_234, [bet], coup.deal_order,
        {"player": coup.player_total, "banker": coup.banker_total},
        coup.winner.value, [shapes.payout_view(payout)], 10_950,
    )  # fmt: skip
    assert list(entry) == [
        "table", "round", "time", "bets", "cards", "totals", "winner", "payouts", "balance_after",
    ]  # fmt: skip
    assert len(entry["cards"]) == coup.cards_used
    assert message_problems(shapes.history([entry])) == []
    voided = shapes.history_round("t1", 2, 5, [], [], {"player": 0, "banker": 0}, None, [], 10)
    assert message_problems(shapes.history([entry, voided])) == []


def test_bet_totals_payload_keeps_only_spots_with_money() -> None:
    """bet_totals drops empty spots and fits its shape."""
    payload = events.bet_totals(totals={"player": 300, "tie": 0, "banker": 100}, bettors=2, bets=3)
    assert payload == {
        "kind": "bet_totals",
        "totals": {"player": 300, "banker": 100},
        "bettors": 2,
        "bets": 3,
    }
    assert payload_problems(payload) == []
    event = stamp("t1", 4, 1, 99, payload)
    assert list(event) == [
        "type",
        "table",
        "seq",
        "round",
        "ts",
        "kind",
        "totals",
        "bettors",
        "bets",
    ]
    assert message_problems(event) == []


# --- the core's payloads fit ------------------------------------------------------------------


def _core_payloads(seed: int, rules: TableRules) -> list[dict[str, Any]]:
    """Every payload of a few rounds (a void among them) played by the pure core."""
    rng = random.Random(seed)
    state, payloads = TableState("t1"), []
    bets = [Bet("b-1", "alice", Spot.PLAYER, 100), Bet("b-2", "bob", Spot.TIE, 100)]
    for round_no in range(1, 40):
        step = open_round(state, rules, 1_000 * round_no, 500, rng.randbytes(32))
        payloads += step.events
        totals = BetTotals.of({"player": 100, "tie": 100}, 2, 2)
        step = publish_totals(step.state, totals)
        payloads += step.events
        step = close_betting(step.state, totals if round_no % 2 else None)
        payloads += step.events
        state = step.state
        if round_no % 13 == 0:
            voided, _ = void_round(state, bets, "test")
            payloads += voided.events
            state = voided.state
            continue
        while state.dealt < coup_of(state).cards_used:
            step = deal_next_card(state)
            payloads += step.events
            state = step.state
        settled, _ = settle_round(state, rules, bets)
        payloads += settled.events
        state = settled.state
        assert state.phase is Phase.SETTLED
    return payloads


def test_core_payloads_fit_their_shapes() -> None:
    """What the core emits fits the payload shapes."""
    payloads = _core_payloads(5, TableRules("one", decks=1, cut_card_from_end=7))
    kinds = {payload["kind"] for payload in payloads}
    assert kinds >= {
        "shoe_shuffled", "burn", "round_opened", "betting_closed", "card", "round_result",
        "round_settled", "round_voided", "cut_card", "bet_totals",
    }  # fmt: skip
    for payload in payloads:
        assert payload_problems(payload) == [], payload


# --- the documented examples fit ----------------------------------------------------------------


def _documented_server_messages() -> list[dict[str, Any]]:
    """Every complete server message in docs/protocol.md's JSON examples (cut ones, with `...`,
    and client messages, marked `->` or of a client type, are left out)."""
    decoder = json.JSONDecoder()
    found: list[dict[str, Any]] = []
    for block in re.findall(r"```json\n(.*?)```", DOCS.read_text(), re.S):
        lines = []
        for line in block.splitlines(keepends=True):
            stripped = line.lstrip()
            if stripped.startswith("-> "):
                line = "\n"
            elif stripped.startswith("<- "):
                line = stripped[3:]
            lines.append(line)
        body, end = "".join(lines), 0
        for match in re.finditer(r"^\s*\{", body, re.M):
            if match.end() - 1 < end:
                continue  # inside an object already read
            try:
                message, end = decoder.raw_decode(body, match.end() - 1)
            except json.JSONDecodeError:
                continue
            found.append(message)
    server_types = set(shapes.SERVER_MESSAGES) | {"event"}
    return [
        m
        for m in found
        if m.get("type") in server_types and not (m["type"] == "replay" and "events" not in m)
    ]


DOCUMENTED = _documented_server_messages()


def test_the_docs_hold_examples_of_most_messages() -> None:
    """The extraction finds examples (so the check below is not vacuous)."""
    seen = {m["type"] for m in DOCUMENTED} | {m["kind"] for m in DOCUMENTED if "kind" in m}
    assert len(DOCUMENTED) >= 50
    assert seen >= {
        "welcome", "joined", "left", "pong", "error", "bet_accepted", "bet_rejected",
        "settlement", "card", "round_opened", "round_result", "round_settled", "round_voided",
        "cut_card", "burn", "shoe_shuffled", "betting_closed", "bet_totals",
    }  # fmt: skip


@pytest.mark.parametrize(
    "message", DOCUMENTED, ids=lambda m: f"{m['type']}-{m.get('kind', m.get('seq', ''))}"
)
def test_documented_examples_fit_the_shapes(message: dict[str, Any]) -> None:
    """Each captured example in docs/protocol.md fits its shape (new fields aside)."""
    assert problems_today(message) == []


# --- the checker is exact ---------------------------------------------------------------------


CARD_EVENT: dict[str, Any] = {
    "type": "event",
    "table": "t1",
    "seq": 5,
    "round": 1,
    "ts": 1,
    "kind": "card",
    "hand": "player",
    "index": 0,
    "rank": "K",
    "suit": "s",
    "position": 9,
    "salt": "ab" * 32,
    "proof": ["L" + "cd" * 32],
}


@pytest.mark.parametrize(
    ("change", "problem"),
    [
        ({"seq": "5"}, "$.seq: expected int, got str '5'"),
        ({"seq": True}, "$.seq: expected int, got bool True"),
        ({"seq": 5.0}, "$.seq: expected int, got float 5.0"),
        ({"hand": "dealer"}, "$.hand: 'dealer' is not one of 'player', 'banker'"),
        ({"suit": 3}, "$.suit: 3 fits none of str | None"),
        ({"extra": 1}, "$: unexpected key 'extra'"),
        ({"kind": "dragon"}, "$.kind: unknown kind 'dragon'"),
    ],
)
def test_checker_finds_wrong_values(change: dict[str, Any], problem: str) -> None:
    """Wrong types (a bool is no int), wrong literals, extra keys and unknown kinds are found."""
    assert problem in message_problems({**CARD_EVENT, **change})


def test_checker_finds_missing_keys_and_nested_problems() -> None:
    """Missing keys, and problems inside lists and nested maps, are reported with a path."""
    without_rank = {k: v for k, v in CARD_EVENT.items() if k != "rank"}
    assert message_problems(without_rank) == ["$: missing 'rank'"]
    bad = {
        "type": "replay",
        "table": "t1",
        "round": 1,
        "events": [{**CARD_EVENT, "index": None}],
        "more": False,
    }
    assert message_problems(bad) == ["$.events[0].index: expected int, got NoneType None"]
    settle = shapes.settlement("t1", 1, [], 0)
    settle["payouts"] = [{"bet_id": "b", "spot": "tie", "amount": 1, "outcome": "won", "credit": 0}]  # type: ignore[typeddict-item]
    assert message_problems(settle) == [
        "$.payouts[0].outcome: 'won' is not one of 'win', 'lose', 'push'"
    ]


@pytest.mark.parametrize("junk", [[1, 2], "x", None, {"type": "hello"}, {"no": "type"}])
def test_checker_refuses_non_messages(junk: object) -> None:
    """Anything that is not a known server message has a problem."""
    assert message_problems(junk) != []


def test_checker_on_a_plain_type_form() -> None:
    """shape_problems works for non-TypedDict forms too (lists, maps, literals)."""
    assert shape_problems({"a": 1}, dict[str, int]) == []
    assert shape_problems({"a": "1"}, dict[str, int]) == ["$.a: expected int, got str '1'"]
    assert shape_problems([1, "x"], list[int]) == ["$[1]: expected int, got str 'x'"]
    assert shape_problems("red", Literal["red", "blue"]) == []
