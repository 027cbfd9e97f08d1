"""The committed shoe at the table: bac-shoe-v1 (server/core/fair/) wired into the round.

A table's shoe goes through four steps (docs/fairness.md, "Events"):

1. `commit_shoe` at the open_round of a new shoe: the runtime's fresh 32-byte seed is kept
   in the state (FairShoe) and only its commitment is published (`shoe_committed`). The
   shoe has no order yet.
2. During that round's betting window players add entropy (the store keeps it, by the
   store's clock: Store.add_entropy); `entropy_window` says which round takes it.
3. `seal_shoe` at the close of that window: the accepted values give the client seed, which
   with the seed fixes the order, the cut card and the Merkle tree (`shoe_sealed`,
   `shoe_shuffled`, `burn` with a proof per card shown or burned).
4. `reveal_shoe` when the shoe is over: the seed is published (`shoe_revealed`).

Each card dealt carries its proof (`card_proof`). The tree is rebuilt from the seed and the
shoe's order when a node first needs it (after a failover too), then kept in a small cache.

Pure: nothing here draws a random number; the seed comes in as bytes from the runtime.
"""

from __future__ import annotations

from collections import OrderedDict
from collections.abc import Sequence
from dataclasses import dataclass, field, replace

from server.core import events as ev
from server.core.cards import Card
from server.core.events import BurntCard, CardFace, EventPayload
from server.core.fair import (
    ALG,
    MerkleTree,
    ShuffledShoe,
    canonical_shoe,
    card_leaf,
    client_seed,
    commit,
    encode_proof,
    position_salt,
    shuffle,
)
from server.core.rules import TableRules
from server.core.shoe import RandRange, Shoe, fisher_yates

__all__ = [
    "FairShoe",
    "card_proof",
    "commit_shoe",
    "face",
    "reveal_shoe",
    "seal_shoe",
    "sealed_root",
]

TREES_CACHED = 16  # shoes whose tree a node keeps (a few tables' current shoes)


def face(card: Card) -> CardFace:
    return {"rank": card.rank, "suit": card.suit.value if card.suit else None}


@dataclass(frozen=True, slots=True)
class FairShoe:
    """What the table state keeps of its committed shoe: the secret seed (never shown before
    the reveal: left out of repr, never in a snapshot), the shoe's parameters, and once
    sealed its client seed. With the shoe's order (TableState.shoe) a new owner rebuilds
    the same tree, salts and proofs after a failover."""

    seed: bytes = field(repr=False)
    decks: int
    cut_from_end: tuple[int, int]
    client_seed: bytes | None = None  # None until the seal
    # The accepted entropy values the seal used, in order (public: in shoe_sealed); None
    # until the seal, and for a shoe sealed by a node that did not keep them.
    entropy: tuple[str, ...] | None = None
    revealed: bool = False  # the seed was published: nothing more is dealt from this shoe
    # TESTS ONLY: the order came from an injected source (seal_shoe's `rig`), not from the
    # committed stream, so the reveal will not recompute it; its proofs still check.
    rigged: bool = False

    @property
    def sealed(self) -> bool:
        return self.client_seed is not None

    @property
    def commitment(self) -> str:
        return commit(self.seed)

    def to_dict(self) -> dict[str, object]:
        """Plain values (hex for bytes), as the rest of TableState.to_dict."""
        return {
            "seed": self.seed.hex(),
            "decks": self.decks,
            "cut_from_end": list(self.cut_from_end),
            "client_seed": self.client_seed.hex() if self.client_seed is not None else None,
            "entropy": list(self.entropy) if self.entropy is not None else None,
            "revealed": self.revealed,
            "rigged": self.rigged,
        }

    @classmethod
    def from_dict(cls, data: object) -> FairShoe | None:
        if not isinstance(data, dict):
            return None
        seed, decks, cut, sealed = (
            data[k] for k in ("seed", "decks", "cut_from_end", "client_seed")
        )
        if not (isinstance(seed, str) and type(decks) is int and isinstance(cut, list)):
            raise TypeError(f"a committed shoe of {type(seed).__name__}, {decks!r}, {cut!r}")
        if not (sealed is None or isinstance(sealed, str)) or len(cut) != 2:
            raise TypeError(f"a committed shoe sealed with {type(sealed).__name__}, cut {cut!r}")
        low, high = (int(value) for value in cut)
        entropy = data.get("entropy")  # absent: stored before the state kept it
        return cls(
            bytes.fromhex(seed),
            decks,
            (low, high),
            bytes.fromhex(sealed) if sealed is not None else None,
            tuple(str(v) for v in entropy) if isinstance(entropy, list) else None,
            revealed=data.get("revealed") is True,
            rigged=data.get("rigged") is True,
        )


def commit_shoe(seed: bytes, rules: TableRules, shoe_number: int) -> tuple[FairShoe, EventPayload]:
    """A new shoe's secret and its `shoe_committed` event; the order comes at the seal."""
    cut = rules.cut_card_from_end
    fair = FairShoe(seed, rules.decks, (cut, cut))
    return fair, ev.shoe_committed(shoe=shoe_number, alg=ALG, commitment=commit(seed))


