"""One shoe as its events arrive: commitment, seal, each card against the root, the reveal.

Pure: values in, findings out. The stream verifier (server/verify/stream.py) parses the
events and calls the matching method; every finding is a Finding naming the round and the
card when there is one.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass, field

import server.core.fair as fair
from server.core.cards import Card
from server.verify.fields import ShownCard

__all__ = ["Finding", "ShoeRecord"]


@dataclass(frozen=True, slots=True)
class Finding:
    """Something that does not match: where (round, card, position) and what differs."""

    detail: str
    round: int | None = None
    where: str = ""  # "card 3 (banker)", "burn (shown card)", ...
    position: int | None = None

    def describe(self) -> str:
        parts = [f"round {self.round}"] if self.round is not None else []
        parts += [self.where] if self.where else []
        parts += [f"position {self.position}"] if self.position is not None else []
        return ", ".join([*parts, self.detail])


@dataclass(slots=True)
class _Shown:
    card: ShownCard
    round: int
    where: str


@dataclass(slots=True)
class ShoeRecord:
    """What one shoe published and what was found about it."""

    table: str
    commitment: str | None  # None: the shoe was seen without its shoe_committed
    first_round: int
    number: int | None = None
    checker: fair.ShoeChecker | None = None
    accepted: list[str] = field(default_factory=list)  # entropy_accepted values, in order
    entropy: tuple[str, ...] = ()
    client_seed: bytes = b""
    root: bytes = b""
    decks: int = 0
    cut_from_end: tuple[int, int] = (0, 0)
    cut_index: int | None = None
    sealed: bool = False
    revealed: bool = False
    recomputed: bool = False
    shown: list[_Shown] = field(default_factory=list)
    used: set[int] = field(default_factory=set)  # the positions shown so far
    rounds: set[int] = field(default_factory=set)
    unchecked_cards: int = 0  # dealt in a shoe seen without its commitment
    findings: list[Finding] = field(default_factory=list)
    gap: str | None = None  # events missing inside the shoe: it cannot be vouched for

    def __post_init__(self) -> None:
        if self.commitment is not None:
            self.checker = fair.ShoeChecker(self.commitment)

    @property
    def checked(self) -> bool:
        """Its commitment was seen, so its cards can be checked."""
        return self.checker is not None

    def find(self, detail: str, round_no: int | None = None, where: str = "", **kw: int) -> None:
        self.findings.append(Finding(detail, round_no, where, kw.get("position")))

    def accept_entropy(self, value: str) -> None:
        self.accepted.append(value)

    def seal(
        self,
        round_no: int,
        entropy: list[str],
        client_seed: bytes,
        root: bytes,
        *,
        decks: int,
        cut_from_end: tuple[int, int],
    ) -> None:
        """shoe_sealed: the entropy against the entropy_accepted events, the client seed."""
        self.entropy, self.client_seed, self.root = tuple(entropy), client_seed, root
        self.decks, self.cut_from_end, self.sealed = decks, cut_from_end, True
        if self.checker is None:
            return
        if entropy != self.accepted:
            detail = (
                f"shoe_sealed entropy {entropy!r}, the entropy_accepted events {self.accepted!r}"
            )
            self.find(detail, round_no)
        mismatch = self.checker.sealed(
            entropy=entropy,
            client_seed=client_seed,
            root=root,
            decks=decks,
            cut_from_end=cut_from_end,
        )
        if mismatch is not None:
            self.find(f"shoe_sealed: {mismatch}", round_no)

    def show(self, card: ShownCard, round_no: int, where: str) -> None:
        """A card shown (dealt, burnt or the burn's shown card): its position and its proof."""
        self.rounds.add(round_no)
        used = card.position in self.used
        expected = self.shown[-1].card.position + 1 if self.shown else 0
        self.shown.append(_Shown(card, round_no, where))
        self.used.add(card.position)
        if self.checker is None:
            return
        at = {"position": card.position}
        if not self.sealed:
            self.find(f"{card.card} shown before shoe_sealed", round_no, where, **at)
            return
        if used:
            self.find(f"{card.card} at a position already used", round_no, where, **at)
        elif card.position > expected:
            gap = card.position - expected
            skipped = (
                f"position {expected}" if gap == 1 else f"positions {expected}-{card.position - 1}"
            )
            detail = f"{card.card}, but the next position is {expected}: {skipped} skipped"
            self.find(detail, round_no, where, **at)
        elif card.position < expected:
            detail = f"{card.card} out of order: the next position is {expected}"
            self.find(detail, round_no, where, **at)
        size = 52 * self.decks
        if not fair.verify_card(self.root, card.position, card.card, card.salt, card.path, size):
            self.find(
                f"{card.card}: its proof does not lead to the sealed root", round_no, where, **at
            )

    def reveal(self, round_no: int, seed: bytes) -> None:
        """shoe_revealed: the seed against the commitment, then the whole shoe recomputed."""
        self.revealed = True
        if self.checker is None or self.commitment is None:
            return
        if fair.commit(seed) != self.commitment.lower():
            self.find(f"shoe_revealed seed hashes to {fair.commit(seed)}, "
                      f"not the commitment {self.commitment}", round_no)  # fmt: skip
            return
        if not self.sealed:  # ended before its seal: only the commitment to check
            return
        dealt = [(shown.card.position, shown.card.card) for shown in self.shown]
        mismatch = fair.verify_shoe(
            seed=seed,
            commitment=self.commitment,
            entropy=self.entropy,
            client_seed=fair.client_seed(self.entropy),
            root=self.root,
            dealt=dealt,
            decks=self.decks,
            cut_from_end=self.cut_from_end,
            cut_index=self.cut_index,
        )
        self._compare_cards(seed)
        if mismatch is not None and mismatch.what == "root":
            detail = (
                f"the sealed root {mismatch.got} is not the revealed shoe's {mismatch.expected}"
            )
            self.find(detail, round_no)
        elif mismatch is not None and mismatch.what not in ("card", "position"):
            self.find(f"the revealed shoe: {mismatch}", round_no)
        self.recomputed = True

    def _compare_cards(self, seed: bytes) -> None:
        """Every card shown against the shoe the seed fixes, each difference named."""
        try:
            order: Sequence[Card] = fair.shuffle(
                seed, fair.client_seed(self.entropy), self.decks, self.cut_from_end
            ).cards
        except ValueError:
            return  # parameters the seal already reported
        for shown in self.shown:
            position = shown.card.position
            if not 0 <= position < len(order):
                self.find("outside the shoe", shown.round, shown.where, position=position)
            elif order[position] != shown.card.card:
                detail = f"{shown.card.card} shown, the revealed shoe has {order[position]}"
                self.find(detail, shown.round, shown.where, position=position)
