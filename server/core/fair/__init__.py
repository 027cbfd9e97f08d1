"""Provably fair shoes (issue 18): bac-shoe-v1, specified byte by byte in docs/fairness.md.

- stream: the HMAC-SHA256 word stream and unbiased randbelow (rejection sampling);
- merkle: the RFC 6962 tree and side-naming inclusion proofs;
- committed: commitment, client seed, the shuffle, salts, leaves, verify_card;
- verify: verify_shoe, which recomputes a revealed shoe and names the first mismatch, and
  ShoeChecker, which checks each card as it is shown and the whole shoe at the reveal.

All pure: the seed comes in as bytes from the caller's CSPRNG (the runtime's `secrets`).
"""

from server.core.fair.committed import (
    ALG,
    SEED_SIZE,
    CardProof,
    ShuffledShoe,
    canonical_shoe,
    card_leaf,
    client_seed,
    client_seed_preimage,
    commit,
    max_cut_from_end,
    position_salt,
    shuffle,
    verify_card,
)
from server.core.fair.merkle import (
    MerkleTree,
    ProofStep,
    Side,
    decode_proof,
    encode_proof,
    merkle_root,
    path_sides,
)
from server.core.fair.stream import Stream, acceptance_limit
from server.core.fair.verify import Mismatch, ShoeChecker, verify_shoe

__all__ = [
    "ALG",
    "SEED_SIZE",
    "CardProof",
    "MerkleTree",
    "Mismatch",
    "ProofStep",
    "ShoeChecker",
    "ShuffledShoe",
    "Side",
    "Stream",
    "acceptance_limit",
    "canonical_shoe",
    "card_leaf",
    "client_seed",
    "client_seed_preimage",
    "commit",
    "decode_proof",
    "encode_proof",
    "max_cut_from_end",
    "merkle_root",
    "path_sides",
    "position_salt",
    "shuffle",
    "verify_card",
    "verify_shoe",
]
