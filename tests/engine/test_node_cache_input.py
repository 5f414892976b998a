"""The node cache keys a task of a node with an input model on its task input too."""

from __future__ import annotations

from collections import Counter
from typing import Annotated, Any

import pytest
from pydantic import BaseModel, Field

from nodestep import (
    END,
    START,
    BaseState,
    CachePolicy,
    Command,
    Graph,
    InMemoryStateStore,
    NodeContext,
    Send,
    add,
    node,
)


class Book(BaseState):
    title: str = ""
    counts: Annotated[list[str], add] = Field(default_factory=list)


class Chunk(BaseModel):
    chunk: str


def book_graph(calls: Counter[str], policy: CachePolicy, *, store: bool) -> Graph[Book]:
    @node(cache=policy)
    def count(state: Book, part: Chunk) -> dict[str, Any]:
        calls[part.chunk] += 1
        return {"counts": [f"{part.chunk}: {len(part.chunk.split())}"]}

    @node(goto=[count])
    def split(state: Book, ctx: NodeContext) -> Command:
        return Command(goto=[Send(count, {"chunk": c}) for c in ctx.context["chunks"]])

    kw: dict[str, Any] = {"state_store": InMemoryStateStore()} if store else {}
    return Graph(Book, **kw).flow(START >> split, count >> END)


def _counts(graph: Graph[Book], *chunks: str) -> list[str]:
    # A new thread each call: only the cache links the runs.
    thread = {"thread_id": "+".join(chunks)} if graph.state_store is not None else {}
    return graph.invoke({"title": "t"}, context={"chunks": list(chunks)}, **thread).state.counts


@pytest.mark.parametrize("store", [False, True])
def test_the_default_key_covers_the_task_input(store: bool) -> None:
    calls: Counter[str] = Counter()
    graph = book_graph(calls, CachePolicy(), store=store)
    assert _counts(graph, "Tea grows on hills") == ["Tea grows on hills: 4"]
    assert _counts(graph, "One two") == ["One two: 2"]
    assert _counts(graph, "One two", "Tea grows on hills") == [
        "One two: 2",
        "Tea grows on hills: 4",
    ]
    assert calls == Counter({"Tea grows on hills": 1, "One two": 1})


def test_a_key_function_keys_on_the_state_and_the_task_input_together() -> None:
    calls: Counter[str] = Counter()
    graph = book_graph(calls, CachePolicy(key=lambda state: state.title), store=False)
    assert _counts(graph, "a b") == ["a b: 2"]
    assert _counts(graph, "c") == ["c: 1"]
    assert _counts(graph, "a b") == ["a b: 2"]
    assert calls == Counter({"a b": 1, "c": 1})
