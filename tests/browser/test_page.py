"""The demo page in headless Chromium: lobby, betting, cards, settlement, roads, replay,
limits, spectators, refresh, and recovery after the server restarts or drops the socket."""

from __future__ import annotations

import random
import re
from collections.abc import Callable
from typing import Any

from server.core.roads import build_roads
from tests.browser.harness import ROUND_SECONDS, LiveServer, Observer, within

expect: Any
try:
    from playwright.sync_api import expect

    expect.set_options(timeout=within(15) * 1000)
except ImportError:  # the browser fixture skips with the install hint
    expect = None

PageFactory = Callable[..., Any]

# Records when each card element is added to a container (`selector`), in page time.
WATCH_CARDS = """([selector, testid]) => {
  window.__added = window.__added || {};
  const list = (window.__added[testid] = []);
  new MutationObserver((mutations) => {
    for (const m of mutations) for (const n of m.addedNodes) {
      if (n.dataset && n.dataset.testid === testid) {
        list.push({t: performance.now(), hand: n.dataset.hand, rank: n.dataset.rank,
                   suit: n.dataset.suit, index: Number(n.dataset.index)});
      }
    }
  }).observe(document.querySelector(selector), {childList: true, subtree: true});
}"""


# Every value the two hand totals show, as a pair, as it changes: the final totals of a round
# may show only briefly (the next round clears them after --result-pause and
# --next-round-pause), so a test looks for them in what was shown, not in what is shown now.
WATCH_HAND_TOTALS = """() => {
  window.__handTotals = [];
  const player = document.querySelector('[data-testid=player-total]');
  const banker = document.querySelector('[data-testid=banker-total]');
  const note = () => window.__handTotals.push([player.textContent, banker.textContent]);
  const observer = new MutationObserver(note);
  for (const node of [player, banker]) {
    observer.observe(node, {childList: true, characterData: true, subtree: true});
  }
}"""


def watch_hand_totals(page: Any) -> None:
    page.evaluate(WATCH_HAND_TOTALS)


def wait_hand_totals(page: Any, player: int, banker: int) -> None:
    """Wait until the page has shown these totals together (they may be gone again by now)."""
    page.wait_for_function(
        f"window.__handTotals.some(([p, b]) => p === '{player}' && b === '{banker}')",
        timeout=within(ROUND_SECONDS) * 1000,
    )


def wait_open(page: Any) -> None:
    expect(page.get_by_test_id("connection")).to_have_attribute("data-state", "open")


def balance(page: Any) -> int:
    return int(page.get_by_test_id("balance").get_attribute("data-value"))


def table_state(page: Any, table: str, field: str) -> Any:
    return page.evaluate(f"window.__baccarat.tables.get({table!r}).{field}")


def wait_betting(page: Any, min_ms: int = 1200) -> int:
    """Wait for a betting window with at least `min_ms` left; return its round."""
    page.wait_for_function(
        """(minMs) => {
          const phase = document.querySelector('[data-testid=phase]');
          const left = document.querySelector('[data-testid=countdown]');
          return phase && phase.dataset.phase === 'betting' && Number(left.dataset.ms) >= minMs;
        }""",
        arg=min_ms,
        timeout=within(3 * ROUND_SECONDS) * 1000,
    )
    return int(table_state(page, "t1", "round"))


def road_cells(page: Any, testid: str) -> int:
    return int(page.get_by_test_id(testid).get_attribute("data-cells") or 0)


