"""The committed byte stream of bac-shoe-v1 and unbiased integers drawn from it.

Block k is HMAC-SHA256(key=seed, msg=client_seed || uint64be(k)), k = 0, 1, 2, ...; the
blocks are read in order as big-endian uint32 words, eight per block. `randbelow(n)` rejects
words at or above the largest multiple of n not exceeding 2**32, so every value in [0, n) is
exactly equally likely (no modulo bias). docs/fairness.md specifies this byte by byte.
"""

from __future__ import annotations

import hashlib
import hmac

__all__ = ["WORD_SPACE", "Stream", "acceptance_limit"]

WORD_SPACE = 1 << 32  # a word is a uint32
_WORDS_PER_BLOCK = 8  # 32 bytes of HMAC-SHA256 output


def acceptance_limit(n: int) -> int:
    """Words below this are accepted by randbelow(n): the largest multiple of n <= 2**32."""
    if not 1 <= n <= WORD_SPACE:
        raise ValueError(f"randbelow needs 1 <= n <= 2**32, got {n}")
    return WORD_SPACE - WORD_SPACE % n


class Stream:
    """The deterministic word source for one shoe. Not a CSPRNG of its own: its secrecy is the
    seed's, and anyone holding seed and client seed can replay it (which is the point)."""

    __slots__ = ("_block", "_client_seed", "_counter", "_key", "_word", "words_read")

    def __init__(self, seed: bytes, client_seed: bytes) -> None:
        self._key = bytes(seed)
        self._client_seed = bytes(client_seed)
        self._counter = 0
        self._block = b""
        self._word = _WORDS_PER_BLOCK  # forces the first block on the first read
        self.words_read = 0

    @staticmethod
    def block(seed: bytes, client_seed: bytes, counter: int) -> bytes:
        """Block `counter` of the stream (32 bytes)."""
        message = client_seed + counter.to_bytes(8, "big")
        return hmac.new(seed, message, hashlib.sha256).digest()

    def next_word(self) -> int:
        """The next uint32 of the stream."""
        if self._word == _WORDS_PER_BLOCK:
            self._block = self.block(self._key, self._client_seed, self._counter)
            self._counter += 1
            self._word = 0
        offset = 4 * self._word
        self._word += 1
        self.words_read += 1
        return int.from_bytes(self._block[offset : offset + 4], "big")

    def randbelow(self, n: int) -> int:
        """A uniform integer in [0, n), by rejection sampling over whole words."""
        limit = acceptance_limit(n)
        while True:
            word = self.next_word()
            if word < limit:
                return word % n

    def randrange(self, stop: int, /) -> int:
        """randbelow under the name server.core.shoe.fisher_yates calls."""
        return self.randbelow(stop)
