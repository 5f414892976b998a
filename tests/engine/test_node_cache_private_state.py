"""A cached node with private state: the key holds the private state the task reads, and a
hit replays the private state the task left, as running the node would have."""

from __future__ import annotations

from collections import Counter

from pydantic import BaseModel

from nodestep import END, START, BaseState, CachePolicy, Graph, InMemoryStateStore, node
from nodestep.testing import sequential_ids, ticking_clock


class Trip(BaseState):
    city: str = ""
    report: str = ""


class Seen(BaseModel):
    lookups: int = 0
    cities: set[str] = set()


def lookup_graph(calls: Counter[str]) -> Graph[Trip]:
    @node(cache=CachePolicy(key=lambda state: state.city), private_state=Seen)
    def look(state: Trip, *, seen: Seen) -> dict:
        calls["look"] += 1
        seen.lookups += 1
        seen.cities.add(state.city)
        return {"report": f"{state.city}, lookup {seen.lookups}"}

    graph = Graph(
        Trip,
        state_store=InMemoryStateStore(),
        clock=ticking_clock(),
        id_factory=sequential_ids(),
    )
    return graph.flow(START >> look, look >> END)


def test_a_hit_replays_the_private_state_the_node_left() -> None:
    calls: Counter[str] = Counter()
    graph = lookup_graph(calls)
    graph.invoke({"city": "Oslo"}, thread_id="a")
    second = graph.invoke({"city": "Oslo"}, thread_id="b")
    assert calls["look"] == 1
    assert second.state.report == "Oslo, lookup 1"
    assert graph.node_state_sync("b", "look") == Seen(lookups=1, cities={"Oslo"})
    history = graph.history_sync("b")
    step = next(e for e in history.events if e.type == "superstep_completed")
    assert step.data["tasks"]["look"]["cached"] is True
    assert step.data["tasks"]["look"]["private"] == {"lookups": 1, "cities": ["Oslo"]}


def test_another_private_state_misses_and_the_node_runs() -> None:
    # The same key, but thread "a" has looked once already: its node reads another
    # private state than the stored entry's, so the stored result does not hold for it.
    calls: Counter[str] = Counter()
    graph = lookup_graph(calls)
    graph.invoke({"city": "Oslo"}, thread_id="a")
    again = graph.invoke({"city": "Oslo"}, thread_id="a")
    assert calls["look"] == 2
    assert again.state.report == "Oslo, lookup 2"
    assert graph.node_state_sync("a", "look") == Seen(lookups=2, cities={"Oslo"})
    # A new thread reads the defaults, as "a" did first: the first entry serves it.
    graph.invoke({"city": "Oslo"}, thread_id="c")
    assert calls["look"] == 2
    assert graph.node_state_sync("c", "look") == Seen(lookups=1, cities={"Oslo"})
