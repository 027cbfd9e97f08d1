"""Scoreboard roads: the fixtures of shared/reference/baccarat.md and the dragon tail."""

from __future__ import annotations

import pytest
from hypothesis import given
from hypothesis import strategies as st

from server.core.coup import Winner
from server.core.roads import (
    ROWS,
    BeadCell,
    BigRoadCell,
    Mark,
    build_roads,
    pair_code,
    pair_flags,
    parse_results,
    to_winner,
)

R, B = Mark.RED, Mark.BLUE


def _positions(sequence: str) -> list[tuple[int, int]]:
    return [(cell.row, cell.col) for cell in build_roads(parse_results(sequence)).big_road]


@pytest.mark.parametrize(
    ("sequence", "expected"),
    [
        ("BPB", [R]),
        ("BBPP", [R]),
        ("BBPPP", [R, B]),
        ("BBPPPP", [R, B, R]),
        ("BTPTB", [R]),
        ("BPP", [B]),
        ("BPBBPPB", [R, B, B, R, R]),
        ("PBPBPBPB", [R, R, R, R, R, R]),
    ],
)
def test_big_eye_boy_fixtures(sequence: str, expected: list[Mark]) -> None:
    """Big Eye Boy (k=1) matches every fixture in baccarat.md."""
    assert list(build_roads(parse_results(sequence)).big_eye_boy) == expected


def test_small_road_fixture() -> None:
    """Small Road (k=2): BPBP gives one red mark."""
    assert build_roads(parse_results("BPBP")).small_road == (R,)


def test_small_road_and_cockroach_pig_start_later() -> None:
    """Small Road starts at column 3 row 1 and Cockroach Pig at column 4 row 1."""
    roads = build_roads(parse_results("BPBPB"))
    assert roads.big_eye_boy == (R, R, R)
    assert roads.small_road == (R, R)
    assert roads.cockroach_pig == (R,)


def test_cockroach_pig_compares_three_columns_back() -> None:
    """Cockroach Pig (k=3) compares columns n-1 and n-4 at row 1, column n-3 below that."""
    # columns BB P B P BB: column 5 row 1 compares columns 4 (1) and 1 (2) -> blue;
    # column 5 row 2 against column 2 (length 1) -> row p+1 -> blue
    roads = build_roads(parse_results("BBPBPBB"))
    assert roads.cockroach_pig == (B, B)
    assert roads.big_eye_boy == (B, R, R, B)


def test_big_road_dragon_tail_fixture() -> None:
    """PPPPPPP fills column 0 and turns right along the bottom row."""
    assert _positions("PPPPPPP") == [(row, 0) for row in range(6)] + [(5, 1)]


def test_big_road_streak_fixture() -> None:
    """BBBPPB: a change of winner starts a new column at the top."""
    assert _positions("BBBPPB") == [(0, 0), (1, 0), (2, 0), (0, 1), (1, 1), (0, 2)]


def test_streak_meeting_an_earlier_tail_turns_right_where_it_is() -> None:
    """A streak whose cell below holds an earlier tail turns right on its own row."""
    positions = _positions("B" * 7 + "P" * 7 + "BBBBB")
    assert positions[:7] == [(row, 0) for row in range(6)] + [(5, 1)]
    assert positions[7:14] == [(row, 1) for row in range(5)] + [(4, 2), (4, 3)]
    assert positions[14:] == [(0, 2), (1, 2), (2, 2), (3, 2), (3, 3)]


def test_dragon_tail_does_not_change_derived_roads() -> None:
    """Derived roads read logical columns: a 7-long streak counts as length 7."""
    roads = build_roads(parse_results("B" * 7 + "P" * 8))
    # P rows 2..8 against column 0 of length 7: red up to row 7, blue at 8
    assert roads.big_eye_boy == (R,) * 6 + (B,)


def test_ties_before_first_decision_attach_to_first_cell() -> None:
    """Leading ties count on the first Big Road cell, later ties on the latest cell."""
    road = build_roads(parse_results("TTBTTTPB")).big_road
    assert road == (
        BigRoadCell(0, 0, Winner.BANKER, 5),
        BigRoadCell(0, 1, Winner.PLAYER, 0),
        BigRoadCell(0, 2, Winner.BANKER, 0),
    )


def test_only_ties_leave_the_big_road_empty() -> None:
    """With no decision yet there is no Big Road cell; the Bead Plate still shows the ties."""
    roads = build_roads(parse_results("TT"))
    assert roads.big_road == ()
    assert [cell.winner for cell in roads.bead_plate] == [Winner.TIE, Winner.TIE]


def test_bead_plate_fills_columns_of_six() -> None:
    """Bead Plate has every coup, ties too, top to bottom then the next column."""
    cells = build_roads(parse_results("BPTBPTB")).bead_plate
    assert [(cell.row, cell.col) for cell in cells] == [(r, 0) for r in range(6)] + [(0, 1)]
    assert cells[2].winner is Winner.TIE


