"""The page when things go wrong: a restart that refuses the saved token, a site that needs a
token, the table while disconnected, chips not confirmed when betting closes, and the smaller
things of issue 16 (spectator totals, notices of other tables, the rounds list, hand totals,
pair dots)."""

from __future__ import annotations

import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest

from server.auth import mint_token
from server.core.cards import parse_card
from server.core.rules import PRESETS
from tests.browser.harness import (
    ROUND_SECONDS,
    SHARED_IDENTITY,
    LiveServer,
    StackedRandom,
    within,
)
from tests.browser.test_page import (
    balance,
    expect,
    table_state,
    wait_betting,
    wait_hand_totals,
    wait_open,
    watch_hand_totals,
)

PageFactory = Callable[..., Any]

# A --secret site: no guests, no anonymous spectators, a token for everyone.
TOKENS_ONLY = {"allow_guests": False, "allow_anonymous_spectators": False}
NEW_GUEST = "your guest identity is no longer valid on this server: you are a new guest"


def connection(page: Any) -> Any:
    return page.get_by_test_id("connection")


def test_every_tab_is_back_within_5_s_of_a_restart_that_refuses_the_saved_guest_token(
    open_page: PageFactory, server: LiveServer
) -> None:
    """A demo node restarted makes a new random secret: the player tab's saved guest token is
    refused (401). The page reads why over plain HTTP, says so, and is a new guest at once;
    the spectator tab comes back too. Neither waits more than 5 s once the server answers."""
    player = open_page("/#/t/t1")
    watcher = open_page("/?role=spectator#/t/t1")
    wait_open(player)
    wait_open(watcher)
    old = player.get_by_test_id("player").get_attribute("data-player")
    assert old and old.startswith("guest-")

    server.stop_front()
    for page in (player, watcher):
        expect(connection(page)).to_have_attribute("data-state", "reconnecting")
    # A real restart takes seconds: let the backoff grow as it would meanwhile.
    player.wait_for_function("window.__baccarat.conn.attempt >= 5", timeout=within(30) * 1000)
    server.start_front(secret="another-run-" + "1" * 32)
    deadline = time.monotonic() + within(5)
    for page in (player, watcher):
        left = max(0.1, deadline - time.monotonic())
        expect(connection(page)).to_have_attribute("data-state", "open", timeout=left * 1000)

    notice = player.get_by_test_id("notice")
    expect(notice).to_contain_text(NEW_GUEST)
    expect(notice).to_contain_text("token signature does not match")
    new = player.get_by_test_id("player").get_attribute("data-player")
    assert new and new.startswith("guest-") and new != old
    assert balance(player) == SHARED_IDENTITY["initial_balance"]
    assert player.evaluate("localStorage.getItem('baccarat.token')")  # the new guest's
    expect(watcher.get_by_test_id("player")).to_have_attribute("data-role", "spectator")


@pytest.mark.parametrize("server", [TOKENS_ONLY], indirect=True)
def test_a_site_that_needs_a_token_says_so_and_takes_one(
    open_page: PageFactory, server: LiveServer
) -> None:
    """With a secret and no guests a token-less page is refused 401 `a token is required`:
    the page shows that reason (not "Cannot reach the server"), offers a field for a token,
    and no "new guest" link; a pasted token connects, and a refresh keeps it."""
    page = open_page("/")
    expect(connection(page)).to_have_attribute("data-state", "refused")
    expect(connection(page)).to_contain_text("a token is required")
    refusal = page.get_by_test_id("refusal")
    expect(refusal).to_be_visible()
    expect(refusal).to_contain_text("a token is required")
    expect(page.locator(".offline")).to_be_hidden()
    expect(page.get_by_text("Cannot reach the server")).to_have_count(0)
    expect(page.get_by_role("link", name="another tab as a new guest")).to_have_count(0)
    attempts = page.evaluate("window.__baccarat.conn.attempt")

    # A wrong token is refused in words too; the field stays.
    page.get_by_test_id("token-input").fill("not-a-token")
    page.get_by_test_id("token-submit").click()
    expect(refusal).to_contain_text("token is malformed")
    expect(connection(page)).to_have_attribute("data-state", "refused")

    token = mint_token(str(SHARED_IDENTITY["secret"]), "alice", name="Alice")
    page.get_by_test_id("token-input").fill(token)
    page.get_by_test_id("token-submit").click()
    wait_open(page)
    expect(page.get_by_test_id("player")).to_have_attribute("data-player", "alice")
    expect(refusal).to_be_hidden()
    expect(page.get_by_test_id("table-t1")).to_be_visible()
    expect(page.get_by_role("link", name="another tab as a new guest")).to_have_count(0)
    assert page.evaluate("window.__baccarat.conn.attempt") <= attempts + 1  # no hammering

    page.reload()
    wait_open(page)
    expect(page.get_by_test_id("player")).to_have_attribute("data-player", "alice")


