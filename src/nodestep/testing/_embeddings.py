"""``FakeEmbeddings``: a deterministic embedder for tests of semantic search.

Each word of a text (lower-cased, split on what is not a letter or digit) adds 1 to one
of ``dims`` buckets, chosen by the word's CRC-32: texts that share words point the same
way, so a query ranks the items that use its words first, and every run, machine and
Python gives the same vectors (``hash()`` would not: it is salted per process).
"""

from __future__ import annotations

import re
import zlib
from collections.abc import Sequence

from nodestep._memory.embeddings import Embeddings

__all__ = ["FakeEmbeddings"]

_WORD = re.compile(r"[^\W_]+")


class FakeEmbeddings(Embeddings):
    """Embed texts as bags of words, deterministically; for tests, not for meaning.

    Args:
        dims: The length of each vector.

    Attributes:
        calls: The texts of each ``embed`` call, in order, so a test can see what was
            embedded.
    """

    def __init__(self, dims: int = 256) -> None:
        if isinstance(dims, bool) or not isinstance(dims, int) or dims < 1:
            raise ValueError(f"FakeEmbeddings(dims=...) takes a whole number above 0, got {dims!r}")
        self.dims = dims
        self.calls: list[list[str]] = []

    def __repr__(self) -> str:
        return f"FakeEmbeddings(dims={self.dims}, calls={len(self.calls)})"

    def embed(self, texts: Sequence[str]) -> list[list[float]]:
        """Return one bag-of-words vector per text.

        Args:
            texts: The texts to embed.

        Returns:
            The vectors, in the order of ``texts``.
        """
        self.calls.append(list(texts))
        out = []
        for text in texts:
            vector = [0.0] * self.dims
            for word in _WORD.findall(text.lower()):
                vector[zlib.crc32(word.encode()) % self.dims] += 1.0
            out.append(vector)
        return out
