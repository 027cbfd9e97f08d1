"""The pieces the server's messages are built of: a table's rules, a card, the roads, a bet
and a payout, each as the wire shows it (a TypedDict, keys in wire order) with the function
that builds it from the core's value. server/wire/shapes.py is the protocol's index of them.
"""

from __future__ import annotations

from typing import Literal, TypedDict, cast

from server.core.bets import Bet, Payout
from server.core.cards import Card
from server.core.coup import Hand
from server.core.events import HandName, WinnerName
from server.core.fair import ALG
from server.core.fair_table import FairShoe, card_proof, face, sealed_root
from server.core.roads import Roads
from server.core.rules import TableRules
from server.core.shoe import Shoe

__all__ = [
    "BeadCell",
    "BetView",
    "BigRoadCell",
    "CardProof",
    "CardView",
    "FairView",
    "HandTotals",
    "MarkName",
    "OutcomeName",
    "PayoutView",
    "RoadsView",
    "RulesView",
    "SpotName",
    "TableInfo",
    "bet_view",
    "card_view",
    "fair_view",
    "payout_view",
    "roads_view",
    "rules_view",
    "table_info",
]

SpotName = Literal["player", "banker", "tie", "player_pair", "banker_pair"]
OutcomeName = Literal["win", "lose", "push"]
MarkName = Literal["red", "blue"]


class RulesView(TypedDict):
    name: str  # the rules' key (the preset's): what round_opened.rules says
    title: str  # the table's name for players
    decks: int
    cut_card_from_end: int
    reshuffle_every_round: bool
    banker_commission_bp: int
    no_commission: bool
    tie_pays: int
    pair_pays: int
    limits: dict[str, list[int]]  # spot -> [minimum, maximum]
    description: str


class _TableId(TypedDict):
    id: str


class TableInfo(_TableId, RulesView):
    """welcome.tables[]: the table id, then its rules."""


class CardView(TypedDict):
    hand: HandName
    rank: str
    suit: str | None


class CardProof(TypedDict):
    """A card's place in the committed shoe, as a `card` event carries it."""

    position: int
    salt: str
    proof: list[str]


class _FairView(TypedDict):
    shoe: int
    alg: str
    commitment: str  # hex SHA-256 of the seed
    decks: int
    cut_from_end: list[int]  # [lo, hi]
    sealed: bool
    revealed: bool


class FairView(_FairView, total=False):
    """snapshot.fair: everything public about the table's current shoe (docs/fairness.md).
    The seed only once `revealed` (shoe_revealed published it); the sealed fields once
    `sealed`; `entropy` unless the shoe was sealed by a node that did not keep it."""

    root: str
    client_seed: str
    entropy: list[str]
    cut_index: int
    cards: int  # the shoe's size N (the Merkle tree's leaves)
    position: int  # the position of the next card to be dealt
    proofs: list[CardProof]  # for each of snapshot.cards, in the same order
    seed: str


class BeadCell(TypedDict):
    row: int
    col: int
    winner: WinnerName
    player_pair: bool  # the coup's first two Player cards were of one rank
    banker_pair: bool


class BigRoadCell(TypedDict):
    row: int
    col: int
    winner: WinnerName
    ties: int
    player_pair: bool  # the decision's coup (not its ties') had a Player pair
    banker_pair: bool


class RoadsView(TypedDict):
    bead_plate: list[BeadCell]
    big_road: list[BigRoadCell]
    big_eye_boy: list[MarkName]
    small_road: list[MarkName]
    cockroach_pig: list[MarkName]


class BetView(TypedDict):
    bet_id: str
    spot: SpotName
    amount: int


class PayoutView(TypedDict):
    bet_id: str
    spot: SpotName
    amount: int
    outcome: OutcomeName
    credit: int


class HandTotals(TypedDict):
    player: int
    banker: int


def rules_view(rules: TableRules) -> RulesView:
    return {
        "name": rules.name,
        "title": rules.title,
        "decks": rules.decks,
        "cut_card_from_end": rules.cut_card_from_end,
        "reshuffle_every_round": rules.reshuffle_every_round,
        "banker_commission_bp": rules.paytable.banker_commission_bp,
        "no_commission": rules.paytable.no_commission,
        "tie_pays": rules.paytable.tie_pays,
        "pair_pays": rules.paytable.pair_pays,
        "limits": {
            spot.value: [limit.minimum, limit.maximum] for spot, limit in rules.limits.spots.items()
        },
        "description": rules.description,
    }


def table_info(table_id: str, rules: TableRules) -> TableInfo:
    return {"id": table_id, **rules_view(rules)}


def card_view(hand: str, card: Card) -> CardView:
    """One dealt card; `hand` may be a core Hand or its value (the wire gets the plain value)."""
    return {"hand": Hand(hand).value, **face(card)}


def fair_view(
    shoe_number: int, fair: FairShoe | None, shoe: Shoe | None, round_start: int, dealt: int
) -> FairView | None:
    """The public part of a committed shoe (never its seed before the reveal); None for a
    table with no committed shoe (before its first round, or an older node's shoe).
    `dealt` cards of this round were dealt from `round_start` on."""
    if fair is None:
        return None
    view: FairView = {
        "shoe": shoe_number,
        "alg": ALG,
        "commitment": fair.commitment,
        "decks": fair.decks,
        "cut_from_end": list(fair.cut_from_end),
        "sealed": fair.sealed,
        "revealed": fair.revealed,
    }
    if fair.client_seed is not None and shoe is not None:
        view["root"] = sealed_root(fair, shoe)
        view["client_seed"] = fair.client_seed.hex()
        if fair.entropy is not None:
            view["entropy"] = list(fair.entropy)
        view["cut_index"] = shoe.cut_index
        view["cards"] = len(shoe.cards)
        view["position"] = shoe.position
        positions = range(round_start, round_start + dealt)
        view["proofs"] = [_card_proof(fair, shoe, position) for position in positions]
    if fair.revealed:
        view["seed"] = fair.seed.hex()
    return view


def _card_proof(fair: FairShoe, shoe: Shoe, position: int) -> CardProof:
    salt, proof = card_proof(fair, shoe, position)
    return {"position": position, "salt": salt, "proof": proof}


def roads_view(roads: Roads) -> RoadsView:
    return cast(RoadsView, roads.to_dict())  # Roads.to_dict is this shape, cell for cell


def bet_view(bet: Bet) -> BetView:
    return {"bet_id": bet.bet_id, "spot": bet.spot.value, "amount": bet.amount}


def payout_view(payout: Payout) -> PayoutView:
    return cast(PayoutView, payout.to_dict())
