"""bac-shoe-v1 (server/core/fair, docs/fairness.md): vectors, shuffle, sampling, proofs, verify.

The doc's test vectors are parsed out of docs/fairness.md and checked twice: against the
implementation, and against `Reference` below, a reimplementation written from the doc alone
(hashlib and hmac only, no import of server.core.fair), so the spec and the code cannot
drift apart together.
"""

from __future__ import annotations

import hashlib
import hmac
import json
import re
import struct
from collections import Counter
from pathlib import Path
from typing import Any

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from server.core.cards import Card, Suit, encode_cards, full_deck
from server.core.fair import (
    ALG,
    MerkleTree,
    Mismatch,
    ProofStep,
    ShoeChecker,
    ShuffledShoe,
    Side,
    Stream,
    acceptance_limit,
    canonical_shoe,
    card_leaf,
    client_seed,
    client_seed_preimage,
    commit,
    decode_proof,
    encode_proof,
    merkle_root,
    path_sides,
    position_salt,
    shuffle,
    verify_card,
    verify_shoe,
)
from server.core.fair.merkle import leaf_hash, node_hash

DOC = Path(__file__).resolve().parents[2] / "docs" / "fairness.md"
SEED = bytes(range(32))
NO_ENTROPY = client_seed([])


def doc_vectors() -> dict[str, Any]:
    text = DOC.read_text()
    match = re.search(r"<!-- bac-shoe-v1 test vectors.*?-->\n```json\n(.*?)\n```", text, re.S)
    assert match, "docs/fairness.md has no test vector block"
    vectors: dict[str, Any] = json.loads(match.group(1))
    return vectors


VECTORS = doc_vectors()


class Reference:
    """bac-shoe-v1 from docs/fairness.md alone: deliberately shares no code with the server."""

    SUITS = "cdhs"
    RANKS = "A23456789TJQK"

    def __init__(self, seed: bytes, client_seed: bytes) -> None:
        self.seed, self.client_seed = seed, client_seed
        self.words: list[int] = []
        self.block = 0

    @staticmethod
    def client_seed_of(values: list[str]) -> bytes:
        pre = b"".join(len(v.encode()).to_bytes(4, "big") + v.encode() for v in values)
        return hashlib.sha256(pre).digest()

    def word(self) -> int:
        if not self.words:
            msg = self.client_seed + self.block.to_bytes(8, "big")
            out = hmac.new(self.seed, msg, "sha256").digest()
            self.words = [int.from_bytes(out[i : i + 4], "big") for i in range(0, 32, 4)]
            self.block += 1
        return self.words.pop(0)

    def randbelow(self, n: int) -> int:
        limit = 2**32 - 2**32 % n
        while (w := self.word()) >= limit:
            pass
        return w % n

    def shoe(self, decks: int, lo: int, hi: int) -> tuple[list[str], int]:
        cards = [r + s for _ in range(decks) for s in self.SUITS for r in self.RANKS]
        for i in range(len(cards) - 1, 0, -1):
            j = self.randbelow(i + 1)
            cards[i], cards[j] = cards[j], cards[i]
        return cards, len(cards) - (lo + self.randbelow(hi - lo + 1))

    def root(self, cards: list[str]) -> bytes:
        def salt(i: int) -> bytes:
            return hmac.new(self.seed, b"salt" + i.to_bytes(4, "big"), "sha256").digest()

        def mth(leaves: list[bytes]) -> bytes:  # RFC 6962 2.1, recursively
            if len(leaves) == 1:
                return leaves[0]
            k = 1 << ((len(leaves) - 1).bit_length() - 1)  # largest power of two < n
            return hashlib.sha256(b"\x01" + mth(leaves[:k]) + mth(leaves[k:])).digest()

        leaves = [
            hashlib.sha256(b"\x00" + i.to_bytes(4, "big") + c.encode() + salt(i)).digest()
            for i, c in enumerate(cards)
        ]
        return mth(leaves)


