"""Joins, list edges and deferred nodes at run time: what runs, when, and what is stored."""

from __future__ import annotations

from typing import Annotated

import pytest
from pydantic import Field

from nodestep import (
    END,
    START,
    BaseState,
    Command,
    Graph,
    InMemoryStateStore,
    NodeContext,
    Send,
    add,
    node,
    when,
)
from nodestep._engine import writer
from nodestep._superstep.replay import replay
from store_helpers import records_sync


class S(BaseState):
    path: Annotated[list[str], add] = Field(default_factory=list)
    rounds: int = 0
    item: str = ""


def step_node(name: str, **options):
    """A node that records its name and superstep in ``path``."""

    def f(state: S, ctx: NodeContext) -> dict:
        return {"path": [f"{name}@{ctx.step}"]}

    return node(f, name=name, **options)


a, b, b2, b3, c, d = (step_node(n) for n in ("a", "b", "b2", "b3", "c", "d"))


def names(path: list[str]) -> list[str]:
    return [p.split("@")[0] for p in path]


def test_a_join_over_paths_of_uneven_length_runs_its_node_once():
    graph = Graph(S).flow(START >> a >> [b, c], b >> b2 >> b3, [b3, c] >> d >> END)
    path = graph.invoke({}).state.path
    assert path == ["a@0", "b@1", "c@1", "b2@2", "b3@3", "d@4"]


def test_a_list_edge_runs_every_node_of_it_in_the_next_superstep():
    graph = Graph(S).flow(START >> a >> [c, b], [c, b] >> END)
    assert graph.invoke({}).state.path == ["a@0", "b@1", "c@1"]


def test_sources_arriving_in_one_superstep_fire_the_join_once():
    graph = Graph(S).flow(START >> a >> [b, c] >> d >> END)
    assert graph.invoke({}).state.path == ["a@0", "b@1", "c@1", "d@2"]


def test_send_tasks_of_a_source_are_one_arrival_at_its_join():
    @node(goto=["work", c])
    def split(state: S) -> Command:
        return Command(goto=[Send(work, {"item": i}) for i in "xyz"] + [c])

    @node
    def work(state: S) -> dict:
        return {"path": [f"work:{state.item}"]}

    graph = Graph(S).flow(START >> split, [work, c] >> d, d >> END)
    path = graph.invoke({}).state.path
    assert path == ["c@1", "work:x", "work:y", "work:z", "d@2"]


def test_a_join_on_a_loop_runs_once_per_round_of_its_sources():
    @node
    def again(state: S) -> dict:
        return {"rounds": state.rounds + 1}

    graph = Graph(S).flow(
        START >> again >> [b, c],
        b >> b2,
        [b2, c] >> d,
        d >> when(lambda s: s.rounds < 3, again, otherwise=END),
    )
    assert names(graph.invoke({}).state.path).count("d") == 3


def test_a_barrier_that_does_not_fill_is_dropped_when_the_turn_ends():
    @node(goto=[b, c])
    def pick(state: S) -> Command:
        return Command(goto=[b] if state.item == "b only" else [b, c])

    store = InMemoryStateStore()
    graph = Graph(S, state_store=store).flow(START >> pick, [b, c] >> d, d >> END)
    first = graph.invoke({"item": "b only"}, thread_id="t").state.path
    assert names(first) == ["b"]
    position = replay(graph.schema, records_sync(store, "t"))
    assert position is not None and position.joins == {}
    # The next turn starts a new barrier: b's arrival in the first turn does not count.
    second = graph.invoke({"item": "b only"}, thread_id="t").state.path
    assert names(second) == ["b", "b"]
    third = graph.invoke({"item": "both"}, thread_id="t").state.path
    assert names(third)[2:] == ["b", "c", "d"]


