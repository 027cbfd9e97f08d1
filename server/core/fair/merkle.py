"""A Merkle tree as RFC 6962 section 2.1 defines it, with inclusion proofs that name sides.

Leaf hash = SHA-256(0x00 || leaf data), inner hash = SHA-256(0x01 || left || right): the
prefixes keep a leaf from ever passing for an inner node (second-preimage attacks). A level
with an odd number of nodes promotes its last node unchanged to the next level (never
duplicates it: duplication lets two different leaf lists share a root, CVE-2012-2459). This
level-by-level rule builds exactly RFC 6962's tree (split at the largest power of two below n).
"""

from __future__ import annotations

import hashlib
import re
from collections.abc import Sequence
from enum import StrEnum
from typing import NamedTuple

__all__ = [
    "MerkleTree",
    "ProofStep",
    "Side",
    "decode_proof",
    "encode_proof",
    "leaf_hash",
    "merkle_root",
    "node_hash",
    "path_sides",
    "root_from_path",
]

HASH_SIZE = 32
_WIRE_STEP = re.compile(r"[LR][0-9a-f]{64}")


class Side(StrEnum):
    """Where the sibling sits: hash it on the left or on the right of the running hash."""

    LEFT = "L"
    RIGHT = "R"


class ProofStep(NamedTuple):
    side: Side
    sibling: bytes


def leaf_hash(data: bytes) -> bytes:
    return hashlib.sha256(b"\x00" + data).digest()


def node_hash(left: bytes, right: bytes) -> bytes:
    return hashlib.sha256(b"\x01" + left + right).digest()


def path_sides(index: int, size: int) -> tuple[Side, ...]:
    """The sides of the proof of leaf `index` in a tree of `size` leaves, bottom up.

    A verifier checks a proof's sides against these: the leaf then sits at exactly `index`,
    so a tree with the same position committed twice cannot show either one at will.
    """
    if not 0 <= index < size:
        raise ValueError(f"leaf {index} is outside a tree of {size}")
    sides: list[Side] = []
    count = size
    while count > 1:
        if index % 2:
            sides.append(Side.LEFT)
        elif index + 1 < count:
            sides.append(Side.RIGHT)
        # else: the last node of an odd level is promoted, no step
        index //= 2
        count = (count + 1) // 2
    return tuple(sides)


def root_from_path(leaf: bytes, path: Sequence[ProofStep]) -> bytes:
    running = leaf
    for side, sibling in path:
        running = node_hash(sibling, running) if side is Side.LEFT else node_hash(running, sibling)
    return running


class MerkleTree:
    """Every level of the tree, leaves first; built once per shoe (about 2n hashes)."""

    __slots__ = ("levels",)

    def __init__(self, leaves: Sequence[bytes]) -> None:
        if not leaves:
            raise ValueError("a Merkle tree needs at least one leaf")
        level = list(leaves)
        self.levels: list[list[bytes]] = [level]
        while len(level) > 1:
            paired = [node_hash(level[i], level[i + 1]) for i in range(0, len(level) - 1, 2)]
            if len(level) % 2:
                paired.append(level[-1])  # promoted, not duplicated
            level = paired
            self.levels.append(level)

    @property
    def size(self) -> int:
        return len(self.levels[0])

    @property
    def root(self) -> bytes:
        return self.levels[-1][0]

    def proof(self, index: int) -> tuple[ProofStep, ...]:
        """The sibling hashes from leaf `index` up to the root, each with its side."""
        if not 0 <= index < self.size:
            raise IndexError(f"leaf {index} is outside a tree of {self.size}")
        steps: list[ProofStep] = []
        for level in self.levels[:-1]:
            if index % 2:
                steps.append(ProofStep(Side.LEFT, level[index - 1]))
            elif index + 1 < len(level):
                steps.append(ProofStep(Side.RIGHT, level[index + 1]))
            index //= 2
        return tuple(steps)


def merkle_root(leaves: Sequence[bytes]) -> bytes:
    """The root over leaf hashes in order (a whole tree is built: use MerkleTree for proofs)."""
    return MerkleTree(leaves).root


def encode_proof(path: Sequence[ProofStep]) -> list[str]:
    """Wire form: one string per step, the side letter then the sibling in lower-case hex."""
    return [step.side.value + step.sibling.hex() for step in path]


def decode_proof(wire: object) -> tuple[ProofStep, ...]:
    """Inverse of encode_proof; raises ValueError on anything malformed (wire input)."""
    if not isinstance(wire, list):
        raise ValueError("a proof is a list of strings")
    steps = []
    for item in wire:
        if not isinstance(item, str) or not _WIRE_STEP.fullmatch(item):
            raise ValueError(f"bad proof step {item!r}: 'L' or 'R' and 64 lower-case hex digits")
        steps.append(ProofStep(Side(item[0]), bytes.fromhex(item[1:])))
    return tuple(steps)
