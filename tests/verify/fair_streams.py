"""Build a table's event stream with committed shoes, from the pure core alone.

Events are shaped as docs/fairness.md ("Events") and docs/protocol.md say: seed ->
shoe_committed, entropy_accepted, shoe_sealed (client seed, root), shoe_shuffled, burn (the
shown card and every burnt card with position, salt and proof), the coups dealt with
server.core.coup from consecutive positions, round_result, round_settled (paid from the
paytable), and shoe_revealed. Options make a dishonest server: a changed card (with or
without a forged tree), a skipped or reused position.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

import server.core.fair as fair
from server.core.bets import Bet, Paytable, Spot, settle_bets
from server.core.cards import Card, parse_card
from server.core.coup import resolve_coup
from server.core.fair.merkle import MerkleTree, encode_proof
from server.core.table import result_fields

Message = dict[str, Any]
TABLE = "t1"
SEEDS = [bytes([n]) * 32 for n in range(1, 10)]
STAKES = {"banker": 1000, "player": 300, "tie": 100, "player_pair": 100}


@dataclass
class Tamper:
    """How a dishonest server departs from the committed shoe."""

    cards: dict[int, Card] = field(default_factory=dict)  # position -> the card shown instead
    forge_tree: bool = False  # seal a root over the changed cards (every proof then passes)
    skip: int | None = None  # this position is never shown
    reuse: int | None = None  # this position is shown twice


class FairTable:
    """A table's events, seq by seq; `shoe()` appends one whole shoe."""

    def __init__(self, table: str = TABLE, decks: int = 1) -> None:
        self.table, self.decks = table, decks
        self.seq, self.round, self.shoes = 0, 0, 0
        self.events: list[Message] = []
        self.paytable = Paytable()

    def event(self, kind: str, **fields: Any) -> Message:
        self.seq += 1
        event = {"type": "event", "table": self.table, "seq": self.seq, "round": self.round,
                 "ts": 1_800_000_000_000 + self.seq, "kind": kind, **fields}  # fmt: skip
        self.events.append(event)
        return event

    def shoe(
        self,
        rounds: int = 3,
        seed: bytes = SEEDS[0],
        entropy: tuple[str, ...] = ("alice", "bob"),
        tamper: Tamper | None = None,
        reveal: bool = True,
    ) -> fair.ShuffledShoe:
        tamper = tamper or Tamper()
        self.shoes += 1
        self.round += 1
        shoe = fair.shuffle(seed, fair.client_seed(entropy), self.decks, (7, 7))
        cards = [tamper.cards.get(i, card) for i, card in enumerate(shoe.cards)]
        tree = shoe.tree
        if tamper.forge_tree:
            leaves = [fair.card_leaf(i, card, shoe.salts[i]) for i, card in enumerate(cards)]
            tree = MerkleTree(leaves)
        self.event("shoe_committed", alg=fair.ALG, commitment=fair.commit(seed), shoe=self.shoes)
        self.event("round_opened", closes_at=1, shoe=self.shoes, last_hand=False, rules="classic8")
        for value in entropy:
            self.event("entropy_accepted", value=value)
        self._totals()
        self.event("betting_closed")
        self.event("shoe_sealed", alg=fair.ALG, entropy=list(entropy),
                   client_seed=shoe.client_seed.hex(), root=tree.root.hex(), cut_from_end=[7, 7],
                   decks=self.decks)  # fmt: skip
        self.event("shoe_shuffled", shoe=self.shoes, decks=self.decks, cut_index=shoe.cut_index,
                   cards=shoe.size)  # fmt: skip
        # As the server sends it: the shown card's face in `shown` and its proof beside it;
        # each burnt card as {position, card: {rank, suit}, salt, proof}.
        shown = proof_fields(0, cards, shoe.salts, tree)
        face = {"rank": shown.pop("rank"), "suit": shown.pop("suit")}
        burnt = []
        for position in range(1, shoe.first_dealt):
            fields = proof_fields(position, cards, shoe.salts, tree)
            card = {"rank": fields.pop("rank"), "suit": fields.pop("suit")}
            burnt.append({"position": position, "card": card, **fields})
        self.event("burn", shoe=self.shoes, shown=face, burned=len(burnt), **shown, burnt=burnt)
        positions = deal_positions(shoe.first_dealt, shoe.size, tamper)
        for number in range(rounds):
            if number:
                self.round += 1
                self.event("round_opened", closes_at=1, shoe=self.shoes, last_hand=False,
                           rules="classic8")  # fmt: skip
                self._totals()
                self.event("betting_closed")
            positions = self._deal(positions, cards, shoe, tree)
        if reveal:
            self.event("shoe_revealed", seed=seed.hex(), shoe=self.shoes)
        return shoe

    def _totals(self) -> None:
        self.event("bet_totals", totals=dict(STAKES), bettors=2, bets=len(STAKES))

    def _deal(
        self, positions: list[int], cards: list[Card], shoe: fair.ShuffledShoe, tree: MerkleTree
    ) -> list[int]:
        coup = resolve_coup([cards[p] for p in positions[:6]])
        for index, (hand, _card) in enumerate(coup.deal_order):
            self.event("card", hand=hand.value, index=index,
                       **proof_fields(positions[index], cards, shoe.salts, tree))  # fmt: skip
        self.event("round_result", **result_fields(coup))
        bets = [
            Bet(f"b{i}", "p", Spot(spot), stake) for i, (spot, stake) in enumerate(STAKES.items())
        ]
        paid = sum(payout.credit for payout in settle_bets(self.paytable, bets, coup))
        self.event("round_settled", winner=coup.winner.value, bets=len(bets),
                   staked=sum(STAKES.values()), paid=paid)  # fmt: skip
        return positions[coup.cards_used :]


def proof_fields(
    position: int, cards: list[Card], salts: tuple[bytes, ...], tree: MerkleTree
) -> Message:
    card = cards[position]
    return {"rank": card.rank, "suit": card.suit.value if card.suit else None,
            "position": position, "salt": salts[position].hex(),
            "proof": encode_proof(tree.proof(position))}  # fmt: skip


def deal_positions(first: int, size: int, tamper: Tamper) -> list[int]:
    positions = [p for p in range(first, size) if p != tamper.skip]
    if tamper.reuse is not None:
        at = positions.index(tamper.reuse)
        positions.insert(at + 1, tamper.reuse)
    return positions


def card(text: str) -> Card:
    return parse_card(text)


def event_at(events: list[Message], position: int) -> Message:
    """The card event (a `card`) that shows this position."""
    return next(e for e in events if e["kind"] == "card" and e["position"] == position)


def other_card(original: Card) -> Card:
    """A card of another baccarat value and rank than `original` (the result changes too)."""
    return Card("9" if original.rank != "9" else "2", original.suit)