def test_the_table_shows_it_is_disconnected_not_place_your_bets(
    open_page: PageFactory, server: LiveServer
) -> None:
    page = open_page("/#/t/t1")
    wait_open(page)
    wait_betting(page, min_ms=1500)
    phase, countdown = page.get_by_test_id("phase"), page.get_by_test_id("countdown")
    expect(phase).to_have_text("Place your bets")

    server.stop_front()
    expect(phase).to_have_attribute("data-phase", "offline")
    expect(phase).to_contain_text("Disconnected")
    expect(phase).not_to_contain_text("Place your bets")
    expect(countdown).to_have_text("paused")
    expect(countdown).to_have_attribute("data-ms", "0")
    expect(page.get_by_test_id("balance")).to_have_attribute("data-stale", "true")
    expect(page.get_by_test_id("confirm")).to_be_disabled()
    page.goto(f"{server.url}#/")
    expect(page.get_by_test_id("table-t1").locator(".phase-pill")).to_contain_text("Disconnected")

    server.start_front()
    wait_open(page)
    expect(page.get_by_test_id("table-t1").locator(".phase-pill")).not_to_contain_text(
        "Disconnected"
    )
    page.goto(f"{server.url}#/t/t1")
    expect(phase).not_to_have_attribute("data-phase", "offline")
    expect(page.get_by_test_id("balance")).not_to_have_attribute("data-stale", "true")


def test_chips_not_confirmed_are_warned_about_then_named_and_cleared_at_no_more_bets(
    open_page: PageFactory, server: LiveServer
) -> None:
    page = open_page("/#/t/t1")
    wait_open(page)
    round_no = wait_betting(page, min_ms=1500)
    funds = balance(page)
    page.get_by_test_id("chip-1000").click()
    page.get_by_test_id("spot-banker").click()
    page.get_by_test_id("chip-500").click()
    page.get_by_test_id("spot-tie").click()
    banker = page.get_by_test_id("spot-banker")
    expect(banker).to_have_attribute("data-pending", "1000")

    # The last 3 s of the window: the chips are said to be unconfirmed.
    warning = page.get_by_test_id("unconfirmed")
    expect(warning).to_be_visible(timeout=within(ROUND_SECONDS) * 1000)
    expect(warning).to_contain_text("not confirmed")
    # No more bets: which stakes were not placed, in words, and the layout is cleared.
    notice = page.get_by_test_id("notice")
    expect(notice).to_contain_text(f"Table t1, round {round_no}:")
    expect(notice).to_contain_text("not placed")
    expect(notice).to_contain_text("Banker 10.00")
    expect(notice).to_contain_text("Tie 5.00")
    expect(banker).to_have_attribute("data-pending", "0")
    expect(page.get_by_test_id("spot-tie")).to_have_attribute("data-pending", "0")
    expect(page.locator(".pending-info")).to_have_text("")
    expect(warning).to_be_hidden()
    assert balance(page) == funds  # nothing was sent

    # Chips placed while the cards are dealt wait for the next round, as before.
    assert table_state(page, "t1", "phase") != "betting"
    page.get_by_test_id("spot-player").click()
    expect(page.get_by_test_id("spot-player")).to_have_attribute("data-pending", "500")
    page.wait_for_function(
        f"window.__baccarat.tables.get('t1').round > {round_no}",
        timeout=within(2 * ROUND_SECONDS) * 1000,
    )
    expect(page.get_by_test_id("spot-player")).to_have_attribute("data-pending", "500")


# Records, as each card element is added, the hand totals shown at that moment.
WATCH_TOTALS = """() => {
  window.__totals = [];
  new MutationObserver((mutations) => {
    for (const m of mutations) for (const n of m.addedNodes) {
      if (n.dataset && n.dataset.testid === 'card') {
        window.__totals.push({hand: n.dataset.hand, index: Number(n.dataset.index),
          player: document.querySelector('[data-testid=player-total]').textContent,
          banker: document.querySelector('[data-testid=banker-total]').textContent});
      }
    }
  }).observe(document.querySelector('.hands'), {childList: true, subtree: true});
}"""


