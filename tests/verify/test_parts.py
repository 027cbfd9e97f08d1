"""The verifier's parts: payout ranges, where a reveal goes, a shoe revealed before its seal."""

from __future__ import annotations

from server.core.bets import Bet, Paytable, Spot, settle_bets
from server.core.cards import parse_card
from server.core.coup import resolve_coup
from server.core.fair import ALG, commit
from server.verify import OK, StreamVerifier, report
from server.verify.payouts import paid_range, paytable_of
from tests.verify.fair_streams import SEEDS, FairTable

BANKER_WINS = resolve_coup([parse_card(c) for c in ["Ks", "6c", "Ks", "Ac", "5s", "2d"]])  # 5 v 7


def paid(paytable: Paytable, bets: list[tuple[str, int]]) -> int:
    placed = [Bet(f"b{i}", "p", Spot(spot), amount) for i, (spot, amount) in enumerate(bets)]
    return sum(payout.credit for payout in settle_bets(paytable, placed, BANKER_WINS))


def test_banker_commission_rounds_per_bet_within_the_range() -> None:
    """Three Banker bets of 101, 101 and 98 are paid 283 in winnings (95 + 95 + 93), two less
    than the whole stake's 285: the range holds both, and nothing outside them."""
    table = Paytable()
    bets = [("banker", 101), ("banker", 101), ("banker", 98), ("player", 500)]
    allowed = paid_range(table, {"banker": 300, "player": 500}, len(bets), BANKER_WINS)
    assert paid(table, bets) == 300 + 283 in allowed
    assert paid(table, [("banker", 300)]) == 300 + 285 in allowed
    assert (allowed[0], allowed[-1]) == (300 + 285 - 3, 300 + 285)


def test_exact_spots_give_one_value() -> None:
    """Without a Banker win under commission there is no rounding: one value (here Player and
    Tie lose; on a no-commission table Banker winning with 7 pays 1 to 1)."""
    allowed = paid_range(Paytable(), {"player": 500, "tie": 100}, 2, BANKER_WINS)
    assert list(allowed) == [0]
    no_commission = paid_range(Paytable(no_commission=True), {"banker": 300}, 3, BANKER_WINS)
    assert list(no_commission) == [600]  # Banker won with 7: 1 to 1, exactly


def test_paytable_of_rules_maps_and_presets() -> None:
    rules = {"banker_commission_bp": 0, "no_commission": False, "tie_pays": 9, "pair_pays": 11}
    assert paytable_of(rules) == Paytable(banker_commission_bp=0, tie_pays=9)
    assert paytable_of("nocommission8") == Paytable(no_commission=True)
    assert paytable_of("nope") is None and paytable_of({"tie_pays": 9}) is None


def test_a_reveal_after_the_next_commitment_finds_its_shoe() -> None:
    """If a shoe's shoe_revealed comes after the next shoe_committed, its seed still opens
    the right shoe (matched by the commitment), and both shoes check out."""
    table = FairTable()
    table.shoe(seed=SEEDS[0])
    reveal = table.events.pop()
    table.shoe(seed=SEEDS[1], reveal=False)
    at = next(
        i for i, e in enumerate(table.events) if e["kind"] == "round_opened" and e["shoe"] == 2
    )
    table.events.insert(at + 1, reveal)
    for seq, event in enumerate(table.events, 1):
        event["seq"] = seq
    verifier = StreamVerifier()
    verifier.feed_all(table.events)
    lines, status = report(verifier)
    assert status == OK, lines
    assert lines[0].endswith("ok, revealed and recomputed")
    assert lines[1].endswith("not revealed yet")


def test_a_shoe_revealed_before_its_seal() -> None:
    """A shoe ended before its seal (a void in its first window) has its commitment to check."""
    table = FairTable()
    table.round = 1
    table.event("shoe_committed", alg=ALG, commitment=commit(SEEDS[2]), shoe=1)
    table.event("round_opened", closes_at=1, shoe=1, last_hand=False, rules="classic8")
    table.event("round_voided", reason="the server cannot go on", bets=0, refunded=0)
    table.event("shoe_revealed", seed=SEEDS[2].hex(), shoe=1)
    verifier = StreamVerifier()
    verifier.feed_all(table.events)
    lines, status = report(verifier)
    assert status == OK
    assert lines[0] == (
        "shoe 1 (table t1): 0 cards, 0 rounds: ok, revealed before its seal: the seed matches "
        "the commitment"
    )
    table.events[-1]["seed"] = SEEDS[3].hex()
    verifier = StreamVerifier()
    verifier.feed_all(table.events)
    assert report(verifier)[1] == 1
