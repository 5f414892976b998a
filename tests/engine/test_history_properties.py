"""Properties of provenance and diffs over random threads: runs, edits, Replace and forks.

For every field at a branch's head, provenance's value is the loaded state's; a field
without a reducer was written by its writer's value, and that write is stored in the named
event; a field with a reducer is its writes merged. A diff of a side with itself is empty,
a diff mirrors its reverse, and its changes are exactly the fields whose loaded values
differ.
"""

from __future__ import annotations

from typing import Annotated, Any

import anyio
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from pydantic import Field

from nodestep import END, START, BaseState, Graph, InMemoryStateStore, Replace, add, node
from nodestep.history import diff, provenance
from nodestep.state import to_json_value
from nodestep.store import StateStore


class Notes(BaseState):
    n: int = 0
    title: str = ""
    log: Annotated[list[int], add] = Field(default_factory=list)
    last: list[int] = Field(default_factory=list)  # a plain list: each write replaces it


@node
def step(state: Notes) -> dict[str, Any]:
    return {"n": state.n + 1, "log": [state.n], "last": [state.n, len(state.log)]}


def notes_graph(store: StateStore) -> Graph[Notes]:
    return Graph(Notes, state_store=store).flow(START >> step, step >> END)


RUN = st.fixed_dictionaries({}, optional={"title": st.sampled_from(["a", "b", ""])})
OPS = st.lists(
    st.one_of(
        st.tuples(st.just("run"), RUN),
        st.tuples(st.just("edit"), st.sampled_from(["title", "log", "replace", "last"])),
        st.tuples(st.just("fork"), st.integers(min_value=0, max_value=1_000)),
    ),
    min_size=1,
    max_size=12,
)


async def play(ops: list[tuple[str, Any]]) -> tuple[Graph[Notes], StateStore, list[str]]:
    """Apply ``ops`` to thread 't'; return the graph, its store and the branches made."""
    store = InMemoryStateStore()
    graph = notes_graph(store)
    await graph.ainvoke({}, thread_id="t")
    branch, made = "main", ["main"]
    for kind, arg in ops:
        if kind == "run":
            await graph.ainvoke(arg, thread_id="t", branch_id=branch)
        elif kind == "edit":
            update = {
                "title": {"title": "edited"},
                "log": {"log": [99]},
                "replace": {"log": Replace([7])},
                "last": {"last": [5]},
            }[arg]
            await graph.update_state("t", update, branch_id=branch)
        else:
            events = (await graph.history("t", branch_id=branch)).events
            event = events[arg % len(events)]
            if event.type == "checkpoint" and event.sequence > 1:
                continue  # a fork's own opening: fork after the event it copies instead
            branch = (await graph.fork("t", from_=event.id, name=f"b{len(made)}")).id
            made.append(branch)
    return graph, store, made


PLAIN = ("n", "title", "last")


@settings(max_examples=40, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(OPS)
def test_provenance_at_every_head_gives_the_loaded_value_and_its_writers(
    ops: list[tuple[str, Any]],
) -> None:
    async def check() -> None:
        graph, store, branches = await play(ops)
        for branch in branches:
            loaded = to_json_value(await graph.load("t", branch_id=branch))
            for field in ("n", "title", "log", "last"):
                found = await provenance(store, "t", field, branch_id=branch, state=Notes)
                assert found.value == loaded[field], (branch, field)
                assert found.reducer == (field == "log")
                if field in PLAIN:
                    assert found.writer.value == found.value
                    await _stored(store, found.writer)
                inferred = await provenance(store, "t", field, branch_id=branch)
                if field not in ("log", "last"):  # scalars: nothing to infer
                    assert inferred == found

    anyio.run(check)


async def _stored(store: StateStore, write: Any) -> None:
    """Check that the event ``write`` names holds the write."""
    place = await store.locate("t", write.event_id)
    assert place == (write.branch_id, write.sequence)
    (record,) = await store.read("t", write.branch_id, start=write.sequence, stop=write.sequence)
    holders = [record.get("values"), record.get("input"), record.get("update")]
    if record["type"] == "superstep_completed":
        holders += [entry.get("update") for entry in record["tasks"].values()]
    assert any(isinstance(h, dict) and h.get(write.field) == write.value for h in holders)


@settings(max_examples=40, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(OPS, st.data())
def test_a_diff_is_empty_against_itself_mirrors_its_reverse_and_names_the_differences(
    ops: list[tuple[str, Any]], data: st.DataObject
) -> None:
    async def check() -> None:
        graph, store, branches = await play(ops)
        a = data.draw(st.sampled_from(branches))
        b = data.draw(st.sampled_from(branches))
        same = await diff(store, "t", a, a, state=Notes)
        assert same.same and same.a_events == same.b_events == ()
        there = await diff(store, "t", a, b, state=Notes)
        assert await diff(store, "t", b, a, state=Notes) == there.mirrored()
        values_a = to_json_value(await graph.load("t", branch_id=a))
        values_b = to_json_value(await graph.load("t", branch_id=b))
        assert {c.field: (c.a, c.b) for c in there.changes} == {
            k: (values_a[k], values_b[k]) for k in values_a if values_a[k] != values_b[k]
        }
        assert there.fork_point is not None  # one thread: the opening checkpoint at least
        assert [e.id for e in there.a_events][-1:] in ([], [there.a.id])

    anyio.run(check)
