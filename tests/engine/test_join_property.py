"""Property: in random flows of list edges, joins and deferred nodes, every node runs
exactly once per turn, a joined node after all of its sources, and a deferred node only in
a superstep of deferred nodes; and a run stopped anywhere and continued from the store
gives the same state as a run that was never stopped.

The flows are grown from ``n0``: a step either fans an open node (one with no edge yet) out
to new nodes, or joins two or more open nodes into a new one, so the paths into a join have
random, uneven lengths. Every node is reached by exactly one edge or join, so each runs
exactly once in a turn.
"""

from __future__ import annotations

from typing import Annotated, Any

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from pydantic import Field

from nodestep import END, START, BaseState, Graph, InMemoryStateStore, NodeContext, add, node

pytestmark = pytest.mark.slow


class Trace(BaseState):
    runs: Annotated[list[str], add] = Field(default_factory=list)


def _node(name: str, defer: bool = False) -> Any:
    def f(state: Trace, ctx: NodeContext) -> dict[str, list[str]]:
        return {"runs": [f"{name}@{ctx.step}"]}

    return node(f, name=name, defer=defer)


Flow = tuple[list[tuple[str, Any]], dict[str, list[str]], frozenset[str]]


@st.composite
def flows(draw: st.DrawFn) -> Flow:
    """Return the flow as (kind, ends) steps, its joins (target -> sources), deferred nodes."""
    open_nodes = ["n0"]
    count = 1
    steps: list[tuple[str, Any]] = []
    joins: dict[str, list[str]] = {}
    for _ in range(draw(st.integers(1, 8))):
        if len(open_nodes) >= 2 and draw(st.booleans()):
            sources = draw(st.lists(st.sampled_from(open_nodes), min_size=2, unique=True))
            target = f"n{count}"
            count += 1
            open_nodes = [n for n in open_nodes if n not in sources] + [target]
            steps.append(("join", (sources, target)))
            joins[target] = sources
        else:
            source = draw(st.sampled_from(open_nodes))
            width = draw(st.integers(1, 3))
            targets = [f"n{count + k}" for k in range(width)]
            count += width
            open_nodes = [n for n in open_nodes if n != source] + targets
            steps.append(("fan", (source, targets)))
    steps.extend(("end", n) for n in open_nodes)
    names = [f"n{k}" for k in range(1, count)]
    deferred = draw(st.sets(st.sampled_from(names), max_size=2)) if names else set()
    return steps, joins, frozenset(deferred)


def _graph(flow: Flow, **options: Any) -> Graph[Trace]:
    steps, _, deferred = flow
    made: dict[str, Any] = {}

    def get(name: str) -> Any:
        if name not in made:
            made[name] = _node(name, name in deferred)
        return made[name]

    edges: list[Any] = [START >> get("n0")]
    for kind, ends in steps:
        if kind == "fan":
            source, targets = ends
            edges.append(get(source) >> [get(t) for t in targets])
        elif kind == "join":
            sources, target = ends
            edges.append([get(s) for s in sources] >> get(target))
        else:
            edges.append(get(ends) >> END)
    return Graph(Trace, **options).flow(*edges)


@settings(max_examples=60, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(flows())
def test_joined_nodes_run_once_per_turn_after_all_their_sources(flow: Flow) -> None:
    _, joins, deferred = flow
    graph = _graph(flow)
    for _turn in range(2):
        runs = graph.invoke({}).state.runs
        step_of = {name: int(step) for name, step in (r.split("@") for r in runs)}
        assert len(step_of) == len(runs), f"a node ran twice: {runs}"
        for target, sources in joins.items():
            assert target in step_of, f"join {sources} >> {target} never ran: {runs}"
            last_source = max(step_of[s] for s in sources)
            assert step_of[target] > last_source
            if target not in deferred:
                assert step_of[target] == last_source + 1
        for name in deferred & step_of.keys():
            alongside = {n for n, step in step_of.items() if step == step_of[name]}
            assert alongside <= deferred, f"{name} ran beside {alongside - deferred}: {runs}"


@settings(max_examples=40, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(flows(), st.data())
def test_a_run_stopped_anywhere_and_continued_from_the_store_ends_the_same(
    flow: Flow, data: st.DataObject
) -> None:
    expected = _graph(flow).invoke({}).state.runs
    names = sorted({r.split("@")[0] for r in expected} - {"n0"})
    if not names:
        return
    stops = data.draw(st.lists(st.sampled_from(names), min_size=1, max_size=3, unique=True))
    store = InMemoryStateStore()
    result = _graph(flow, state_store=store, interrupt_before=stops).invoke({}, thread_id="t")
    for _ in range(len(stops) + 1):
        if result.status == "completed":
            break
        # Each continuation builds the graph anew, as a new process would.
        again = _graph(flow, state_store=store, interrupt_before=stops)
        result = again.invoke(None, thread_id="t")
    assert result.status == "completed"
    assert result.state.runs == expected