def expected_credit(bets: dict[str, int], result: dict[str, Any]) -> int:
    """What the default paytable gives back (stake included), from the round's result."""
    credit = 0
    for spot, amount in bets.items():
        if spot in ("player", "banker"):
            if result["winner"] == "tie":
                credit += amount
            elif result["winner"] == spot:
                credit += amount + (amount * 95 // 100 if spot == "banker" else amount)
        elif spot == "tie":
            credit += amount * 9 if result["winner"] == "tie" else 0
        elif result[spot]:  # player_pair / banker_pair
            credit += amount * 12
    return credit


def assert_gapless(log: list[dict[str, Any]]) -> list[int]:
    """Every event seq applied once and in order; a jump only where a snapshot covered it."""
    assert not [e for e in log if "gap" in e or "dup" in e], log
    assert not [e for e in log if e.get("recovered") is False], "a since-join fell back"
    applied: list[int] = []
    covered = 0  # the last seq a snapshot accounted for
    for entry in log:
        if "snapshot" in entry:
            covered = max(covered, entry["snapshot"])
        elif "seq" in entry:
            seq = entry["seq"]
            if applied:
                assert seq > applied[-1], f"seq {seq} after {applied[-1]}"
                assert seq == applied[-1] + 1 or covered >= seq - 1, f"gap before {seq}"
            applied.append(seq)
    return applied


def test_lobby_lists_tables_with_rules_and_opens_them(
    open_page: PageFactory, server: LiveServer, shot: Callable[..., Any]
) -> None:
    page = open_page("/")
    wait_open(page)
    expect(page.get_by_test_id("lobby")).to_be_visible()
    t1, t2 = page.get_by_test_id("table-t1"), page.get_by_test_id("table-t2")
    expect(t1).to_contain_text("8 decks")
    expect(t2).to_contain_text("6 decks")
    for entry in (t1, t2):
        expect(entry).to_contain_text("Banker 5% commission")
        expect(entry).to_contain_text("Tie 8:1")
        expect(entry).to_contain_text("1.00 – 5,000.00")  # Player and Banker limits
        expect(entry).to_contain_text("1.00 – 250.00")  # the pairs
    expect(t1).to_have_attribute("data-phase", re.compile("betting|dealing|settled"))
    expect(t1.locator(".lobby-time")).to_contain_text("left to bet")
    expect(t1.locator(".lobby-people")).to_contain_text("watching here")  # from /lobby
    # The page speaks msgpack.
    assert page.evaluate("window.__baccarat.conn.ws.protocol") == "baccarat.v1.msgpack"
    assert page.evaluate("window.__baccarat.encoding") == "baccarat.v1.msgpack"
    shot(page, "lobby-desktop")

    t1.click()
    expect(page).to_have_url(re.compile(r"#/t/t1$"))
    expect(page.get_by_test_id("phase")).to_have_attribute("data-phase", re.compile(".+"))
    expect(page.get_by_test_id("spot-banker")).to_contain_text("1:1 less 5%")
    page.keyboard.press("Escape")
    expect(page.get_by_test_id("lobby")).to_be_visible()

    # A link straight to a table, on a phone-sized screen.
    phone = open_page("/#/t/t2", phone=True)
    wait_open(phone)
    expect(phone.locator("h2")).to_have_attribute("data-table", "t2")
    expect(phone.get_by_test_id("big-road")).to_be_visible()
    expect(phone.get_by_test_id("countdown")).to_have_text(re.compile(r"\d\.\d s"))
    shot(phone, "table-phone")
    phone.goto(f"{server.url}#/")
    expect(phone.get_by_test_id("table-t1")).to_be_visible()
    shot(phone, "lobby-phone")


def test_bet_deal_settle_roads_and_replay(
    open_page: PageFactory,
    server: LiveServer,
    observer: Callable[[str], Observer],
    shot: Callable[..., Any],
) -> None:
    watcher = observer("t1")
    page = open_page("/#/t/t1")
    # A friend in another tab of the same browser, as a guest of their own.
    friend = open_page("/?guest=new#/t/t1", context=page.context)
    wait_open(page)
    wait_open(friend)
    assert friend.evaluate("window.__baccarat.player") != page.evaluate("window.__baccarat.player")
    round_no = wait_betting(page, min_ms=2200)
    # (A background tab gets no animation frames, and Playwright waits for them to click.)
    friend.get_by_test_id("chip-500").click()
    friend.get_by_test_id("spot-player").click()
    friend.get_by_test_id("confirm").click()
    page.bring_to_front()
    before = balance(page)
    beads, bigs = road_cells(page, "bead-plate"), road_cells(page, "big-road")
    page.evaluate(WATCH_CARDS, [".hands", "card"])
    watch_hand_totals(page)

    page.get_by_test_id("chip-1000").click()
    page.get_by_test_id("spot-banker").click()
    page.get_by_test_id("chip-100").click()
    page.get_by_test_id("spot-player_pair").click()
    expect(page.get_by_test_id("spot-banker")).to_have_attribute("data-pending", "1000")
    page.get_by_test_id("confirm").click()
    expect(page.get_by_test_id("balance")).to_have_attribute("data-value", str(before - 1100))
    expect(page.get_by_test_id("spot-banker")).to_have_attribute("data-mine", "1000")
    expect(page.get_by_test_id("spot-player_pair")).to_have_attribute("data-mine", "100")
    # The live totals on the spots: every player's stakes (bet_totals, or bet_placed before it).
    expect(page.get_by_test_id("total-banker")).to_have_attribute("data-value", "1000")
    expect(page.get_by_test_id("total-player")).to_have_attribute("data-value", "500")
    expect(friend.get_by_test_id("spot-player")).to_have_attribute("data-mine", "500")

    # Each card appears as its event arrives, in deal order, one at a time.
    result = watcher.wait_for(
        lambda m: m["type"] == "event" and m["kind"] == "round_result" and m["round"] == round_no,
        seconds=2 * ROUND_SECONDS,
    )
    dealt = watcher.events(round_no, "card")
    expect(page.get_by_test_id("result")).to_have_attribute("data-winner", result["winner"])
    expect(page.get_by_test_id("card")).to_have_count(len(dealt))
    added = page.evaluate("window.__added.card")
    assert [(c["hand"], c["rank"], c["suit"]) for c in added] == [
        (e["hand"], e["rank"], e["suit"]) for e in dealt
    ]
    server_span = dealt[-1]["ts"] - dealt[0]["ts"]
    page_span = added[-1]["t"] - added[0]["t"]
    assert page_span >= 0.5 * server_span, (page_span, server_span)  # not drawn all at once
    wait_hand_totals(page, result["player_total"], result["banker_total"])

    # The settlement, and the balance moving by exactly its credit.
    settlement = page.locator(f"[data-testid=settlement][data-round='{round_no}']")
    expect(settlement).to_be_visible()
    credit = int(settlement.get_attribute("data-credit"))
    assert credit == expected_credit({"banker": 1000, "player_pair": 100}, result)
    expect(page.get_by_test_id("balance")).to_have_attribute(
        "data-value", str(before - 1100 + credit)
    )
    net = credit - 1100
    expect(settlement).to_contain_text(
        "You won" if net > 0 else "You lost" if net < 0 else "You broke even"
    )

    # The roads grow: the server's roads arrive with a fresh snapshot after the result.
    page.wait_for_function(
        "(n) => Number(document.querySelector('[data-testid=bead-plate]').dataset.cells) === n",
        arg=beads + 1,
    )
    # A tie adds no cell to the big road (it marks the cell before, if there is one).
    assert road_cells(page, "big-road") == bigs + (result["winner"] != "tie")
    shot(page, "table-desktop-settled")

    # Recall: the player's rounds, where the server offers `history`.
    watcher.send({"type": "history", "ref": "h1"})
    answer = watcher.wait_for(lambda m: m.get("ref") == "h1" or m["type"] == "history")
    if answer["type"] == "error":
        assert answer["code"] == "UNKNOWN_TYPE"
        expect(page.get_by_test_id("history-status")).to_contain_text("UNKNOWN_TYPE")
    else:
        expect(
            page.locator(f"[data-testid=history-round][data-round='{round_no}']")
        ).to_be_visible()

    # Replay the round: its cards come back one by one, at the pace they were dealt.
    page.evaluate(WATCH_CARDS, [".replay", "replay-card"])
    page.get_by_test_id(f"replay-{round_no}").click()
    replay = page.get_by_test_id("replay")
    expect(replay).to_have_attribute("data-state", "done", timeout=within(15) * 1000)
    expect(page.get_by_test_id("replay-card")).to_have_count(len(dealt))
    replayed = page.evaluate("window.__added['replay-card']")
    assert [(c["hand"], c["rank"], c["suit"]) for c in replayed] == [
        (e["hand"], e["rank"], e["suit"]) for e in dealt
    ]
    assert replayed[-1]["t"] - replayed[0]["t"] >= 0.5 * server_span
    expect(page.get_by_test_id("replay-result")).to_have_attribute("data-winner", result["winner"])
    shot(page, "replay-desktop")


def test_page_recovers_after_server_restart_and_dropped_socket_with_no_gap(
    open_page: PageFactory,
    server: LiveServer,
    shot: Callable[..., Any],
) -> None:
    page = open_page("/#/t/t1")
    wait_open(page)
    page.wait_for_function("window.__baccarat.tables.get('t1').log.some(e => 'seq' in e)")
    seen = int(table_state(page, "t1", "seq"))

    # The node the page talks to stops; the table goes on dealing on the other node.
    server.stop_front()
    connection = page.get_by_test_id("connection")
    expect(connection).to_have_attribute("data-state", "reconnecting")
    expect(connection).to_contain_text("reconnecting")
    shot(page, "reconnecting")
    owner = Observer(f"ws://127.0.0.1:{server.owner.port}/ws", "t1")  # type: ignore[union-attr]
    try:
        owner.wait_for(lambda m: m["type"] == "event" and m["seq"] >= seen + 4)
    finally:
        owner.close()
    server.start_front()
    expect(connection).to_have_attribute("data-state", "open", timeout=within(20) * 1000)
    page.wait_for_function(f"window.__baccarat.tables.get('t1').seq >= {seen + 6}")
    applied = assert_gapless(table_state(page, "t1", "log"))
    # What happened while the page was away came as events, one by one, not as a snapshot.
    assert set(range(seen, seen + 5)) <= set(applied)

    # The socket is cut without a close frame; the page notices, comes back, loses nothing.
    seen = int(table_state(page, "t1", "seq"))
    opens = page.evaluate("window.__baccarat.conn.opens")
    assert server.drop_connections() >= 1
    page.wait_for_function(f"window.__baccarat.conn.opens > {opens}")
    wait_open(page)
    page.wait_for_function(f"window.__baccarat.tables.get('t1').seq >= {seen + 3}")
    assert_gapless(table_state(page, "t1", "log"))
    assert page.evaluate("window.__baccarat.tables.get('t1').duplicates") == 0


def test_limits_checked_before_sending_undo_double_rebet_and_rejections_in_words(
    open_page: PageFactory, server: LiveServer
) -> None:
    page = open_page("/#/t/t1")
    wait_open(page)
    notice = page.get_by_test_id("notice")
    tie = page.get_by_test_id("spot-tie")
    page.get_by_test_id("chip-25000").click()
    tie.click()
    tie.click()  # 500.00: the Tie maximum
    expect(tie).to_have_attribute("data-pending", "50000")
    tie.click()  # over the maximum: refused on the page, nothing sent
    expect(notice).to_contain_text("Tie maximum is 500.00")
    expect(tie).to_have_attribute("data-pending", "50000")
    page.get_by_test_id("undo").click()
    expect(tie).to_have_attribute("data-pending", "25000")
    page.get_by_test_id("double").click()
    expect(tie).to_have_attribute("data-pending", "50000")
    page.get_by_test_id("undo").click()
    expect(tie).to_have_attribute("data-pending", "25000")

    # The keyboard: 1 picks the smallest chip, B bets on Banker, U takes it back.
    page.locator("body").press("1")
    page.locator("body").press("b")
    banker = page.get_by_test_id("spot-banker")
    expect(banker).to_have_attribute("data-pending", "100")
    page.locator("body").press("u")
    expect(banker).to_have_attribute("data-pending", "0")

    round_no = wait_betting(page)
    before = balance(page)
    page.get_by_test_id("confirm").click()
    expect(tie).to_have_attribute("data-mine", "25000")
    expect(page.get_by_test_id("balance")).to_have_attribute("data-value", str(before - 25000))

    # A bet the server refuses (sent around the page's own checks) is explained in words.
    page.evaluate(
        "() => { const a = window.__baccarat;"
        " a.placeBets(a.tables.get('t1'), [{spot: 'banker_pair', amount: 50}]); }"
    )
    expect(notice).to_contain_text("Banker Pair 0.50 refused: banker_pair minimum is 100 (LIMIT)")

    # Next round: Rebet puts last round's bets back on the layout.
    page.wait_for_function(
        f"window.__baccarat.tables.get('t1').round > {round_no}",
        timeout=within(3 * ROUND_SECONDS) * 1000,
    )
    page.get_by_test_id("rebet").click()
    expect(tie).to_have_attribute("data-pending", "25000")


def test_spectator_watches_without_betting(open_page: PageFactory, server: LiveServer) -> None:
    page = open_page("/?role=spectator#/t/t1")
    wait_open(page)
    assert "role=spectator" in page.evaluate("window.__baccarat.conn.ws.url")
    expect(page.get_by_test_id("player")).to_have_attribute("data-role", "spectator")
    expect(page.locator(".spectating")).to_be_visible()
    # The layout is there (with every player's totals), but no chip and no spot to click.
    expect(page.get_by_test_id("spot-banker")).to_be_disabled()
    expect(page.get_by_test_id("chip-100")).to_be_hidden()
    expect(page.get_by_test_id("confirm")).to_be_hidden()
    expect(page.get_by_test_id("card").first).to_be_visible(
        timeout=within(3 * ROUND_SECONDS) * 1000
    )
    page.locator("body").press("b")
    assert page.evaluate("window.__baccarat.tables.get('t1').pending.length") == 0


def test_refresh_and_token_link_are_the_same_player(
    open_page: PageFactory, server: LiveServer, observer: Callable[[str], Observer]
) -> None:
    assert observer("t1").welcome["token"]  # every guest gets one to come back with
    page = open_page("/#/t/t1")
    wait_open(page)
    player = page.get_by_test_id("player").get_attribute("data-player")
    funds = balance(page)
    page.reload()
    wait_open(page)
    expect(page.get_by_test_id("player")).to_have_attribute("data-player", player)
    expect(page.get_by_test_id("balance")).to_have_attribute("data-value", str(funds))
    token = page.evaluate("localStorage.getItem('baccarat.token')")
    assert token
    # A token in the address logs in as that player, from a browser that never saw it.
    other = open_page(f"/?token={token}#/t/t1")
    wait_open(other)
    expect(other.get_by_test_id("player")).to_have_attribute("data-player", player)


def test_derived_road_layout_follows_the_servers_big_road_rules(
    open_page: PageFactory, server: LiveServer
) -> None:
    """The page lays out derived-road marks itself (the server sends them as a list); fed the
    big road's own winners, its layout must be the server's big road, dragon tails included."""
    rng = random.Random(9)
    cases = ["B" * 9 + "P" * 8 + "B" * 7 + "P" * 3 + "B" * 12, "BPBPBBPPPBBBB" * 3]
    cases += ["".join(rng.choice("BBBPPPT") for _ in range(rng.randint(1, 80))) for _ in range(60)]
    page = open_page("/")
    wait_open(page)
    for results in cases:
        big_road = build_roads(results).big_road
        marks = [cell.winner.value for cell in big_road]
        placed = page.evaluate(
            "async (marks) => (await import('/js/roads.js')).placeMarks(marks)", marks
        )
        assert [(c["row"], c["col"]) for c in placed] == [(c.row, c.col) for c in big_road], results