def rfc6962_root(leaves: list[bytes]) -> bytes:
    if len(leaves) == 1:
        return leaves[0]
    k = 1 << ((len(leaves) - 1).bit_length() - 1)
    return node_hash(rfc6962_root(leaves[:k]), rfc6962_root(leaves[k:]))


# --- the doc's vectors ----------------------------------------------------------------------


def test_the_doc_names_this_algorithm() -> None:
    assert VECTORS["alg"] == ALG == "bac-shoe-v1"


def test_commitment_vector() -> None:
    seed = bytes.fromhex(VECTORS["seed"])
    assert commit(seed) == VECTORS["commitment"] == hashlib.sha256(seed).hexdigest()


@pytest.mark.parametrize("case", VECTORS["client_seeds"], ids=lambda c: repr(c["entropy"]))
def test_client_seed_vectors(case: dict[str, Any]) -> None:
    assert client_seed_preimage(case["entropy"]).hex() == case["preimage"]
    assert client_seed(case["entropy"]).hex() == case["client_seed"]
    assert Reference.client_seed_of(case["entropy"]).hex() == case["client_seed"]


def test_client_seed_is_unambiguous_and_empty_is_sha256_of_nothing() -> None:
    assert client_seed([]) == hashlib.sha256(b"").digest()
    assert client_seed(["ab", "c"]) != client_seed(["a", "bc"])
    assert client_seed(["a", "b"]) != client_seed(["b", "a"])  # the order received counts
    assert client_seed([""]) != client_seed([])
    with pytest.raises(UnicodeEncodeError):
        client_seed(["\ud800"])  # a lone surrogate: the table must refuse it on arrival


def test_stream_vectors() -> None:
    vec = VECTORS["stream"]
    seed, cs = bytes.fromhex(vec["seed"]), bytes.fromhex(vec["client_seed"])
    assert [Stream.block(seed, cs, k).hex() for k in (0, 1)] == vec["blocks"]
    stream, ref = Stream(seed, cs), Reference(seed, cs)
    assert [stream.next_word() for _ in vec["words"]] == vec["words"]
    assert [ref.word() for _ in vec["words"]] == vec["words"]
    # The words are the blocks read as big-endian uint32s, nothing skipped.
    joined = bytes.fromhex("".join(vec["blocks"]))
    assert vec["words"] == [int.from_bytes(joined[i : i + 4], "big") for i in range(0, 40, 4)]


@pytest.mark.parametrize("case", VECTORS["randbelow"]["cases"], ids=lambda c: str(c["n"]))
def test_randbelow_vectors(case: dict[str, Any]) -> None:
    vec = VECTORS["randbelow"]
    seed, cs = bytes.fromhex(vec["seed"]), bytes.fromhex(vec["client_seed"])
    stream, ref = Stream(seed, cs), Reference(seed, cs)
    assert [stream.randbelow(case["n"]) for _ in case["draws"]] == case["draws"]
    assert stream.words_read == case["words_read"]
    assert [ref.randbelow(case["n"]) for _ in case["draws"]] == case["draws"]


def test_the_vectors_exercise_a_rejection() -> None:
    """At least one case reads more words than it draws, so rejection is pinned by a vector."""
    cases = VECTORS["randbelow"]["cases"]
    assert any(case["words_read"] > len(case["draws"]) for case in cases)


