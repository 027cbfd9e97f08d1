"""Checking a revealed bac-shoe-v1 shoe against everything the table published about it.

The reveal lets anyone recompute the whole shoe; `verify_shoe` does so and names the first
thing that differs, in the order a reader would check by hand: the seed against the
commitment, the client seed against the entropy, the root, the cut card, then each card
shown, which must come from consecutive positions starting at 0 (burns included).
"""

from __future__ import annotations

import hmac
from collections.abc import Sequence
from dataclasses import dataclass

import server.core.fair.committed as v1
from server.core.cards import Card
from server.core.fair.merkle import ProofStep

__all__ = ["Mismatch", "ShoeChecker", "verify_shoe"]


@dataclass(frozen=True, slots=True)
class Mismatch:
    """The first difference found: `what` differs (at `position`, for a card or a position)."""

    # "seed", "commitment", "client_seed", "decks", "cut_from_end", "root", "cut_index",
    # "position", "card", and before the reveal (ShoeChecker) "seal" and "proof"
    what: str
    expected: str
    got: str
    position: int | None = None

    def __str__(self) -> str:
        where = f"position {self.position}: " if self.position is not None else ""
        return f"{where}{self.what} is {self.got}, expected {self.expected}"


def verify_shoe(
    *,
    seed: bytes,
    commitment: str,
    entropy: Sequence[str],
    client_seed: bytes,
    root: bytes,
    dealt: Sequence[tuple[int, Card]],
    decks: int,
    cut_from_end: tuple[int, int],
    cut_index: int | None = None,
) -> Mismatch | None:
    """None if every published value and every card in `dealt` is what the seed fixes.

    `dealt` lists (position, card) in the order shown, the burn's cards included; a shoe that
    ended early (a void, an operator's new shoe) shows a prefix, which is fine. `cut_index`
    is checked when given (the shoe_shuffled event publishes it).
    """
    if len(seed) != v1.SEED_SIZE:
        return Mismatch("seed", f"{v1.SEED_SIZE} bytes", f"{len(seed)} bytes")
    if v1.commit(seed) != commitment.lower():
        return Mismatch("commitment", v1.commit(seed), commitment)
    derived = v1.client_seed(entropy)
    if not hmac.compare_digest(derived, client_seed):
        return Mismatch("client_seed", derived.hex(), client_seed.hex())
    if bad := _bad_parameters(decks, cut_from_end):
        return bad
    shoe = v1.shuffle(seed, derived, decks, cut_from_end)
    if not hmac.compare_digest(shoe.root, root):
        return Mismatch("root", shoe.root.hex(), root.hex())
    if cut_index is not None and cut_index != shoe.cut_index:
        return Mismatch("cut_index", str(shoe.cut_index), str(cut_index))
    for expected_position, (position, card) in enumerate(dealt):
        if position != expected_position:
            # A skipped position hides a card; a reused one shows a card twice.
            return Mismatch("position", str(expected_position), str(position), position)
        if expected_position >= shoe.size:
            return Mismatch("position", f"below {shoe.size}", str(position), position)
        if card != shoe.cards[position]:
            return Mismatch("card", str(shoe.cards[position]), str(card), position)
    return None


def _bad_parameters(decks: int, cut_from_end: tuple[int, int]) -> Mismatch | None:
    """Published shoe parameters the algorithm refuses: a mismatch, not an exception."""
    if not 1 <= decks <= v1.MAX_DECKS:
        return Mismatch("decks", f"1-{v1.MAX_DECKS}", str(decks))
    low, high = cut_from_end
    if not 0 <= low <= high <= v1.max_cut_from_end(decks):
        return Mismatch("cut_from_end", f"within 0-{v1.max_cut_from_end(decks)}", f"{low}-{high}")
    return None


class ShoeChecker:
    """Follows one shoe as its events arrive and checks each card the moment it is shown.

    Fed values, not events: the caller (`baccarat verify`, the integration's tests) parses
    shoe_committed, shoe_sealed, each card or burnt card, and shoe_revealed, and calls the
    matching method. Before the reveal a card is checked against the root and for its
    position (the next one, no gap, no repeat); the reveal then runs verify_shoe over all.
    Every method returns the first mismatch, or None.
    """

    __slots__ = ("_dealt", "_sealed", "commitment", "cut_index")

    def __init__(self, commitment: str) -> None:
        self.commitment = commitment
        self.cut_index: int | None = None
        self._sealed: _Seal | None = None
        self._dealt: list[tuple[int, Card]] = []

    @property
    def dealt(self) -> list[tuple[int, Card]]:
        return list(self._dealt)

    def sealed(
        self,
        *,
        entropy: Sequence[str],
        client_seed: bytes,
        root: bytes,
        decks: int,
        cut_from_end: tuple[int, int],
    ) -> Mismatch | None:
        """shoe_sealed: the client seed can be checked against the entropy at once."""
        derived = v1.client_seed(entropy)
        if not hmac.compare_digest(derived, client_seed):
            return Mismatch("client_seed", derived.hex(), client_seed.hex())
        if bad := _bad_parameters(decks, cut_from_end):
            return bad
        self._sealed = _Seal(tuple(entropy), client_seed, root, decks, cut_from_end)
        return None

    def shuffled(self, cut_index: int) -> None:
        """shoe_shuffled publishes where the cut card is; the reveal checks it."""
        self.cut_index = cut_index

    def card(
        self, position: int, card: Card, salt: bytes, path: Sequence[ProofStep]
    ) -> Mismatch | None:
        """A card shown or burnt: its proof against the root, and that it is the next one."""
        seal = self._sealed
        if seal is None:
            return Mismatch("seal", "shoe_sealed before any card", "a card", position)
        expected = len(self._dealt)
        if position != expected:
            return Mismatch("position", str(expected), str(position), position)
        if not v1.verify_card(seal.root, position, card, salt, path, 52 * seal.decks):
            return Mismatch("proof", f"a proof of {card} against the root", "none", position)
        self._dealt.append((position, card))
        return None

    def revealed(self, seed: bytes) -> Mismatch | None:
        """shoe_revealed: recompute the shoe and check everything published about it."""
        seal = self._sealed
        if seal is None:  # a shoe that ended before its seal: only the commitment to check
            if len(seed) != v1.SEED_SIZE or v1.commit(seed) != self.commitment.lower():
                return Mismatch("commitment", self.commitment, "a seed that does not hash to it")
            return None
        return verify_shoe(
            seed=seed,
            commitment=self.commitment,
            entropy=seal.entropy,
            client_seed=seal.client_seed,
            root=seal.root,
            dealt=self._dealt,
            decks=seal.decks,
            cut_from_end=seal.cut_from_end,
            cut_index=self.cut_index,
        )


@dataclass(frozen=True, slots=True)
class _Seal:
    entropy: tuple[str, ...]
    client_seed: bytes
    root: bytes
    decks: int
    cut_from_end: tuple[int, int]