def test_a_hand_total_counts_a_card_only_once_it_has_appeared(
    open_page: PageFactory, server: LiveServer
) -> None:
    page = open_page("/#/t/t1")
    wait_open(page)
    round_no = wait_betting(page, min_ms=500)
    page.evaluate(WATCH_TOTALS)
    watch_hand_totals(page)
    page.wait_for_function(
        f"window.__baccarat.tables.get('t1').result?.round === {round_no}",
        timeout=within(2 * ROUND_SECONDS) * 1000,
    )
    added = page.evaluate("window.__totals")
    firsts = {hand: next(c for c in added if c["hand"] == hand) for hand in ("player", "banker")}
    for hand, card in firsts.items():
        assert card[hand] == "", f"the {hand} total showed {card[hand]!r} as its first card came"
    result = page.evaluate("window.__baccarat.tables.get('t1').result")
    wait_hand_totals(page, result["player_total"], result["banker_total"])


def test_a_spectator_sees_every_players_totals_on_the_layout(
    open_page: PageFactory, server: LiveServer
) -> None:
    player = open_page("/#/t/t1")
    watcher = open_page("/?role=spectator#/t/t1")
    wait_open(player)
    wait_open(watcher)
    wait_betting(player, min_ms=1500)
    player.get_by_test_id("chip-1000").click()
    player.get_by_test_id("spot-banker").click()
    player.get_by_test_id("confirm").click()
    expect(player.get_by_test_id("spot-banker")).to_have_attribute("data-mine", "1000")
    total = watcher.get_by_test_id("total-banker")
    expect(total).to_have_attribute("data-value", "1000")
    expect(total).to_be_visible()
    expect(total).to_contain_text("10.00")
    expect(watcher.get_by_test_id("chip-1000")).to_be_hidden()


def test_notices_about_other_tables_are_not_shown_and_go_at_a_reconnect(
    open_page: PageFactory, server: LiveServer
) -> None:
    page = open_page("/#/t/t1")
    wait_open(page)
    page.evaluate(
        "() => { const a = window.__baccarat;"
        " a.notice('Table t2: reloaded', 'info', 't2');"
        " a.notice('Table t1: reloaded', 'info', 't1'); }"
    )
    notice = page.get_by_test_id("notice")
    expect(notice).to_contain_text("Table t1: reloaded")
    # (Not a waiting assertion: every notice goes by itself after 9 s.)
    assert "Table t2" not in notice.inner_text()
    opens = page.evaluate("window.__baccarat.conn.opens")
    assert server.drop_connections() >= 1
    page.wait_for_function(f"window.__baccarat.conn.opens > {opens}")
    wait_open(page)
    assert page.evaluate("window.__baccarat.notices.filter(n => n.table === 't2').length") == 0
    page.goto(f"{server.url}#/t/t2")
    expect(page.locator("h2")).to_have_attribute("data-table", "t2")
    assert "Table t2" not in notice.inner_text()


@pytest.mark.parametrize("phone", [False, True])
def test_the_rounds_on_this_page_list_has_room_for_two_digit_numbers(
    open_page: PageFactory, server: LiveServer, phone: bool
) -> None:
    page = open_page("/#/t/t1", phone=phone)
    wait_open(page)
    page.evaluate(
        "() => { const a = window.__baccarat;"
        " a.sessionRounds = Array.from({length: 12}, (_, i) =>"
        " ({table: 't1', round: 100 - i, winner: 'banker', settlement: null}));"
        " a.emit({kind: 'table', table: 't1', what: 'round_result'}); }"
    )
    items = page.locator(".seen-list li")
    expect(items).to_have_count(12)
    room, needed = page.evaluate(
        """() => {
          const li = document.querySelectorAll('.seen-list li')[9];
          const ol = li.parentElement;
          const style = getComputedStyle(li);
          const ctx = document.createElement('canvas').getContext('2d');
          ctx.font = `${style.fontWeight} ${style.fontSize} ${style.fontFamily}`;
          return [parseFloat(getComputedStyle(ol).paddingLeft), ctx.measureText('10. ').width];
        }"""
    )
    assert room >= needed, f"{room}px of padding for a {needed}px marker"


