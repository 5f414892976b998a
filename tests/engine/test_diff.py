"""Diffs of two branches or events of a thread, read from a store alone, on every store.

A diff names the fork point (the last event both sides share), the fields that differ
(appended items when one list starts with the other) and each side's events since.
"""

from __future__ import annotations

import json
from typing import Annotated, Any

import pytest
from pydantic import Field

from nodestep import (
    END,
    START,
    BaseState,
    Graph,
    GraphConfigError,
    Resume,
    UnknownThreadError,
    add,
    interrupt,
    node,
)
from nodestep.history import FieldChange, ThreadDiff, diff
from nodestep.store import StateStore

pytestmark = pytest.mark.anyio


class Trip(BaseState):
    city: str = ""
    log: Annotated[list[str], add] = Field(default_factory=list)
    answer: str = ""


@node
def plan(state: Trip) -> dict[str, Any]:
    return {"log": [f"plan {state.city}"]}


@node
def ask(state: Trip) -> dict[str, Any]:
    return {"answer": interrupt("go?", id="go"), "log": ["asked"]}


def trip_graph(store: StateStore) -> Graph[Trip]:
    return Graph(Trip, state_store=store).flow(START >> plan, plan >> ask, ask >> END)


async def forked(store: StateStore) -> Graph[Trip]:
    """Run to the pause, fork there as 'no', answer 'yes' on main and 'no' on the fork."""
    graph = trip_graph(store)
    await graph.ainvoke({"city": "Oslo"}, thread_id="t")
    paused = (await graph.state_history("t")).last_pause()
    assert paused is not None
    await graph.fork("t", from_=paused.event.id, name="no")
    await graph.ainvoke(None, thread_id="t", resume=Resume("yes"))
    await graph.ainvoke(None, thread_id="t", branch_id="no", resume=Resume("no"))
    await graph.update_state("t", {"city": "Bergen"}, branch_id="no")
    return graph


async def test_a_diff_names_the_fork_point_the_fields_and_each_sides_events(
    store: StateStore,
) -> None:
    graph = await forked(store)
    main = (await graph.history("t")).events
    paused = next(e for e in main if e.type == "run_paused")

    found = await diff(store, "t", "main", "no")

    assert isinstance(found, ThreadDiff)
    assert found.fork_point is not None and found.fork_point.id == paused.id
    assert (found.a.branch_id, found.b.branch_id) == ("main", "no")
    assert {c.field: (c.change, c.a, c.b) for c in found.changes} == {
        "city": ("changed", "Oslo", "Bergen"),
        "answer": ("changed", "yes", "no"),
    }
    assert [e.id for e in found.a_events] == [e.id for e in main if e.sequence > paused.sequence]
    assert [e.type for e in found.b_events] == [
        "run_started",
        "superstep_completed",
        "run_completed",
        "state_updated",
    ]
    assert {e.branch_id for e in found.b_events} == {"no"}


async def test_a_list_that_starts_with_the_other_says_what_was_appended(
    store: StateStore,
) -> None:
    graph = trip_graph(store)
    await graph.ainvoke({"city": "Oslo"}, thread_id="t")
    paused = (await graph.history("t")).events[-1]
    await graph.ainvoke(None, thread_id="t", resume=Resume("yes"))

    found = await diff(store, "t", paused.id, "main")

    (log,) = [c for c in found.changes if c.field == "log"]
    assert (log.appended, log.appended_on) == (("asked",), "b")
    assert str(log) == '~ log: b appends 1: "asked"'
    assert found.fork_point is not None and found.fork_point.id == paused.id
    assert found.a_events == ()


async def test_a_side_against_itself_has_no_difference(store: StateStore) -> None:
    graph = await forked(store)

    for ref in ("main", "no", (await graph.history("t")).events[3].id):
        found = await diff(store, "t", ref, ref)
        assert found.same and found.changes == ()
        assert found.a_events == found.b_events == ()
        assert found.fork_point is not None and found.fork_point.id == found.a.id


async def test_a_diff_mirrors_its_reverse(store: StateStore) -> None:
    await forked(store)

    there = await diff(store, "t", "main", "no")
    back = await diff(store, "t", "no", "main")

    assert back == there.mirrored()
    assert back.mirrored() == there


async def test_the_graph_method_diffs_with_the_state_class(store: StateStore) -> None:
    graph = await forked(store)

    found = await graph.diff("t", "main", "no")

    assert found == await diff(store, "t", "main", "no", state=Trip)
    assert graph.diff_sync("t", "main", "no").changes == found.changes


async def test_to_json_str_and_repr_show_the_diff(store: StateStore) -> None:
    await forked(store)

    found = await diff(store, "t", "main", "no")

    data = found.to_json()
    assert json.loads(json.dumps(data)) == data
    assert data["fork_point"]["type"] == "run_paused"
    assert [c["field"] for c in data["changes"]] == ["city", "answer"]
    assert [e["branch_id"] for e in data["b_events"]] == ["no"] * 4
    assert repr(found) == "ThreadDiff('t', a=main@7, b=no@9, changes=2)"
    text = str(found)
    assert '~ answer: "yes" -> "no"' in text
    assert "4 event(s) on b since the fork point" in text
    assert text.splitlines()[3] == "  fork point: main@4 run_paused ask"


async def test_fields_only_one_side_has_are_added_or_removed() -> None:
    change = FieldChange("extra", "added", None, 3)

    assert change.mirrored() == FieldChange("extra", "removed", 3, None)
    assert str(change) == "+ extra: 3" and str(change.mirrored()) == "- extra: 3"
    assert repr(change) == "FieldChange('extra', 'added')"


async def test_an_unknown_thread_branch_or_event_is_named_with_the_fix(
    store: StateStore,
) -> None:
    await forked(store)

    with pytest.raises(UnknownThreadError, match="Thread 'nope' has no history"):
        await diff(store, "nope", "main", "main")
    with pytest.raises(UnknownThreadError, match=r"no branch or event 'ghost' \(b\).*'no'"):
        await diff(store, "t", "main", "ghost")
    with pytest.raises(GraphConfigError, match="a takes the id of a history event"):
        await diff(store, "t", "", "main")