@pytest.mark.parametrize(
    "case", VECTORS["shoes"], ids=lambda c: f"{c['decks']}d{c['cut_from_end']}"
)
def test_shoe_vectors(case: dict[str, Any]) -> None:
    seed = bytes.fromhex(case["seed"])
    lo, hi = case["cut_from_end"]
    shoe = shuffle(seed, client_seed(case["entropy"]), case["decks"], (lo, hi))
    codes = encode_cards(shoe.cards)
    assert codes.startswith(case["first_cards"])
    assert hashlib.sha256(codes.encode()).hexdigest() == case["cards_sha256"]
    if "cards" in case:
        assert codes == case["cards"]
    assert shoe.cut_index == case["cut_index"]
    assert shoe.burn.burned == case["burn"] and shoe.first_dealt == case["first_dealt"]
    assert shoe.root.hex() == case["root"]
    assert shoe.salts[0].hex() == case["salt_0"] == position_salt(seed, 0).hex()
    assert card_leaf(0, shoe.cards[0], shoe.salts[0]).hex() == case["leaf_0"]
    for proof in case["proofs"]:
        position = proof["position"]
        assert shoe.cards[position].code == proof["card"]
        assert shoe.salts[position].hex() == proof["salt"]
        assert encode_proof(shoe.proof(position).path) == proof["path"]
        card = shoe.cards[position]
        path = decode_proof(proof["path"])
        salt = bytes.fromhex(proof["salt"])
        assert verify_card(bytes.fromhex(case["root"]), position, card, salt, path, shoe.size)


@pytest.mark.parametrize(
    "case", VECTORS["shoes"], ids=lambda c: f"{c['decks']}d{c['cut_from_end']}"
)
def test_shoe_vectors_from_the_spec_alone(case: dict[str, Any]) -> None:
    seed = bytes.fromhex(case["seed"])
    ref = Reference(seed, Reference.client_seed_of(case["entropy"]))
    cards, cut_index = ref.shoe(case["decks"], *case["cut_from_end"])
    assert hashlib.sha256("".join(cards).encode()).hexdigest() == case["cards_sha256"]
    assert cut_index == case["cut_index"]
    assert ref.root(cards).hex() == case["root"]


# --- the shuffle ------------------------------------------------------------------------------


def test_canonical_shoe_is_the_projects_deck_order() -> None:
    shoe = canonical_shoe(2)
    assert shoe == full_deck() * 2
    assert shoe[0] == Card("A", Suit.CLUBS) and shoe[12] == Card("K", Suit.CLUBS)
    assert shoe[13] == Card("A", Suit.DIAMONDS) and shoe[51] == Card("K", Suit.SPADES)
    assert shoe[52] == Card("A", Suit.CLUBS)


seeds = st.binary(min_size=32, max_size=32)
entropies = st.lists(st.text(max_size=64), max_size=5)


@settings(max_examples=40, deadline=None)
@given(seed=seeds, entropy=entropies, decks=st.integers(1, 8))
def test_the_shuffle_is_a_permutation_of_the_canonical_shoe(
    seed: bytes, entropy: list[str], decks: int
) -> None:
    shoe = shuffle(seed, client_seed(entropy), decks, (7, 7))
    assert Counter(shoe.cards) == Counter(canonical_shoe(decks))
    assert shoe.cut_index == 52 * decks - 7


@settings(max_examples=25, deadline=None)
@given(seed=seeds, entropy=entropies)
def test_same_inputs_give_the_same_shoe_and_another_client_seed_another(
    seed: bytes, entropy: list[str]
) -> None:
    cs = client_seed(entropy)
    first, again = shuffle(seed, cs, 8, (7, 30)), shuffle(seed, cs, 8, (7, 30))
    assert first == again and first.root == again.root
    other = shuffle(seed, client_seed([*entropy, "one more"]), 8, (7, 30))
    assert other.cards != first.cards and other.root != first.root
    # The seed counts too, and the salts (so the leaves) depend on the seed alone.
    reseeded = shuffle(hashlib.sha256(seed).digest(), cs, 8, (7, 30))
    assert reseeded.cards != first.cards
    assert other.salts == first.salts != reseeded.salts


@settings(max_examples=30, deadline=None)
@given(seed=seeds, decks=st.integers(1, 8), data=st.data())
def test_the_cut_card_lies_in_the_rules_range(seed: bytes, decks: int, data: st.DataObject) -> None:
    half = 52 * decks // 2
    lo = data.draw(st.integers(0, half))
    hi = data.draw(st.integers(lo, half))
    shoe = shuffle(seed, NO_ENTROPY, decks, (lo, hi))
    assert lo <= shoe.size - shoe.cut_index <= hi