# t1's first shoe: As shown, 2d burned; round 1 deals P 4h, B Kc, P 4s, B 7d (Player 8 over
# 7, a Player pair); round 2 P 2h, B 9c, P 3s, B 9d (Banker 8 over 5, a Banker pair).
PAIRS_FIRST = [
    parse_card(card) for card in ("As", "2d", "4h", "Kc", "4s", "7d", "2h", "9c", "3s", "9d")
]
# Each pair dot of a road's cells, in the cells' order: which hand, where its centre is in
# the cell (as a fraction of the cell's width and height) and its colour.
PAIR_DOTS = """(testid) => {
 const cells = document.querySelectorAll(`[data-testid=${testid}] .cell`);
 return [...cells].map((cell) => {
  const c = cell.getBoundingClientRect();
  return [...cell.querySelectorAll('[data-testid=pair-dot]')].map((dot) => {
    const d = dot.getBoundingClientRect();
    return {pair: dot.dataset.pair, x: (d.x + d.width / 2 - c.x) / c.width,
            y: (d.y + d.height / 2 - c.y) / c.height, color: getComputedStyle(dot).backgroundColor,
            visible: d.width > 2 && d.height > 2};
  });
 });
}"""
RED, BLUE = "rgb(210, 48, 58)", "rgb(47, 111, 219)"  # --banker, --player


@pytest.mark.parametrize(
    "server", [{"rngs": {"t1": StackedRandom(decks=8, top=PAIRS_FIRST)}}], indirect=True
)
def test_the_roads_show_a_dot_for_each_pair(open_page: PageFactory, server: LiveServer) -> None:
    """A Player pair is a blue dot at the bottom right of its round's bead plate and big road
    cells, a Banker pair a red dot at the top left; a round without a pair has no dot."""
    page = open_page("/#/t/t1")
    wait_open(page)
    page.wait_for_function(
        "Number(document.querySelector('[data-testid=big-road]').dataset.cells) >= 2",
        timeout=within(4 * ROUND_SECONDS) * 1000,
    )
    assert page.evaluate("window.__baccarat.tables.get('t1').results").startswith("PB")
    for road in ("bead-plate", "big-road"):
        first, second, *later = page.evaluate(PAIR_DOTS, road)
        assert [d["pair"] for d in first] == ["player"], road
        assert [d["pair"] for d in second] == ["banker"], road
        player, banker = first[0], second[0]
        assert player["x"] > 0.5 and player["y"] > 0.5 and player["color"] == BLUE, road
        assert banker["x"] < 0.5 and banker["y"] < 0.5 and banker["color"] == RED, road
        assert player["visible"] and banker["visible"], road
        assert all(dots == [] for dots in later), road  # the rounds after: no pair
    title = page.get_by_test_id("bead-plate").locator(".cell").first.get_attribute("title")
    assert title == "Player, Player pair"


NAMED_TABLES = Path(__file__).with_name("named_tables.toml")


@pytest.mark.parametrize(
    "server", [{"tables": "", "tables_file": str(NAMED_TABLES)}], indirect=True
)
def test_the_lobby_and_the_table_header_show_each_tables_name_and_description(
    open_page: PageFactory, server: LiveServer
) -> None:
    """A table's name for players and its description, from the tables file (t1) or its
    preset (t2), head its lobby entry and its table's header; the id is shown beside it and
    the rules' key (classic8) nowhere."""
    punto6 = PRESETS["punto6"]
    shown = {
        "t1": ("The High Room", "High limits: Banker pays 0.95 to 1, Tie 8 to 1"),
        "t2": (punto6.title, punto6.description),
    }
    page = open_page("/")
    wait_open(page)
    for table, (title, description) in shown.items():
        entry = page.get_by_test_id(f"table-{table}")
        expect(entry.get_by_test_id("lobby-title")).to_have_text(title)
        expect(entry.locator(".lobby-id")).to_have_text(table)
        expect(entry.get_by_test_id("lobby-desc")).to_have_text(description)
        expect(entry).not_to_contain_text(("classic8", "punto6")[table == "t2"])
    for table, (title, description) in shown.items():
        page.goto(f"{server.url}#/t/{table}")
        heading = page.locator("h2")
        expect(heading).to_have_attribute("data-table", table)
        expect(heading).to_have_text(title)
        expect(page.locator(".table-head .table-id")).to_have_text(table)
        expect(page.get_by_test_id("table-rules")).to_contain_text(description)
        expect(page).to_have_title(f"{title} · Live Baccarat")
