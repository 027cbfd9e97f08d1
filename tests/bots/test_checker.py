"""The round checker on constructed streams: what it accepts and every kind of problem."""

from __future__ import annotations

from typing import Any

from server.bots.checker import ProblemKind, TableChecker
from tests.bots.streams import BANKER_WINS, PLAYER_NATURAL, TABLE, TIE, Stream


def feed(checker: TableChecker, events: list[dict[str, Any]]) -> list[Any]:
    problems = []
    for event in events:
        problems += checker.on_event(event)
    return problems


def kinds(problems: list[Any]) -> list[ProblemKind]:
    return [p.kind for p in problems]


def test_true_rounds_pass_and_are_counted() -> None:
    """Three real rounds (Banker draw, Player natural, Tie) raise nothing; all three checked."""
    checker, stream = TableChecker(TABLE), Stream()
    events = stream.round(1, BANKER_WINS) + stream.round(2, PLAYER_NATURAL) + stream.round(3, TIE)
    assert feed(checker, events) == []
    assert (checker.checked, checker.unchecked, checker.completed) == (3, 0, 3)
    assert checker.last_seq == events[-1]["seq"]
    coup = checker.view(1).coup  # type: ignore[union-attr]
    assert coup is not None and coup.banker_total == 7


def test_one_changed_card_is_a_mismatch() -> None:
    """A card changed on the way makes the result disagree with the cards received."""
    checker, stream = TableChecker(TABLE), Stream()
    events = stream.round(1, BANKER_WINS)
    card = next(e for e in events if e["kind"] == "card" and e["index"] == 0)
    card["rank"] = "9"  # the Player's first card: 0 becomes 9
    problems = feed(checker, events)
    assert problems and set(kinds(problems)) == {ProblemKind.MISMATCH}
    assert any("player_total" in p.detail for p in problems)


def test_a_wrong_result_field_is_a_mismatch() -> None:
    """round_result must say what the cards say: a wrong winner or pair flag is caught."""
    for field, value in (("winner", "player"), ("banker_pair", True), ("natural", True)):
        checker, stream = TableChecker(TABLE), Stream()
        events = stream.round(1, BANKER_WINS)
        next(e for e in events if e["kind"] == "round_result")[field] = value
        problems = feed(checker, events)
        assert any(field in p.detail for p in problems), field


def test_result_before_the_coup_is_complete() -> None:
    """A result after too few cards, or a card for the wrong hand, is a mismatch."""
    checker, stream = TableChecker(TABLE), Stream()
    events = stream.round(1, BANKER_WINS)
    events = [e for e in events if not (e["kind"] == "card" and e["index"] == 4)]
    for seq, event in enumerate(events, start=1):
        event["seq"] = seq
    assert any("after only 4 cards" in p.detail for p in feed(checker, events))

    checker, stream = TableChecker(TABLE), Stream()
    events = stream.round(1, TIE)
    next(e for e in events if e["kind"] == "card" and e["index"] == 1)["hand"] = "player"
    assert any("hands" in p.detail for p in feed(checker, events))


def test_card_index_and_extra_cards() -> None:
    """A card at the wrong index, or a card after the result, is a mismatch."""
    checker, stream = TableChecker(TABLE), Stream()
    events = stream.round(1, TIE)
    next(e for e in events if e["kind"] == "card" and e["index"] == 2)["index"] = 3
    assert any("index 3, expected 2" in p.detail for p in feed(checker, events))

    checker, stream = TableChecker(TABLE), Stream()
    events = stream.deal(1, TIE)
    events.append(stream.event(1, "card", hand="player", index=4, rank="2", suit="c"))
    assert any("after round_result" in p.detail for p in feed(checker, events))


def test_a_seq_jump_is_a_gap_and_the_round_is_not_judged() -> None:
    """Missing events are a gap; the round they hit cannot be judged (unchecked)."""
    checker, stream = TableChecker(TABLE), Stream()
    events = stream.round(1, BANKER_WINS)
    del events[3]  # a card
    problems = feed(checker, events)
    assert kinds(problems) == [ProblemKind.GAP]
    assert (checker.checked, checker.unchecked, checker.missed_events) == (0, 1, 1)


def test_a_repeated_seq_is_a_duplicate_and_ignored() -> None:
    """An event seen twice is counted once as a duplicate and not applied again."""
    checker, stream = TableChecker(TABLE), Stream()
    events = stream.round(1, TIE)
    events.insert(5, dict(events[4]))  # a card again
    problems = feed(checker, events)
    assert kinds(problems) == [ProblemKind.DUPLICATE]
    assert checker.checked == 1


def test_snapshot_mid_deal_seeds_the_cards() -> None:
    """Joining mid-deal: the snapshot's cards plus the rest of the deal are judged."""
    stream = Stream(seq=10)
    deal = stream.deal(4, BANKER_WINS)
    shown = [{"hand": e["hand"], "rank": e["rank"], "suit": e["suit"]} for e in deal[:2]]
    checker = TableChecker(TABLE)
    checker.on_join_sent()
    snapshot = {"type": "snapshot", "seq": deal[1]["seq"], "phase": "dealing", "round": 4}
    assert checker.on_snapshot({**snapshot, "cards": shown}) == []
    assert checker.on_joined({"type": "joined", "seq": deal[1]["seq"]}) == []
    assert checker.live
    assert feed(checker, deal[2:]) == []
    assert checker.checked == 1