def test_the_cut_card_is_drawn_after_the_shuffle_from_the_same_stream() -> None:
    """The cut is the stream's next draw after Fisher-Yates: replaying the stream finds it."""
    shoe = shuffle(SEED, NO_ENTROPY, 1, (7, 26))
    stream = Stream(SEED, NO_ENTROPY)
    for i in range(51, 0, -1):
        stream.randbelow(i + 1)
    assert shoe.size - shoe.cut_index == 7 + stream.randbelow(20)
    cuts = {shuffle(SEED, client_seed([str(k)]), 1, (7, 26)).cut_index for k in range(40)}
    assert len(cuts) > 5  # a range is actually used


def test_the_burn_is_the_table_procedure_on_the_committed_order() -> None:
    for k in range(30):
        shoe = shuffle(SEED, client_seed([str(k)]), 8, (7, 7))
        value = shoe.cards[0].value
        assert shoe.burn.shown == shoe.cards[0]
        assert shoe.burn.burned == (10 if value == 0 else value)
        table_shoe = shoe.to_shoe()
        assert table_shoe.burn() == shoe.burn  # the table's Shoe burns the same cards
        assert table_shoe.position == shoe.first_dealt
        assert table_shoe.cut_index == shoe.cut_index


def test_the_seed_never_shows_in_a_repr() -> None:
    shoe = shuffle(SEED, NO_ENTROPY, 1, (7, 7))
    assert SEED.hex() not in repr(shoe) and repr(SEED) not in repr(shoe)


@pytest.mark.parametrize(
    ("seed", "cs", "decks", "cut"),
    [
        (bytes(31), NO_ENTROPY, 8, (7, 7)),
        (bytes(33), NO_ENTROPY, 8, (7, 7)),
        (SEED, b"short", 8, (7, 7)),
        (SEED, NO_ENTROPY, 0, (7, 7)),
        (SEED, NO_ENTROPY, 9, (7, 7)),
        (SEED, NO_ENTROPY, 8, (8, 7)),
        (SEED, NO_ENTROPY, 8, (-1, 7)),
        (SEED, NO_ENTROPY, 1, (7, 27)),
    ],
)
def test_bad_inputs_are_refused(seed: bytes, cs: bytes, decks: int, cut: tuple[int, int]) -> None:
    with pytest.raises(ValueError):
        shuffle(seed, cs, decks, cut)


def test_commit_refuses_a_seed_of_the_wrong_size() -> None:
    with pytest.raises(ValueError):
        commit(bytes(16))


# --- unbiased integers ------------------------------------------------------------------------


@pytest.mark.parametrize("n", [*range(1, 1000), 416, 2**31 - 1, 2**31, 2**31 + 1, 2**32 - 1, 2**32])
def test_the_accepted_range_is_the_largest_multiple_of_n(n: int) -> None:
    """Exact: each value in [0, n) is w mod n for exactly limit/n accepted words w."""
    limit = acceptance_limit(n)
    assert limit % n == 0
    assert 2**32 - n < limit <= 2**32


@pytest.mark.parametrize("n", [0, -1, 2**32 + 1])
def test_randbelow_refuses_an_impossible_range(n: int) -> None:
    with pytest.raises(ValueError):
        acceptance_limit(n)


class FixedWords(Stream):
    """A stream that returns given words, to watch rejection at the boundary."""

    def __init__(self, words: list[int]) -> None:
        super().__init__(SEED, NO_ENTROPY)
        self.queue = list(words)

    def next_word(self) -> int:
        self.words_read += 1
        return self.queue.pop(0)


@pytest.mark.parametrize("n", [3, 5, 6, 7, 52, 416, 2**31 + 1])
def test_words_at_or_above_the_limit_are_rejected(n: int) -> None:
    limit = acceptance_limit(n)
    stream = FixedWords([2**32 - 1, limit, limit - 1])
    assert stream.randbelow(n) == (limit - 1) % n == n - 1
    assert stream.words_read == 3


