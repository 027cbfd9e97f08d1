"""snapshot.fair: everything public about the table's current shoe, so a client that joins
mid-shoe can check the cards it sees (docs/fairness.md, docs/protocol.md), and never the
seed before the reveal."""

from __future__ import annotations

import json
import random

from server.core.fair import commit, decode_proof, verify_card
from server.core.rules import PRESETS
from server.core.table import (
    Phase,
    TableState,
    close_betting,
    coup_of,
    deal_next_card,
    open_round,
    settle_round,
)
from server.wire import shapes
from server.wire.shape_check import message_problems, shape_problems

RULES = PRESETS["classic8"]
SEED = random.Random(3).randbytes(32)


def _opened() -> TableState:
    return open_round(TableState("t1"), RULES, 1_000, 5_000, SEED).state


def _dealing(cards: int = 3, entropy: tuple[str, ...] = ("alice", "bob")) -> TableState:
    state = close_betting(_opened(), None, entropy).state
    for _ in range(cards):
        state = deal_next_card(state).state
    return state


def _fair(state: TableState) -> shapes.FairView:
    message = shapes.snapshot("t1", 9, "e1", state, 2_000, RULES)
    assert message_problems(message) == []
    fair = message["fair"]
    assert fair is not None
    assert shape_problems(fair, shapes.FairView) == []
    return fair


def test_no_committed_shoe_no_fair() -> None:
    """Before its first round a table has no shoe: `fair` is null (the key is always there)."""
    message = shapes.snapshot("t1", 0, "e1", TableState("t1"), 2_000, RULES)
    assert message["fair"] is None
    assert message_problems(message) == []


def test_before_the_seal_only_the_commitment() -> None:
    """In the shoe's first betting window: the commitment and parameters, nothing sealed."""
    fair = _fair(_opened())
    assert fair == {
        "shoe": 1,
        "alg": "bac-shoe-v1",
        "commitment": commit(SEED),
        "decks": 8,
        "cut_from_end": [7, 7],
        "sealed": False,
        "revealed": False,
    }


def test_mid_shoe_the_seal_and_a_proof_per_card_shown() -> None:
    """Mid-deal: root, client seed, entropy, cut and size as shoe_sealed/shoe_shuffled said,
    the next position, and a proof per snapshot card that checks against the root."""
    opened = _opened()
    sealing = close_betting(opened, None, ("alice", "bob"))
    sealed = {e["kind"]: e for e in sealing.events}
    state = sealing.state
    for _ in range(3):
        state = deal_next_card(state).state
    fair = _fair(state)
    assert fair["root"] == sealed["shoe_sealed"]["root"]
    assert fair["client_seed"] == sealed["shoe_sealed"]["client_seed"]
    assert fair["entropy"] == ["alice", "bob"] == sealed["shoe_sealed"]["entropy"]
    assert fair["cut_index"] == sealed["shoe_shuffled"]["cut_index"]
    assert fair["cards"] == sealed["shoe_shuffled"]["cards"] == 416
    first = sealed["burn"]["burned"] + 1
    assert fair["position"] == first + 3
    assert [p["position"] for p in fair["proofs"]] == [first, first + 1, first + 2]
    cards = [card for _, card in coup_of(state).deal_order[:3]]
    root = bytes.fromhex(fair["root"])
    for proof, card in zip(fair["proofs"], cards, strict=True):
        path = decode_proof(proof["proof"])
        salt = bytes.fromhex(proof["salt"])
        assert verify_card(root, proof["position"], card, salt, path, 416)


def test_the_seed_only_once_revealed() -> None:
    """No snapshot holds the seed before shoe_revealed; after it, the seed is public."""
    state = _dealing(cards=0)
    seed_hex = SEED.hex()
    while state.phase is Phase.DEALING and state.dealt < coup_of(state).cards_used:
        assert seed_hex not in json.dumps(_fair(state))
        state = deal_next_card(state).state
    assert seed_hex not in json.dumps(_fair(state))
    reshuffling = PRESETS["joggled6"]
    assert reshuffling.reshuffle_every_round
    transition, _ = settle_round(state, reshuffling, [])
    assert "shoe_revealed" in [e["kind"] for e in transition.events]
    fair = _fair(transition.state)
    assert fair["revealed"] is True and fair["seed"] == seed_hex