def test_barrier_progress_is_stored_and_a_continued_run_fires_the_join_once(monkeypatch):
    monkeypatch.setattr(writer, "CHECKPOINT_EVERY", 1)  # the barrier in checkpoints too
    store = InMemoryStateStore()
    graph = Graph(S, state_store=store, interrupt_before=["b2"]).flow(
        START >> a >> [b, c], b >> b2, [b2, c] >> d >> END
    )
    graph.invoke({}, thread_id="t")
    stored = records_sync(store, "t")
    position = replay(graph.schema, stored)
    assert position is not None and position.joins == {"d": ["c"]}
    assert any(r["type"] == "checkpoint" and r.get("joins") == {"d": ["c"]} for r in stored)
    fresh = Graph(S, state_store=store).flow(START >> a >> [b, c], b >> b2, [b2, c] >> d >> END)
    path = fresh.invoke(None, thread_id="t").state.path
    assert names(path) == ["a", "b", "c", "b2", "d"]


def test_join_routes_are_stored_with_what_the_barrier_waits_on():
    store = InMemoryStateStore()
    graph = Graph(S, state_store=store).flow(START >> a >> [b, c] >> d >> END)
    graph.invoke({}, thread_id="t")
    step1 = [r for r in records_sync(store, "t") if r["type"] == "superstep_completed"][1]
    assert step1["tasks"]["c"]["routes"] == [{"join": "d", "from": "c", "after": ["b", "c"]}]


def test_a_deferred_node_runs_when_nothing_else_is_left():
    summary = step_node("summary", defer=True)
    graph = Graph(S).flow(
        START >> a >> [b, c], b >> b2 >> b3, b3 >> summary, c >> summary, summary >> END
    )
    path = graph.invoke({}).state.path
    assert path == ["a@0", "b@1", "c@1", "b2@2", "b3@3", "summary@4"]


def test_a_deferred_join_target_waits_for_the_rest_of_the_turn():
    late = step_node("late", defer=True)
    graph = Graph(S).flow(
        START >> a >> [b, c, b2], [b, c] >> late, b2 >> b3 >> d >> END, late >> END
    )
    assert names(graph.invoke({}).state.path) == ["a", "b", "b2", "c", "b3", "d", "late"]


def test_sends_to_a_deferred_node_are_held_and_run_as_their_own_tasks():
    @node(defer=True)
    def tally(state: S) -> dict:
        return {"path": [f"tally:{state.item}"]}

    @node(goto=[tally])
    def split(state: S) -> Command:
        return Command(goto=[Send(tally, {"item": "x"}), Send(tally, {"item": "y"})])

    graph = Graph(S).flow(START >> a >> [split, b], b >> b2 >> END, tally >> END)
    path = graph.invoke({}).state.path
    assert path == ["a@0", "b@1", "b2@2", "tally:x", "tally:y"]


def test_held_routes_survive_a_stop():
    summary = step_node("summary", defer=True)
    store = InMemoryStateStore()
    edges = (START >> a >> [b, c], b >> b2 >> END, c >> summary, summary >> END)
    graph = Graph(S, state_store=store, interrupt_before=["b2"]).flow(*edges)
    graph.invoke({}, thread_id="t")
    position = replay(graph.schema, records_sync(store, "t"))
    assert position is not None and position.deferred == ["summary"]
    assert names(graph.invoke(None, thread_id="t").state.path) == ["a", "b", "c", "b2", "summary"]


@pytest.mark.parametrize("defer", ["yes", 1, None])
def test_defer_takes_a_bool(defer):
    with pytest.raises(TypeError, match=r"@node\(defer=...\) takes True or False"):
        step_node("x", defer=defer)


def test_the_debug_stream_shows_join_arrivals_and_held_routes():
    summary = step_node("summary", defer=True)
    graph = Graph(S).flow(START >> a >> [b, c, summary], [b, c] >> d >> END, summary >> END)
    shown = [
        e.data["routes"]
        for e in graph.stream({}, stream_mode="debug")
        if e.mode == "debug" and e.data.get("type") == "routes"
    ]
    assert shown[0] == {"a": ["b", "c", {"defer": "summary"}]}
    assert shown[1] == {
        "b": [{"join": "d", "from": "b", "after": ["b", "c"]}],
        "c": [{"join": "d", "from": "c", "after": ["b", "c"]}],
    }
