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

from server.core.cards import Card
from server.core.fair import committed as v1

__all__ = ["Mismatch", "verify_shoe"]


@dataclass(frozen=True, slots=True)
class Mismatch:
    """The first difference found: `what` differs (at `position`, for a card or a position)."""

    what: str  # "seed", "commitment", "client_seed", "root", "cut_index", "position" or "card"
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