def test_a_power_of_two_never_rejects() -> None:
    stream = FixedWords([2**32 - 1])
    assert stream.randbelow(4) == 3 and stream.words_read == 1


def test_randbelow_is_uniform_on_a_fixed_stream() -> None:
    """Chi-square over 6 values and 60,000 draws of a fixed stream: deterministic, so it can
    never flake; the bound is the 99.9% critical value (df = 5)."""
    stream = Stream(SEED, NO_ENTROPY)
    draws = Counter(stream.randbelow(6) for _ in range(60_000))
    expected = 10_000
    chi2 = sum((draws[v] - expected) ** 2 / expected for v in range(6))
    assert chi2 < 20.52, chi2


def test_rejection_removes_the_bias_plain_modulo_would_have() -> None:
    """For n = 3 * 2**30, plain `w mod n` gives the values below 2**30 two words each: they
    would come out half the time instead of a third. Fixed stream, 4-sigma bounds."""
    n, low = 3 * 2**30, 2**30
    stream = Stream(SEED, client_seed(["bias"]))
    fair = sum(stream.randbelow(n) < low for _ in range(20_000))
    assert abs(fair - 20_000 / 3) < 4 * 67  # sigma = sqrt(20,000 * 1/3 * 2/3) ~ 67
    plain = sum(stream.next_word() % n < low for _ in range(20_000))
    assert abs(plain - 10_000) < 4 * 71  # what skipping the rejection would have done


# --- the Merkle tree and the proofs -----------------------------------------------------------


@pytest.mark.parametrize("size", [*range(1, 70), 104, 312, 416])
def test_the_tree_is_rfc6962s(size: int) -> None:
    leaves = [leaf_hash(struct.pack(">I", i)) for i in range(size)]
    tree = MerkleTree(leaves)
    assert tree.root == rfc6962_root(leaves) == merkle_root(leaves)
    for index in range(size):
        path = tree.proof(index)
        assert tuple(step.side for step in path) == path_sides(index, size)
        assert len(path) <= max(1, (size - 1).bit_length()) or size == 1


def test_an_empty_tree_is_refused() -> None:
    with pytest.raises(ValueError):
        MerkleTree([])


@pytest.mark.parametrize("decks", [1, 8])
def test_every_position_verifies_against_the_root(decks: int) -> None:
    shoe = shuffle(SEED, NO_ENTROPY, decks, (7, 7))
    for position in range(shoe.size):
        proof = shoe.proof(position)
        assert proof.card == shoe.cards[position]
        assert verify_card(shoe.root, position, proof.card, proof.salt, proof.path, shoe.size)
        wire = decode_proof(encode_proof(proof.path))
        assert verify_card(shoe.root, position, proof.card, proof.salt, wire, shoe.size)


def _other_card(card: Card) -> Card:
    return Card("K" if card.rank != "K" else "Q", card.suit)


@pytest.fixture(scope="module")
def eight_decks() -> ShuffledShoe:
    return shuffle(SEED, client_seed(["x"]), 8, (7, 7))


@pytest.mark.parametrize("position", [0, 1, 2, 137, 255, 256, 400, 414, 415])
def test_a_changed_card_salt_position_or_path_fails(
    eight_decks: ShuffledShoe, position: int
) -> None:
    shoe = eight_decks
    proof = shoe.proof(position)
    root, card, salt, path, size = shoe.root, proof.card, proof.salt, proof.path, shoe.size
    assert verify_card(root, position, card, salt, path, size)
    assert not verify_card(root, position, _other_card(card), salt, path, size)
    other_suit = Card(card.rank, Suit.HEARTS if card.suit is not Suit.HEARTS else Suit.SPADES)
    assert not verify_card(root, position, other_suit, salt, path, size)
    assert not verify_card(root, position, Card(card.rank), salt, path, size)  # no suit
    assert not verify_card(root, position, card, bytes(32), path, size)
    assert not verify_card(root, position, card, shoe.salts[(position + 1) % size], path, size)
    assert not verify_card(root, position, card, salt[:31], path, size)
    for moved in (position - 1, position + 1, position + 512, -1):
        assert not verify_card(root, moved, card, salt, path, size)
    assert not verify_card(root, position, card, salt, path, position)  # outside the shoe
    assert not verify_card(root, position, card, salt, path[:-1], size)
    assert not verify_card(root, position, card, salt, (*path, path[-1]), size)
    for k, (side, sibling) in enumerate(path):
        flipped = Side.LEFT if side is Side.RIGHT else Side.RIGHT
        swapped = (*path[:k], ProofStep(flipped, sibling), *path[k + 1 :])
        assert not verify_card(root, position, card, salt, swapped, size)
        bit = bytes([sibling[0] ^ 1]) + sibling[1:]
        changed = (*path[:k], ProofStep(side, bit), *path[k + 1 :])
        assert not verify_card(root, position, card, salt, changed, size)
    assert not verify_card(bytes(32), position, card, salt, path, size)


