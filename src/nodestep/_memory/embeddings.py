"""Semantic search's seam: an ``Embeddings`` turns texts into vectors, ranked by cosine.

A store made with ``embeddings=`` keeps, for each item it indexes, one vector per indexed
field: the fields are the store's ``index_fields`` unless a ``put`` names its own
(``index=["text"]``) or none (``index=False``). A field is a dotted path into the value;
``"$"`` is the whole value. A string field is embedded as it is, any other JSON value as
its JSON text; a missing field is skipped. ``search(query=...)`` embeds the query and
ranks each item by the best cosine similarity of its vectors. Ranking happens in Python on
every back end (PostgreSQL included: nodestep does not need pgvector), so its cost grows
with the number of items the namespace prefix and the filter leave.
"""

from __future__ import annotations

import json
import math
from abc import ABC, abstractmethod
from collections.abc import Sequence
from typing import Any

__all__ = ["Embeddings", "best_cosine", "cosine", "index_texts"]


class Embeddings(ABC):
    """Turn texts into vectors, for a memory store's semantic search.

    Subclass it and give ``embed``; override ``aembed`` too when your model has an async
    client (the default calls ``embed``).
    """

    @abstractmethod
    def embed(self, texts: Sequence[str]) -> list[list[float]]:
        """Return one vector per text, all of the same length.

        Args:
            texts: The texts to embed.

        Returns:
            The vectors, in the order of ``texts``.
        """

    async def aembed(self, texts: Sequence[str]) -> list[list[float]]:
        """Return ``embed(texts)``; override it for an async client.

        Args:
            texts: The texts to embed.

        Returns:
            The vectors, in the order of ``texts``.
        """
        return self.embed(texts)


def index_texts(value: dict[str, Any], fields: Sequence[str]) -> list[str]:
    """Return the texts of ``value``'s ``fields`` to embed, skipping missing fields."""
    texts = []
    for path in fields:
        found: Any = value
        if path != "$":
            for part in path.split("."):
                found = found.get(part) if isinstance(found, dict) else None
                if found is None:
                    break
        if found is None:
            continue
        texts.append(found if isinstance(found, str) else json.dumps(found, sort_keys=True))
    return texts


def cosine(a: Sequence[float], b: Sequence[float]) -> float:
    """Return the cosine similarity of two vectors; 0 when either has no length."""
    dot = sum(x * y for x, y in zip(a, b, strict=False))
    norm = math.sqrt(sum(x * x for x in a)) * math.sqrt(sum(y * y for y in b))
    return dot / norm if norm else 0.0


def best_cosine(query: Sequence[float], vectors: Sequence[Sequence[float]]) -> float | None:
    """Return the best cosine of ``query`` to ``vectors``; ``None`` when there are none."""
    return max((cosine(query, v) for v in vectors), default=None)
