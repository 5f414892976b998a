"""The ``"task_updates"`` stream mode: each task's update as the task finishes."""

from __future__ import annotations

import itertools
from typing import Annotated

import anyio
import pytest
from pydantic import Field

from nodestep import (
    END,
    START,
    BaseState,
    CachePolicy,
    Command,
    Graph,
    InMemoryStateStore,
    StreamEvent,
    add,
    node,
)

NAMES = ("alpha", "beta", "gamma")


class Race(BaseState):
    log: Annotated[list[str], add] = Field(default_factory=list)
    total: int = 0


def race_graph(order: tuple[str, ...]) -> Graph[Race]:
    """``fan`` starts alpha, beta and gamma at once; they finish in ``order``."""
    turns: dict[str, anyio.Event] = {}

    def runner(name: str):  # a node factory
        async def run(state: Race) -> dict:
            position = order.index(name)
            if position:
                await turns[order[position - 1]].wait()
            turns[name].set()
            return {"log": [name]}

        return node(run, name=name)

    racers = [runner(name) for name in NAMES]

    @node(goto=racers)
    async def fan(state: Race) -> Command:
        turns.update({name: anyio.Event() for name in NAMES})
        return Command(goto=racers)

    @node
    def count(state: Race) -> dict:
        return {"total": len(state.log)}

    return Graph(Race).flow(START >> fan, *(r >> count for r in racers), count >> END)


def updates_of(events: list[StreamEvent]) -> list[tuple[int, str | None, object]]:
    return [(e.step, e.node, e.data) for e in events if e.mode == "task_updates"]


@pytest.mark.parametrize("order", list(itertools.permutations(NAMES)))
def test_events_arrive_in_finishing_order_and_the_state_does_not_depend_on_it(
    order: tuple[str, ...],
) -> None:
    events = list(race_graph(order).stream({}, stream_mode="task_updates"))
    assert updates_of(events) == [
        (0, "fan", None),
        *[(1, name, {"log": [name]}) for name in order],
        (2, "count", {"total": 3}),
    ]
    final = events[-1].data.state
    assert final.log == list(NAMES)  # merged in node-name order, whatever the finishing order


def test_each_task_event_arrives_before_its_superstep_ends() -> None:
    events = list(race_graph(NAMES).stream({}, stream_mode=["task_updates", "values"]))
    modes = [(e.mode, e.step) for e in events if e.mode != "final"]
    assert modes.index(("task_updates", 1)) < modes.index(("values", 1))
    assert [m for m in modes if m[1] == 1] == [("task_updates", 1)] * 3 + [("values", 1)]


def test_an_event_names_node_step_and_task_and_has_no_checkpoint_yet() -> None:
    graph = race_graph(NAMES)
    events = [e for e in graph.stream({}, stream_mode="task_updates") if e.mode == "task_updates"]
    beta = next(e for e in events if e.node == "beta")
    assert (beta.step, beta.task_id, beta.checkpoint_id) == (1, "beta", None)
    assert beta.run_id == events[0].run_id != ""


def test_a_stored_run_sends_the_same_events() -> None:
    graph = race_graph(("gamma", "alpha", "beta"))
    store = InMemoryStateStore()
    events = graph.stream({}, stream_mode="task_updates", thread_id="t", state_store=store)
    assert [n for _, n, _ in updates_of(list(events))] == [
        "fan",
        "gamma",
        "alpha",
        "beta",
        "count",
    ]


def test_a_cache_hit_is_sent_as_its_task_finishes() -> None:
    @node(cache=CachePolicy())
    def double(state: Race) -> dict:
        return {"total": state.total * 2}

    graph = Graph(Race).flow(START >> double, double >> END)
    for _ in range(2):
        events = list(graph.stream({"total": 2}, stream_mode="task_updates"))
        assert updates_of(events) == [(0, "double", {"total": 4})]
