"""The committed shoe in the page (docs/fairness.md, "In the page"): the page's own WebCrypto
implementation of bac-shoe-v1 against the doc's test vectors, the commitment and root shown,
a mark on each card whose proof checked (and a mismatch on a tampered one), a page that joins
mid-shoe checking the snapshot's cards, and "Verify this shoe" after the reveal."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import pytest

from tests.browser.harness import ROUND_SECONDS, LiveServer, Observer, within
from tests.core.test_fairness import doc_vectors

expect: Any
try:
    from playwright.sync_api import expect

    expect.set_options(timeout=within(15) * 1000)
except ImportError:  # the browser fixture skips with the install hint
    expect = None

PageFactory = Callable[..., Any]
# Every round is a new shoe (committed, sealed, revealed): seed 003's preset.
RESHUFFLING = {"tables": "t1=joggled6"}

# Runs the doc's vectors through client_demo/js/fairness.js in the page; returns what it got.
RUN_VECTORS = """async (v) => {
  const f = await import('/js/fairness.js');
  const hex = f.bytesToHex;
  const seed = f.hexToBytes(v.seed);
  const out = {commitment: await f.commitment(seed), client_seeds: [], randbelow: [], shoes: []};
  for (const c of v.client_seeds) {
    out.client_seeds.push({preimage: hex(f.clientSeedPreimage(c.entropy)),
                           client_seed: hex(await f.clientSeed(c.entropy))});
  }
  const key = await f.hmacKey(f.hexToBytes(v.stream.seed));
  const stream = new f.Stream(key, f.hexToBytes(v.stream.client_seed));
  const words = [];
  for (let i = 0; i < v.stream.words.length; i += 1) words.push(await stream.word());
  out.stream = {blocks: stream.blocks.slice(0, v.stream.blocks.length).map(hex), words};
  for (const c of v.randbelow.cases) {
    const s = new f.Stream(await f.hmacKey(f.hexToBytes(v.randbelow.seed)),
                           f.hexToBytes(v.randbelow.client_seed));
    const draws = [];
    for (let i = 0; i < c.draws.length; i += 1) draws.push(await s.randbelow(c.n));
    out.randbelow.push({n: c.n, draws, words_read: s.wordsRead});
  }
  for (const shoe of v.shoes) {
    const sd = f.hexToBytes(shoe.seed);
    const cs = await f.clientSeed(shoe.entropy);
    const made = await f.shuffleShoe(sd, cs, shoe.decks, shoe.cut_from_end);
    const all = made.cards.join('');
    const salts = await f.positionSalts(sd, made.cards.length);
    const leaves = await Promise.all(made.cards.map((code, i) => f.leafHash(i, code, salts[i])));
    const proofs = [];
    for (const p of shoe.proofs) {
      const args = {root: shoe.root, size: made.cards.length, position: p.position,
                    code: p.card, salt: p.salt, proof: p.path};
      const other = p.card === 'Kh' ? 'Qh' : 'Kh';
      const flipped = p.path.map((s) => (s[0] === 'L' ? 'R' : 'L') + s.slice(1));
      proofs.push({
        ok: (await f.checkCard(args)).ok,
        other_card: await f.checkCard({...args, code: other}),
        other_position: await f.checkCard({...args, position: p.position + 1}),
        flipped_sides: await f.checkCard({...args, proof: flipped}),
      });
    }
    out.shoes.push({
      first_cards: made.cards.slice(0, 20).join(''), cards: all,
      cards_sha256: hex(await f.sha256(new TextEncoder().encode(all))),
      cut_index: made.cutIndex, burn: made.burn, first_dealt: made.burn + 1,
      root: hex(await f.merkleRoot(leaves)), salt_0: hex(salts[0]), leaf_0: hex(leaves[0]),
      proofs,
    });
  }
  return out;
}"""


def wait_open(page: Any) -> None:
    expect(page.get_by_test_id("connection")).to_have_attribute("data-state", "open")


def test_the_pages_bac_shoe_v1_matches_the_docs_test_vectors(
    open_page: PageFactory, server: LiveServer
) -> None:
    """client_demo/js/fairness.js, run in Chromium, gives every value of docs/fairness.md's
    test vectors; its card check accepts the doc's proofs and refuses another card, another
    position and a proof whose sides were flipped."""
    vectors = doc_vectors()
    page = open_page("/")
    wait_open(page)
    got = page.evaluate(RUN_VECTORS, vectors)
    assert got["commitment"] == vectors["commitment"]
    assert got["client_seeds"] == [
        {"preimage": c["preimage"], "client_seed": c["client_seed"]}
        for c in vectors["client_seeds"]
    ]
    assert got["stream"] == {
        "blocks": vectors["stream"]["blocks"],
        "words": vectors["stream"]["words"],
    }
    assert got["randbelow"] == [
        {"n": c["n"], "draws": c["draws"], "words_read": c["words_read"]}
        for c in vectors["randbelow"]["cases"]
    ]
    for shoe, mine in zip(vectors["shoes"], got["shoes"], strict=True):
        for key in ("first_cards", "cards_sha256", "cut_index", "burn", "first_dealt", "root"):
            assert mine[key] == shoe[key], key
        assert (mine["salt_0"], mine["leaf_0"]) == (shoe["salt_0"], shoe["leaf_0"])
        if "cards" in shoe:
            assert mine["cards"] == shoe["cards"]
        for proof in mine["proofs"]:
            assert proof["ok"] is True
            assert proof["other_card"] == {
                "ok": False,
                "reason": "its proof does not lead to the sealed root",
            }
            assert proof["other_position"]["ok"] is False
            assert "is not the path of position" in proof["flipped_sides"]["reason"]


def commitment_of(obs: Observer, shoe: int) -> str:
    """The commitment of `shoe`, from its shoe_committed or the snapshot that showed it."""
    found = obs.wait_for(
        lambda m: (
            (m.get("kind") == "shoe_committed" and m["shoe"] == shoe)
            or (m.get("type") == "snapshot" and (m.get("fair") or {}).get("shoe") == shoe)
        )
    )
    return str(found["commitment"] if "commitment" in found else found["fair"]["commitment"])


def test_the_table_shows_the_commitment_and_checks_each_card(
    open_page: PageFactory,
    server: LiveServer,
    observer: Callable[[str], Observer],
    shot: Callable[[Any, str], Any],
) -> None:
    """The commitment the server published, the root once sealed, and every dealt card
    marked data-proof="ok" (checked in the page against the sealed root)."""
    obs = observer("t1")
    page = open_page("/#/t/t1")
    wait_open(page)
    sealed = obs.wait_for(
        lambda m: m.get("kind") == "shoe_sealed", seconds=within(3 * ROUND_SECONDS)
    )
    commitment = commitment_of(obs, sealed["shoe"])
    expect(page.get_by_test_id("fair-commitment")).to_have_attribute("data-value", commitment)
    expect(page.get_by_test_id("fair-root")).to_have_attribute("data-value", sealed["root"])
    expect(page.get_by_test_id("fair-commitment")).to_have_attribute("title", commitment)
    cards = page.locator("[data-testid=card][data-proof=ok]")
    expect(cards.nth(3)).to_be_attached(timeout=within(2 * ROUND_SECONDS) * 1000)
    assert page.locator("[data-testid=card][data-proof=bad]").count() == 0
    expect(page.get_by_test_id("fair-status")).to_contain_text("checked ✓")
    shot(page, "fair-checked")


# Changes the rank of the next card event the page receives, before the page handles it.
TAMPER_NEXT_CARD = """() => {
  const app = window.__baccarat;
  const handle = app.onMessage.bind(app);
  app.onMessage = (m) => {
    if (!window.__tampered && m.type === 'event' && m.kind === 'card') {
      const rank = m.rank === 'K' ? 'Q' : 'K';
      window.__tampered = {position: m.position, was: m.rank + m.suit, now: rank + m.suit};
      m = {...m, rank};
    }
    return handle(m);
  };
}"""


@pytest.mark.parametrize("server", [RESHUFFLING], indirect=True)
def test_a_tampered_card_is_marked_bad_and_the_shoe_does_not_verify(
    open_page: PageFactory, server: LiveServer
) -> None:
    """A card whose face was changed on its way (its proof left as sent) gets data-proof
    "bad" with a reason; at the reveal "Verify this shoe" names the mismatch."""
    page = open_page("/#/t/t1")
    wait_open(page)
    page.evaluate(TAMPER_NEXT_CARD)
    bad = page.locator("[data-testid=card][data-proof=bad]")
    expect(bad).to_have_count(1, timeout=within(3 * ROUND_SECONDS) * 1000)
    expect(bad).to_have_attribute("title", "Mismatch: its proof does not lead to the sealed root")
    tampered = page.evaluate("window.__tampered")
    expect(bad).to_have_attribute("data-position", str(tampered["position"]))
    shoe = page.evaluate("window.__baccarat.tables.get('t1').fair.current.shoe")
    verify = page.locator(f"[data-testid=fair-verify][data-shoe='{shoe}']")
    verify.click(timeout=within(2 * ROUND_SECONDS) * 1000)
    result = page.get_by_test_id("fair-verify-result")
    expect(result).to_have_attribute("data-result", "bad")
    expect(result).to_contain_text(f"position {tampered['position']}")


@pytest.mark.parametrize("server", [RESHUFFLING], indirect=True)
def test_verify_this_shoe_recomputes_the_revealed_shoe(
    open_page: PageFactory, server: LiveServer
) -> None:
    """After shoe_revealed, "Verify this shoe" recomputes the shuffle, salts and root in the
    page and says it matches every card seen."""
    page = open_page("/#/t/t1")
    wait_open(page)
    # A shoe the page saw from its commitment: the one after the first it sees revealed.
    page.wait_for_function(
        "window.__baccarat.tables.get('t1').log.some((e) => e.kind === 'shoe_committed')",
        timeout=within(2 * ROUND_SECONDS) * 1000,
    )
    shoe = page.evaluate("window.__baccarat.tables.get('t1').fair.current.shoe")
    verify = page.locator(f"[data-testid=fair-verify][data-shoe='{shoe}']")
    verify.click(timeout=within(3 * ROUND_SECONDS) * 1000)
    result = page.get_by_test_id("fair-verify-result")
    expect(result).to_have_attribute("data-result", "ok")
    expect(result).to_contain_text("cards, root matches")
    seen = page.evaluate(f"window.__baccarat.tables.get('t1').fair.shoes.get({shoe}).seen.size")
    assert seen >= 5  # the burn's shown card, the card(s) burned, and at least four dealt
    expect(result).to_contain_text(f"Verified: {seen} cards, root matches")


def test_a_page_joining_mid_shoe_checks_the_cards_of_its_snapshot(
    open_page: PageFactory, server: LiveServer, observer: Callable[[str], Observer]
) -> None:
    """A page whose first snapshot of the table came mid-deal marks the snapshot's cards from
    snapshot.fair's proofs (it saw neither the seal nor their card events)."""
    obs = observer("t1")
    for attempt in range(4):
        round_no = obs.wait_for(lambda m: m.get("kind") == "round_opened")["round"] + attempt
        obs.wait_for(
            lambda m, r=round_no: m.get("kind") == "card" and m["round"] == r,
            seconds=within(3 * ROUND_SECONDS),
        )
        page = open_page("/#/t/t1")
        wait_open(page)
        page.wait_for_function("window.__baccarat.tables.get('t1').seq !== null")
        first = page.evaluate("window.__baccarat.tables.get('t1').log.find((e) => 'snapshot' in e)")
        if first["cards"] > 0:
            break
        page.close()
    else:
        pytest.fail("no page joined while a round was being dealt")
    # The snapshot's cards are marked as soon as their proofs are checked.
    page.wait_for_function(
        """(n) => {
          const fair = window.__baccarat.tables.get('t1').fair;
          const seen = [...fair.current.seen.values()];
          return seen.length >= n && seen.every((e) => e.state === 'ok');
        }""",
        arg=first["cards"],
    )
    log = page.evaluate("window.__baccarat.tables.get('t1').log")
    assert not [e for e in log if e.get("kind") == "shoe_sealed"]  # it never saw the seal


def test_without_webcrypto_the_page_says_cards_cannot_be_checked(
    open_page: PageFactory, server: LiveServer, shot: Callable[[Any, str], Any]
) -> None:
    """On plain http to another host there is no crypto.subtle (not a secure context): the
    page says the cards cannot be checked there, and marks no card as checked."""
    page = open_page("/")
    page.add_init_script(
        "Object.defineProperty(window, 'isSecureContext', {value: false});"
        "Object.defineProperty(Crypto.prototype, 'subtle', {get: () => undefined});"
    )
    page.goto(f"{server.url}?role=spectator#/t/t1")  # a new document: the script runs first
    wait_open(page)
    status = page.get_by_test_id("fair-status")
    expect(status).to_have_text("Cards cannot be checked here (needs https or localhost)")
    expect(status).to_have_attribute("data-available", "false")
    unchecked = page.locator("[data-testid=card][data-proof=unavailable]")
    expect(unchecked.first).to_be_attached(timeout=within(2 * ROUND_SECONDS) * 1000)
    assert page.locator("[data-testid=card][data-proof=ok]").count() == 0
    shot(page, "fair-unavailable")
