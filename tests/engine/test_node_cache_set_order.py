"""The node cache's key does not depend on the order a set happens to iterate in.

A set's JSON form lists its items in iteration order, and the order of strings follows
the process's hash seed, so two processes sharing a cache through a file store would key
one state two ways. Here two sets equal in value but iterating in different orders (two
strings in one hash slot, added in either order) stand for two processes.
"""

from __future__ import annotations

import itertools
from dataclasses import dataclass

from pydantic import BaseModel, Field

from nodestep import END, START, BaseState, CachePolicy, Command, Graph, Send, node


def _two_orders() -> tuple[set[str], set[str]]:
    """Two equal sets of strings whose iteration orders differ (two strings that meet in
    one hash slot iterate in the order they were added; which pairs do depends on the
    process's hash seed, so the pair is searched for)."""
    names = [f"tag{i}" for i in range(64)]
    for one, other in itertools.combinations(names, 2):
        first, second = {one}, {other}
        first.add(other)
        second.add(one)
        if list(first) != list(second):
            return first, second
    raise AssertionError("no two strings of 64 share a slot of an 8-slot set")


@dataclass(frozen=True)
class Pair:
    tags: frozenset[str]


class Inner(BaseModel):
    tags: set[str] = Field(default_factory=set)


class Tagged(BaseState):
    tags: set[str] = Field(default_factory=set)
    nested: Inner = Field(default_factory=Inner)
    runs: int = 0


def _graph(policy: CachePolicy) -> tuple[Graph, list[str]]:
    ran: list[str] = []

    @node(name="work", cache=policy)
    def work(state: Tagged) -> dict[str, int]:
        ran.append("work")
        return {"runs": 1}

    return Graph(Tagged, name="tagged").flow(START >> work, work >> END), ran


def test_a_state_with_a_set_field_hits_however_the_set_iterates() -> None:
    first, second = _two_orders()
    graph, ran = _graph(CachePolicy())
    assert graph.invoke({"tags": first}).state.runs == 1
    assert graph.invoke({"tags": second}).state.runs == 1
    assert ran == ["work"]


def test_a_set_in_a_nested_model_hits_however_it_iterates() -> None:
    first, second = _two_orders()
    graph, ran = _graph(CachePolicy())
    graph.invoke({"nested": {"tags": first}})
    graph.invoke({"nested": {"tags": second}})
    assert ran == ["work"]


def test_a_key_function_that_returns_a_set_hits_however_it_iterates() -> None:
    first, second = _two_orders()
    graph, ran = _graph(CachePolicy(key=lambda state: Pair(frozenset(state.tags))))
    graph.invoke({"tags": first})
    graph.invoke({"tags": second})
    assert ran == ["work"]


def test_states_that_differ_still_miss() -> None:
    first, _ = _two_orders()
    graph, ran = _graph(CachePolicy())
    graph.invoke({"tags": first})
    graph.invoke({"tags": {*first, "more"}})
    graph.invoke({"tags": first, "nested": {"tags": {"x"}}})
    assert ran == ["work", "work", "work"]


class Part(BaseModel):
    tags: frozenset[str]


class Plain(BaseState):
    seen: int = 0


def test_a_task_input_with_a_set_hits_however_it_iterates() -> None:
    first, second = _two_orders()
    ran: list[frozenset[str]] = []

    @node(cache=CachePolicy(key=lambda state: "input only"))  # the input tells them apart
    def count(state: Plain, part: Part) -> None:
        ran.append(part.tags)

    @node(goto=[count])
    def split(state: Plain) -> Command:
        return Command(goto=[Send(count, {"tags": second if state.seen else first})])

    graph = Graph(Plain).flow(START >> split, count >> END)
    graph.invoke({})
    graph.invoke({"seen": 1})
    assert ran == [frozenset(first)]