def seal_shoe(
    fair: FairShoe, shoe_number: int, entropy: Sequence[str], rig: RandRange | None = None
) -> tuple[FairShoe, Shoe, list[EventPayload]]:
    """Seal the shoe with the players' entropy: its order, cut card and burn, the `Shoe` to
    deal from (just past the burn) and the events `shoe_sealed`, `shoe_shuffled`, `burn`.

    `rig` is FOR TESTS ONLY: it shuffles the shoe instead of the committed stream (as the
    shuffle before bac-shoe-v1 did), so tests can stack the cards; the proofs still check
    against the root, but the revealed seed does not recompute that order."""
    assert not fair.sealed, "the shoe is sealed already"
    values = list(entropy)
    sealed = replace(
        fair, client_seed=client_seed(values), entropy=tuple(values), rigged=rig is not None
    )
    committed = _committed(sealed, _rigged_order(sealed, rig) if rig is not None else None)
    events: list[EventPayload] = [
        ev.shoe_sealed(
            shoe=shoe_number,
            alg=ALG,
            entropy=values,
            client_seed=committed.client_seed.hex(),
            root=committed.root.hex(),
            cut_from_end=list(fair.cut_from_end),
            decks=fair.decks,
        ),
        ev.shoe_shuffled(
            shoe=shoe_number,
            decks=fair.decks,
            cut_index=committed.cut_index,
            cards=committed.size,
        ),
        _burn_event(committed, shoe_number),
    ]
    shoe = Shoe(committed.cards, committed.first_dealt, committed.cut_index)
    return sealed, shoe, events


def _rigged_order(fair: FairShoe, rig: RandRange) -> ShuffledShoe:
    cards = canonical_shoe(fair.decks)
    fisher_yates(cards, rig)
    return _tree_over(fair, cards, len(cards) - fair.cut_from_end[1])


def _burn_event(shoe: ShuffledShoe, shoe_number: int) -> EventPayload:
    shown = shoe.proof(0)
    burnt: list[BurntCard] = []
    for position in range(1, shoe.first_dealt):
        proof = shoe.proof(position)
        burnt.append(
            ev.burnt_card(
                position=position,
                card=face(proof.card),
                salt=proof.salt.hex(),
                proof=encode_proof(proof.path),
            )
        )
    return ev.burn(
        shoe=shoe_number,
        shown=face(shown.card),
        burned=shoe.burn.burned,
        position=0,
        salt=shown.salt.hex(),
        proof=encode_proof(shown.path),
        burnt=burnt,
    )


def card_proof(fair: FairShoe | None, shoe: Shoe, position: int) -> tuple[str, list[str]]:
    """The salt (hex) and Merkle path (wire steps) of the card at `position`. A shoe started
    before the table committed its shoes (a state stored by an older node) has none: ("", [])."""
    if fair is None or not fair.sealed:
        return "", []
    proof = _committed(fair, None, shoe).proof(position)
    return proof.salt.hex(), encode_proof(proof.path)


def sealed_root(fair: FairShoe, shoe: Shoe) -> str:
    """The sealed shoe's Merkle root (hex), as `shoe_sealed` published it."""
    return _committed(fair, None, shoe).root.hex()


def reveal_shoe(fair: FairShoe, shoe_number: int) -> tuple[FairShoe, EventPayload]:
    """The shoe is over: publish its seed. Nothing more may be dealt from it."""
    return replace(fair, revealed=True), ev.shoe_revealed(shoe=shoe_number, seed=fair.seed.hex())


# --- the trees, rebuilt once per shoe and node ---------------------------------------------------

_TREES: OrderedDict[tuple[object, ...], ShuffledShoe] = OrderedDict()


def _committed(fair: FairShoe, made: ShuffledShoe | None, shoe: Shoe | None = None) -> ShuffledShoe:
    """The sealed shoe with its salts and tree: `made` when just built, else the cached one
    for this seed, else rebuilt (from the stream, or over the stored order of a rigged shoe)."""
    assert fair.client_seed is not None
    # Everything the shoe is a function of (a rigged one: of its order too, checked below).
    key = (fair.seed, fair.client_seed, fair.decks, fair.cut_from_end, fair.rigged)
    if made is None:
        made = _TREES.get(key)
        # The key fixes a committed shoe's order; only a rigged one (tests) is compared.
        if made is not None and fair.rigged and shoe is not None and list(made.cards) != shoe.cards:
            made = None  # the same seed, another order: only tests reuse seeds with a rig
    if made is None:
        if fair.rigged and shoe is not None:
            made = _tree_over(fair, shoe.cards, shoe.cut_index)
        else:
            made = shuffle(fair.seed, fair.client_seed, fair.decks, fair.cut_from_end)
    _TREES[key] = made
    _TREES.move_to_end(key)
    while len(_TREES) > TREES_CACHED:
        _TREES.popitem(last=False)
    return made


def _tree_over(fair: FairShoe, cards: Sequence[Card], cut_index: int) -> ShuffledShoe:
    """A ShuffledShoe over a given order with the seed's salts (rigged shoes: tests only)."""
    assert fair.client_seed is not None
    salts = tuple(position_salt(fair.seed, i) for i in range(len(cards)))
    tree = MerkleTree([card_leaf(i, card, salts[i]) for i, card in enumerate(cards)])
    return ShuffledShoe(tuple(cards), cut_index, fair.client_seed, fair.seed, salts, tree)