def test_to_dict_shape() -> None:
    """to_dict gives the five roads with plain JSON values, each cell with its pair flags."""
    data = build_roads(parse_results("BPPBTB"), "010020").to_dict()
    assert set(data) == {"bead_plate", "big_road", "big_eye_boy", "small_road", "cockroach_pig"}
    no, player = (False, False), (False, True)  # (banker_pair, player_pair)
    assert data["big_road"] == [
        {"row": r, "col": c, "winner": w, "ties": t, "player_pair": p, "banker_pair": b}
        for r, c, w, t, (b, p) in [
            (0, 0, "banker", 0, no),
            (0, 1, "player", 0, player),
            (1, 1, "player", 0, no),
            (0, 2, "banker", 1, no),  # the tie's Banker pair is not on the Big Road
            (1, 2, "banker", 0, no),
        ]
    ]
    bead_plate = data["bead_plate"]
    assert isinstance(bead_plate, list)
    assert bead_plate[4] == {
        "row": 4,
        "col": 0,
        "winner": "tie",
        "player_pair": False,
        "banker_pair": True,
    }
    assert data["big_eye_boy"] == ["blue", "blue", "red"]


def test_parse_results_accepts_lowercase_and_spaces() -> None:
    """Letters are case-insensitive and whitespace is ignored."""
    assert parse_results("b p\tT") == [Winner.BANKER, Winner.PLAYER, Winner.TIE]


def test_parse_results_names_a_bad_letter() -> None:
    """A bad letter raises ValueError naming it and its position."""
    with pytest.raises(ValueError, match=r"bad result 'X' at position 3"):
        parse_results("BPX")


def test_build_roads_takes_winners_and_words() -> None:
    """Results may be Winner values, letters or words like 'banker'."""
    assert build_roads([Winner.BANKER, "p", "banker"]) == build_roads(parse_results("BPB"))
    with pytest.raises(ValueError, match="bad result 'draw'"):
        to_winner("draw")


@given(st.text(alphabet="BPT", max_size=120))
def test_big_road_cells_are_distinct_and_account_for_every_result(sequence: str) -> None:
    """Cells never overlap, stay in six rows, and cells plus ties count every result."""
    roads = build_roads(parse_results(sequence))
    positions = {(cell.row, cell.col) for cell in roads.big_road}
    assert len(positions) == len(roads.big_road)
    assert all(0 <= cell.row < ROWS for cell in roads.big_road)
    assert len(roads.bead_plate) == len(sequence)
    if roads.big_road:
        assert len(roads.big_road) + sum(cell.ties for cell in roads.big_road) == len(sequence)


def test_pair_codes_say_which_hands_had_a_pair() -> None:
    """A coup's pairs as one character and back: 0 none, 1 Player, 2 Banker, 3 both."""
    flags = [(False, False), (True, False), (False, True), (True, True)]
    assert [pair_code(*f) for f in flags] == ["0", "1", "2", "3"]
    assert [pair_flags(code) for code in "0123"] == flags
    for bad in ("4", "x", "", "01"):
        with pytest.raises(ValueError, match="bad pair code"):
            pair_flags(bad)


def test_pairs_go_on_bead_cells_and_on_the_decision_cells_of_the_big_road() -> None:
    """Every coup's pairs are on its Bead Plate cell; a Big Road cell has its decision's
    pairs, not those of the ties drawn on it."""
    roads = build_roads(parse_results("BTPPB"), "12300")
    assert roads.bead_plate == (
        BeadCell(0, 0, Winner.BANKER, player_pair=True),
        BeadCell(1, 0, Winner.TIE, banker_pair=True),
        BeadCell(2, 0, Winner.PLAYER, player_pair=True, banker_pair=True),
        BeadCell(3, 0, Winner.PLAYER),
        BeadCell(4, 0, Winner.BANKER),
    )
    assert roads.big_road == (
        BigRoadCell(0, 0, Winner.BANKER, 1, player_pair=True),
        BigRoadCell(0, 1, Winner.PLAYER, 0, player_pair=True, banker_pair=True),
        BigRoadCell(1, 1, Winner.PLAYER, 0),
        BigRoadCell(0, 2, Winner.BANKER, 0),
    )
    # The pairs never move a cell or change a derived road.
    plain = build_roads(parse_results("BTPPB"))
    assert [(c.row, c.col, c.winner) for c in roads.big_road] == [
        (c.row, c.col, c.winner) for c in plain.big_road
    ]
    assert (roads.big_eye_boy, roads.small_road) == (plain.big_eye_boy, plain.small_road)


def test_results_without_pair_codes_have_no_pairs() -> None:
    """Fewer codes than results (none at all, or a state stored before pairs were kept):
    the rest had no pair. More codes than results, or a bad code, is an error."""
    roads = build_roads(parse_results("BPB"), "3")
    assert [(c.player_pair, c.banker_pair) for c in roads.bead_plate] == [
        (True, True),
        (False, False),
        (False, False),
    ]
    assert not any(c.player_pair or c.banker_pair for c in build_roads("BPTB").bead_plate)
    with pytest.raises(ValueError, match="3 pair codes for 2 results"):
        build_roads("BP", "000")
    with pytest.raises(ValueError, match="bad pair code 'b'"):
        build_roads("BP", "0b")