def test_joining_mid_round_without_cards_is_unchecked_not_wrong() -> None:
    """Events of a round whose start was not seen are not judged."""
    stream = Stream(seq=3)
    deal = stream.deal(2, BANKER_WINS)
    checker = TableChecker(TABLE)
    snapshot = {"type": "snapshot", "seq": deal[1]["seq"], "phase": "idle", "round": 1}
    checker.on_snapshot(snapshot)
    assert feed(checker, deal[2:]) == []
    assert (checker.checked, checker.unchecked) == (0, 1)


def test_joined_must_continue_from_the_last_seq() -> None:
    """A `joined` past the last seq seen is a gap; before it, a mismatch."""
    checker = TableChecker(TABLE)
    checker.on_snapshot({"type": "snapshot", "seq": 5, "phase": "idle", "round": 0})
    assert kinds(checker.on_joined({"type": "joined", "seq": 7})) == [ProblemKind.GAP]
    checker.on_snapshot({"type": "snapshot", "seq": 5, "phase": "idle", "round": 0})
    assert kinds(checker.on_joined({"type": "joined", "seq": 4})) == [ProblemKind.MISMATCH]


def test_a_recovered_false_snapshot_resets_without_a_gap() -> None:
    """A `recovered: false` snapshot replaces the history: counted as a resync, no gap."""
    checker, stream = TableChecker(TABLE), Stream()
    assert feed(checker, stream.round(1, TIE)) == []
    later = Stream(seq=500)
    checker.on_snapshot(
        {"type": "snapshot", "seq": 500, "phase": "idle", "round": 40, "recovered": False}
    )
    assert feed(checker, later.round(41, TIE)) == []
    assert checker.resyncs == 1


def test_stakes_from_bet_totals() -> None:
    """round_settled's staked and bets must match the last bet_totals of the round."""
    checker, stream = TableChecker(TABLE), Stream()
    events = stream.round(1, TIE, stakes=[100, 250])
    assert feed(checker, events) == []
    events = stream.round(2, TIE, stakes=[100])
    events[-1]["staked"] = 300
    assert any("staked 300" in p.detail for p in feed(checker, events))

    checker, stream = TableChecker(TABLE), Stream()
    events = stream.round(3, TIE)
    closed = next(i for i, e in enumerate(events) if e["kind"] == "betting_closed")
    totals = stream.event(3, "bet_totals", totals={"tie": 300, "player": 200}, bettors=2, bets=3)
    events.insert(closed, totals)
    for seq, event in enumerate(events, start=1):
        event["seq"] = seq
    events[-1].update(staked=500, bets=3)
    assert feed(checker, events) == []
    checker2, stream = TableChecker(TABLE), Stream()
    events[-1].update(staked=400)
    assert any("staked 400" in p.detail for p in feed(checker2, events))


def test_burn_count_follows_the_shown_card() -> None:
    """A burn burns the shown card's value, 10 for tens and faces."""
    checker, stream = TableChecker(TABLE), Stream()
    good = [
        stream.event(1, "burn", shown={"rank": "Q", "suit": "h"}, burned=10),
        stream.event(1, "burn", shown={"rank": "7", "suit": "h"}, burned=7),
    ]
    assert feed(checker, good) == []
    bad = stream.event(1, "burn", shown={"rank": "A", "suit": "h"}, burned=2)
    assert kinds(checker.on_event(bad)) == [ProblemKind.MISMATCH]


def test_settled_winner_must_match_the_cards() -> None:
    """round_settled naming another winner than the cards is a mismatch."""
    checker, stream = TableChecker(TABLE), Stream()
    events = stream.round(1, TIE)
    events[-1]["winner"] = "banker"
    assert any("round_settled winner" in p.detail for p in feed(checker, events))


def test_unknown_kinds_and_bad_cards() -> None:
    """Unknown event kinds pass; a card that is no card is a mismatch."""
    checker, stream = TableChecker(TABLE), Stream()
    assert checker.on_event(stream.event(1, "something_new", x=1)) == []
    bad = stream.event(1, "card", hand="player", index=0, rank="11", suit="h")
    assert kinds(checker.on_event(bad)) == [ProblemKind.MISMATCH]


def test_bet_placed_is_not_judged() -> None:
    """The server sends no `bet_placed` (issue 16): one that comes is an unknown kind, neither
    judged nor counted into the round's stakes, which come from `bet_totals` alone."""
    checker, stream = TableChecker(TABLE), Stream()
    events = stream.round(1, TIE, stakes=[100, 250])
    closed = next(i for i, e in enumerate(events) if e["kind"] == "betting_closed")
    events.insert(closed, stream.event(1, "bet_placed", player="p", spot="tie", amount=-5))
    events.insert(closed, stream.event(1, "bet_placed", player="p", spot="tie", amount=40))
    for seq, event in enumerate(events, start=1):
        event["seq"] = seq
    assert feed(checker, events) == []
    assert checker.checked == 1 and checker.completed == 1