def test_a_position_committed_twice_cannot_be_shown_from_the_other_leaf() -> None:
    """A cheating tree with position 5 at leaves 5 and 9: the card at leaf 9 reaches the root,
    but its path has leaf 9's sides, so it is refused as position 5."""
    salts = [bytes([i]) * 32 for i in range(16)]
    honest, swapped = Card("9", Suit.HEARTS), Card("K", Suit.SPADES)
    leaves = [card_leaf(i, Card("A", Suit.CLUBS), salts[i]) for i in range(16)]
    leaves[5] = card_leaf(5, honest, salts[5])
    leaves[9] = card_leaf(5, swapped, salts[9])
    tree = MerkleTree(leaves)
    assert verify_card(tree.root, 5, honest, salts[5], tree.proof(5), 16)
    assert not verify_card(tree.root, 5, swapped, salts[9], tree.proof(9), 16)


@settings(max_examples=30, deadline=None)
@given(seed=seeds, entropy=entropies, decks=st.integers(1, 8), data=st.data())
def test_any_card_proof_verifies_and_a_changed_card_does_not(
    seed: bytes, entropy: list[str], decks: int, data: st.DataObject
) -> None:
    shoe = shuffle(seed, client_seed(entropy), decks, (7, 7))
    position = data.draw(st.integers(0, shoe.size - 1))
    proof = shoe.proof(position)
    assert verify_card(shoe.root, position, proof.card, proof.salt, proof.path, shoe.size)
    forged = _other_card(proof.card)
    assert not verify_card(shoe.root, position, forged, proof.salt, proof.path, shoe.size)


@pytest.mark.parametrize(
    "wire",
    [
        "L" + "00" * 32,
        ["X" + "00" * 32],
        ["L" + "00" * 31],
        ["L" + "AB" * 32],
        ["L" + "0" * 63 + " "],
        [7],
        ["R" + "00" * 32 + "00"],
    ],
)
def test_a_malformed_wire_proof_is_refused(wire: object) -> None:
    with pytest.raises(ValueError):
        decode_proof(wire)


# --- verify_shoe ------------------------------------------------------------------------------

ENTROPY = ["alice", "bob"]


@pytest.fixture(scope="module")
def published() -> dict[str, Any]:
    shoe = shuffle(SEED, client_seed(ENTROPY), 6, (14, 26))
    dealt = [(i, shoe.cards[i]) for i in range(shoe.first_dealt + 40)]
    return {
        "seed": SEED,
        "commitment": commit(SEED),
        "entropy": ENTROPY,
        "client_seed": client_seed(ENTROPY),
        "root": shoe.root,
        "dealt": dealt,
        "decks": 6,
        "cut_from_end": (14, 26),
        "cut_index": shoe.cut_index,
    }


def test_an_honest_shoe_verifies(published: dict[str, Any]) -> None:
    assert verify_shoe(**published) is None
    assert verify_shoe(**{**published, "dealt": [], "cut_index": None}) is None  # a void at once
    shoe = shuffle(SEED, client_seed(ENTROPY), 6, (14, 26))
    whole = [(i, card) for i, card in enumerate(shoe.cards)]
    assert verify_shoe(**{**published, "dealt": whole}) is None


