"""bac-shoe-v1: the committed shoe, its shuffle, and the per-card commitments.

Pure functions of their inputs (docs/fairness.md specifies every byte): the caller brings
the 32-byte seed from the OS CSPRNG and the players' entropy values; nothing here reads a
clock, a socket or a random source.
"""

from __future__ import annotations

import hashlib
import hmac
import struct
from collections.abc import Sequence
from dataclasses import dataclass, field

from server.core.cards import Card, full_deck
from server.core.fair.merkle import MerkleTree, ProofStep, leaf_hash, path_sides, root_from_path
from server.core.fair.stream import Stream
from server.core.shoe import Burn, Shoe, burn_count, fisher_yates

__all__ = [
    "ALG",
    "MAX_DECKS",
    "SEED_SIZE",
    "CardProof",
    "ShuffledShoe",
    "canonical_shoe",
    "card_leaf",
    "client_seed",
    "client_seed_preimage",
    "commit",
    "max_cut_from_end",
    "position_salt",
    "shuffle",
    "verify_card",
]

ALG = "bac-shoe-v1"
SEED_SIZE = 32
MAX_DECKS = 8  # TableRules allows 1-8 decks


def _check_seed(seed: bytes) -> None:
    if len(seed) != SEED_SIZE:
        raise ValueError(f"a {ALG} seed is exactly {SEED_SIZE} bytes, got {len(seed)}")


def commit(seed: bytes) -> str:
    """The commitment published before anything of the shoe is dealt: SHA-256(seed), hex."""
    _check_seed(seed)
    return hashlib.sha256(seed).hexdigest()


def client_seed_preimage(values: Sequence[str]) -> bytes:
    """The bytes the client seed hashes: each value as uint32be(byte length) || UTF-8 bytes.

    Length prefixes make the encoding unambiguous (["ab", "c"] and ["a", "bc"] differ), and
    no values give the empty string. Values are taken exactly as published, unnormalised; a
    string that is not valid Unicode (a lone surrogate) raises UnicodeEncodeError, so the
    table must refuse it when it arrives.
    """
    out = bytearray()
    for value in values:
        raw = value.encode("utf-8")
        out += struct.pack(">I", len(raw)) + raw
    return bytes(out)


def client_seed(values: Sequence[str]) -> bytes:
    """SHA-256 of the accepted entropy values in the order received (32 bytes)."""
    return hashlib.sha256(client_seed_preimage(values)).digest()


def canonical_shoe(decks: int) -> list[Card]:
    """The unshuffled shoe: `decks` copies of full_deck(), i.e. suits c, d, h, s, each A-K."""
    if not 1 <= decks <= MAX_DECKS:
        raise ValueError(f"decks must be 1-{MAX_DECKS}, got {decks}")
    return full_deck() * decks


def max_cut_from_end(decks: int) -> int:
    """The most cards a cut card may leave behind (TableRules' bound: half the shoe)."""
    return 52 * decks // 2


def position_salt(seed: bytes, position: int) -> bytes:
    """The salt of one position: HMAC-SHA256(seed, "salt" || uint32be(position)).

    Secret until the card at that position is shown; without it the 52 possible cards of a
    leaf could be tried one by one against a published hash.
    """
    _check_seed(seed)
    return hmac.new(seed, b"salt" + struct.pack(">I", position), hashlib.sha256).digest()


def card_leaf(position: int, card: Card, salt: bytes) -> bytes:
    """Leaf hash: SHA-256(0x00 || uint32be(position) || card code (2 ASCII bytes) || salt)."""
    return leaf_hash(struct.pack(">I", position) + card.code.encode("ascii") + salt)


@dataclass(frozen=True, slots=True)
class CardProof:
    """What a card event carries so a client can check the card at once."""

    position: int
    card: Card
    salt: bytes
    path: tuple[ProofStep, ...]


@dataclass(frozen=True, slots=True)
class ShuffledShoe:
    """A bac-shoe-v1 shoe: the order, the cut card, and the tree committing every position.

    The seed is kept (the table needs it for the reveal and a new owner after a failover) but
    left out of repr, so logging a shoe never leaks it.
    """

    cards: tuple[Card, ...]
    cut_index: int  # cards in front of the cut card, as Shoe.cut_index
    client_seed: bytes
    seed: bytes = field(repr=False)
    salts: tuple[bytes, ...] = field(repr=False, compare=False)
    tree: MerkleTree = field(repr=False, compare=False)

    @property
    def size(self) -> int:
        return len(self.cards)

    @property
    def commitment(self) -> str:
        return commit(self.seed)

    @property
    def root(self) -> bytes:
        return self.tree.root

    @property
    def burn(self) -> Burn:
        """The shoe's burn: position 0 is shown, positions 1..burned go face down."""
        shown = self.cards[0]
        return Burn(shown, min(burn_count(shown), self.size - 1))

    @property
    def first_dealt(self) -> int:
        """The position of the first card of the first hand."""
        return 1 + self.burn.burned

    def proof(self, position: int) -> CardProof:
        return CardProof(
            position, self.cards[position], self.salts[position], self.tree.proof(position)
        )

    def to_shoe(self) -> Shoe:
        """The table's Shoe over the same order and cut card; its burn() equals self.burn."""
        return Shoe(self.cards, 0, self.cut_index)


def shuffle(
    seed: bytes, client_seed: bytes, decks: int, cut_from_end: tuple[int, int]
) -> ShuffledShoe:
    """The shoe that seed and client seed fix, in four steps on one stream.

    1. Fisher-Yates over canonical_shoe(decks) (server.core.shoe.fisher_yates: for i from
       N-1 down to 1, j = randbelow(i+1), swap i and j).
    2. The cut card: lo + randbelow(hi - lo + 1) cards behind it, from the next words of the
       same stream (a word is drawn even when lo == hi, so the step is always there).
    3. The burn follows from the order: the card at position 0 says how many follow it face down.
    4. A salt per position and the Merkle tree over the positions' leaves.
    """
    _check_seed(seed)
    if len(client_seed) != 32:
        raise ValueError(f"a client seed is 32 bytes, got {len(client_seed)}")
    cards = canonical_shoe(decks)
    low, high = cut_from_end
    if not 0 <= low <= high <= max_cut_from_end(decks):
        raise ValueError(
            f"cut card range {low}-{high} must lie within 0-{max_cut_from_end(decks)} cards"
        )
    stream = Stream(seed, client_seed)
    fisher_yates(cards, stream)
    behind = low + stream.randbelow(high - low + 1)
    salts = tuple(position_salt(seed, i) for i in range(len(cards)))
    tree = MerkleTree([card_leaf(i, card, salts[i]) for i, card in enumerate(cards)])
    return ShuffledShoe(tuple(cards), len(cards) - behind, client_seed, seed, salts, tree)


def verify_card(
    root: bytes, position: int, card: Card, salt: bytes, path: Sequence[ProofStep], size: int
) -> bool:
    """Whether `card` is the card committed at `position` of a shoe of `size` cards.

    `size` (the shoe's card count, published when it is shuffled) fixes the sides the path
    must take, so the proof can only be the one of leaf `position`: a tree that committed the
    same position twice could otherwise show whichever card suited it.
    """
    if not 0 <= position < size or len(salt) != 32:
        return False
    if tuple(step.side for step in path) != path_sides(position, size):
        return False
    leaf = card_leaf(position, card, salt)
    return hmac.compare_digest(root_from_path(leaf, path), root)
