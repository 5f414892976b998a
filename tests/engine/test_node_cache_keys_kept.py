"""A node cache's keys stay what earlier releases made them: a changed key misses every
entry users' cache stores hold.

The keys below were made by nodestep at commit ``defa1a9``, before ``to_json_value``
listed a set's items in one order (``_state/set_order``). The cache keeps its own
canonical form of a value with a set, and that new order must not reach a key, a set in a
model's ``Any`` field (which the cache's own walk does not look into) included.
"""

from __future__ import annotations

import asyncio
from typing import Any

import pytest
from pydantic import BaseModel, Field

from nodestep import END, START, BaseState, CachePolicy, Graph, InMemoryStateStore, node


class Loose(BaseModel):
    extra: dict[str, Any] = {}


class Tagged(BaseState):
    tags: set[str] = Field(default_factory=set)
    counts: dict[str, int] = Field(default_factory=dict)
    runs: int = 0


def _key(policy: CachePolicy, start: dict[str, Any]) -> str:
    store = InMemoryStateStore()

    @node(name="work", cache=policy)
    def work(state: Tagged) -> dict[str, int]:
        return {"runs": 1}

    graph = Graph(Tagged, name="pinned", cache_store=store).flow(START >> work, work >> END)
    graph.invoke(start)
    page = asyncio.run(store.list_threads())
    (thread,) = [t.thread_id for t in page.threads]
    return thread.rsplit("/", 1)[1]


CASES: dict[str, tuple[CachePolicy, dict[str, Any], str]] = {
    "plain": (
        CachePolicy(),
        {"counts": {"b": 2, "a": 1}},
        "6236b9404644c8861c41b55145459ef4e7828f34008cbf9eb896c27c7e18af23",
    ),
    "set field": (
        CachePolicy(),
        {"tags": {"x", "y", "z"}, "counts": {"a": 1}},
        "2d711eb45f378613540b9de98694390db9d02bd351cbc17a77789d4bcb9343c5",
    ),
    "key set of ints": (
        CachePolicy(key=lambda s: {1000, 1, 9, 10}),
        {},
        "59ce2dc137f15ba8ef6b419036ba737a5f262e0142368dd13cb85dd6f5b1012d",
    ),
    "key model with a set in Any": (
        CachePolicy(key=lambda s: Loose(extra={"n": {1000, 1}})),
        {},
        "53458ba21f7242eb3c0451e11421e123be455773ad08c4a95a01bbde3724166c",
    ),
    "key dict": (
        CachePolicy(key=lambda s: {"k": [1, 2.5, "x"]}),
        {},
        "b0d97b873c3d03f8e6f380b11b702336d14a83d01864ab9a81d738ca70cd8db3",
    ),
}


@pytest.mark.parametrize("case", list(CASES))
def test_a_cache_key_is_the_one_earlier_releases_made(case: str) -> None:
    policy, start, key = CASES[case]
    assert _key(policy, start) == key