def test_a_changed_card_is_named_with_its_position(published: dict[str, Any]) -> None:
    dealt = list(published["dealt"])
    position, card = dealt[20]
    dealt[20] = (position, _other_card(card))
    mismatch = verify_shoe(**{**published, "dealt": dealt})
    assert mismatch is not None
    assert (mismatch.what, mismatch.position) == ("card", 20)
    assert mismatch.expected == str(card) and mismatch.got == str(_other_card(card))
    assert str(mismatch).startswith("position 20: card is ")


@pytest.mark.parametrize(
    ("change", "what", "position"),
    [
        ({"seed": bytes(32)}, "commitment", None),
        ({"seed": bytes(31)}, "seed", None),
        ({"commitment": "00" * 32}, "commitment", None),
        ({"entropy": ["bob", "alice"]}, "client_seed", None),
        ({"entropy": ["alice"]}, "client_seed", None),
        ({"client_seed": client_seed([])}, "client_seed", None),
        ({"root": bytes(32)}, "root", None),
        ({"decks": 8}, "root", None),
        ({"cut_index": 0}, "cut_index", None),
    ],
)
def test_each_published_value_is_checked(
    published: dict[str, Any], change: dict[str, Any], what: str, position: int | None
) -> None:
    mismatch = verify_shoe(**{**published, **change})
    assert mismatch is not None and (mismatch.what, mismatch.position) == (what, position)


def test_the_commitment_is_compared_without_regard_to_case(published: dict[str, Any]) -> None:
    assert verify_shoe(**{**published, "commitment": commit(SEED).upper()}) is None


def test_a_skipped_or_reused_position_is_a_mismatch(published: dict[str, Any]) -> None:
    dealt = list(published["dealt"])
    skipped = dealt[:10] + dealt[11:]
    mismatch = verify_shoe(**{**published, "dealt": skipped})
    assert mismatch is not None and (mismatch.what, mismatch.position) == ("position", 11)
    assert mismatch.expected == "10"
    reused = [*dealt[:10], dealt[9], *dealt[10:]]
    mismatch = verify_shoe(**{**published, "dealt": reused})
    assert mismatch is not None and (mismatch.what, mismatch.position) == ("position", 9)
    late_start = dealt[1:]  # the burn's shown card (position 0) is missing
    mismatch = verify_shoe(**{**published, "dealt": late_start})
    assert mismatch is not None and (mismatch.what, mismatch.position) == ("position", 1)


def test_a_card_past_the_end_of_the_shoe_is_a_mismatch(published: dict[str, Any]) -> None:
    shoe = shuffle(SEED, client_seed(ENTROPY), 6, (14, 26))
    too_many = [*[(i, c) for i, c in enumerate(shoe.cards)], (shoe.size, shoe.cards[0])]
    mismatch = verify_shoe(**{**published, "dealt": too_many})
    assert mismatch is not None and (mismatch.what, mismatch.position) == ("position", shoe.size)


@pytest.mark.parametrize(
    ("change", "what"),
    [
        ({"decks": 0}, "decks"),
        ({"decks": 9}, "decks"),
        ({"cut_from_end": (30, 20)}, "cut_from_end"),
    ],
)
def test_impossible_published_parameters_are_a_mismatch_not_a_crash(
    published: dict[str, Any], change: dict[str, Any], what: str
) -> None:
    mismatch = verify_shoe(**{**published, **change})
    assert mismatch is not None and mismatch.what == what


# --- ShoeChecker: as the events arrive --------------------------------------------------------


def _follow(shoe: ShuffledShoe, entropy: list[str], cut: tuple[int, int]) -> ShoeChecker:
    checker = ShoeChecker(commit(shoe.seed))
    sealed = checker.sealed(
        entropy=entropy,
        client_seed=client_seed(entropy),
        root=shoe.root,
        decks=shoe.size // 52,
        cut_from_end=cut,
    )
    assert sealed is None
    checker.shuffled(shoe.cut_index)
    return checker


