"""A memory store refuses an embedder's answer that cannot be ranked, and a query whose
vector does not fit the items' vectors, rather than ranking by nan or by part of a vector.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from typing import Any

import pytest

from nodestep import GraphConfigError
from nodestep.memory import Embeddings, InMemoryMemoryStore


class Answers(Embeddings):
    def __init__(self, vector: Callable[[str], Any]) -> None:
        self.vector = vector

    def embed(self, texts: Sequence[str]) -> list[list[float]]:
        return [self.vector(text) for text in texts]


@pytest.mark.parametrize(
    "vector",
    [[float("nan"), 1.0], [float("inf"), 0.0], ["a", "b"], None, 3, []],
    ids=["nan", "inf", "text", "none", "int", "empty"],
)
def test_a_vector_that_cannot_be_ranked_is_refused_and_nothing_is_written(vector: Any) -> None:
    store = InMemoryMemoryStore(embeddings=Answers(lambda text: vector))
    expected = f"embeddings returned the vector {vector!r}; embed() returns for each text a"
    with pytest.raises(GraphConfigError, match="non-empty list of finite floats") as caught:
        store.put_sync(("docs",), "k", {"text": "tea"})
    assert expected in str(caught.value)
    with pytest.raises(GraphConfigError, match="non-empty list of finite floats"):
        store.search_sync(("docs",), query="tea")
    assert store.search_sync(("docs",)) == []


def test_vectors_of_two_lengths_in_one_answer_are_refused() -> None:
    store = InMemoryMemoryStore(
        embeddings=Answers(lambda text: [1.0] * len(text)), index_fields=["a", "b"]
    )
    with pytest.raises(GraphConfigError, match=r"vectors of \[2, 3\] numbers for one call"):
        store.put_sync(("docs",), "k", {"a": "ab", "b": "abc"})


def test_a_query_of_another_length_than_the_items_is_refused_naming_the_item() -> None:
    store = InMemoryMemoryStore(embeddings=Answers(lambda text: [1.0, 0.0, 0.0]))
    store.put_sync(("docs",), "old", {"text": "tea"})
    store.embeddings = Answers(lambda text: [1.0, 0.0])  # another model, another length
    with pytest.raises(GraphConfigError) as caught:
        store.search_sync(("docs",), query="tea")
    assert str(caught.value) == (
        "The memory item 'old' in ('docs',) was embedded as vectors of 3 numbers, and the "
        "query as one of 2: the store's embeddings changed since it was put. Put the items "
        "again to embed them anew, or search with the embeddings they were put with."
    )
    store.put_sync(("docs",), "old", {"text": "tea"})
    assert [(i.key, i.score) for i in store.search_sync(("docs",), query="tea")] == [("old", 1.0)]