def test_the_checker_follows_an_honest_shoe_to_its_reveal() -> None:
    shoe = shuffle(SEED, client_seed(ENTROPY), 8, (7, 7))
    checker = _follow(shoe, ENTROPY, (7, 7))
    for position in range(shoe.first_dealt + 30):  # the burn, then some coups
        proof = shoe.proof(position)
        assert checker.card(position, proof.card, proof.salt, proof.path) is None
    assert len(checker.dealt) == shoe.first_dealt + 30
    assert checker.revealed(SEED) is None
    assert checker.revealed(bytes(32)) == Mismatch("commitment", commit(bytes(32)), commit(SEED))


def test_the_checker_catches_a_changed_card_before_the_reveal_and_after() -> None:
    shoe = shuffle(SEED, client_seed(ENTROPY), 8, (7, 7))
    checker = _follow(shoe, ENTROPY, (7, 7))
    for position in range(12):
        proof = shoe.proof(position)
        assert checker.card(position, proof.card, proof.salt, proof.path) is None
    proof = shoe.proof(12)
    mismatch = checker.card(12, _other_card(proof.card), proof.salt, proof.path)
    assert mismatch is not None and (mismatch.what, mismatch.position) == ("proof", 12)
    # A verifier that only saw the cards (no proofs) catches it at the reveal.
    dealt = [*checker.dealt, (12, _other_card(proof.card))]
    after = verify_shoe(
        seed=SEED,
        commitment=commit(SEED),
        entropy=ENTROPY,
        client_seed=client_seed(ENTROPY),
        root=shoe.root,
        dealt=dealt,
        decks=8,
        cut_from_end=(7, 7),
    )
    assert after is not None and (after.what, after.position) == ("card", 12)


def test_the_checker_wants_consecutive_positions_and_a_seal_first() -> None:
    shoe = shuffle(SEED, client_seed(ENTROPY), 8, (7, 7))
    early = ShoeChecker(commit(SEED))
    proof = shoe.proof(0)
    assert early.card(0, proof.card, proof.salt, proof.path) == Mismatch(
        "seal", "shoe_sealed before any card", "a card", 0
    )
    checker = _follow(shoe, ENTROPY, (7, 7))
    skipped = shoe.proof(1)
    mismatch = checker.card(1, skipped.card, skipped.salt, skipped.path)
    assert mismatch is not None and (mismatch.what, mismatch.expected) == ("position", "0")
    assert checker.card(0, proof.card, proof.salt, proof.path) is None
    reused = checker.card(0, proof.card, proof.salt, proof.path)
    assert reused is not None and (reused.what, reused.position) == ("position", 0)


def test_the_checker_checks_the_seal_and_a_shoe_that_ended_before_it() -> None:
    checker = ShoeChecker(commit(SEED))
    mismatch = checker.sealed(
        entropy=["alice"],
        client_seed=client_seed(ENTROPY),
        root=bytes(32),
        decks=8,
        cut_from_end=(7, 7),
    )
    assert mismatch is not None and mismatch.what == "client_seed"
    assert checker.revealed(SEED) is None  # voided before the seal: only the commitment
    assert checker.revealed(bytes(32)) is not None
    bad_cut = ShoeChecker(commit(SEED)).sealed(
        entropy=[], client_seed=NO_ENTROPY, root=bytes(32), decks=1, cut_from_end=(0, 27)
    )
    assert bad_cut is not None and bad_cut.what == "cut_from_end"


def test_the_checker_checks_the_published_cut_card() -> None:
    shoe = shuffle(SEED, client_seed(ENTROPY), 8, (7, 20))
    checker = _follow(shoe, ENTROPY, (7, 20))
    checker.shuffled(shoe.cut_index + 1)
    mismatch = checker.revealed(SEED)
    assert mismatch is not None and mismatch.what == "cut_index"
