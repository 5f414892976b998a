"""Provenance names the run that ran a task, not the run that completed its superstep.

A superstep's tasks can finish in one run and be merged in another: a run that failed (or
crashed, or was stopped) after some tasks finished is continued by a new run, and a fork
taken between two tasks' records is continued on the fork. The finished tasks' writes are
named by their own ``task_finished`` event, and so by the run that wrote it.
"""

from __future__ import annotations

from typing import Any

import pytest

from nodestep import END, START, BaseState, Graph, node
from nodestep.history import provenance
from nodestep.store import StateStore

pytestmark = pytest.mark.anyio


class Pair(BaseState):
    a: str = ""
    b: str = ""


fail_b = {"on": True}


@node
def begin(state: Pair) -> dict[str, Any]:
    return {}


@node
async def left(state: Pair) -> dict[str, Any]:
    return {"a": "A"}


@node
async def right(state: Pair) -> dict[str, Any]:
    if fail_b["on"]:
        raise RuntimeError("right is down")
    return {"b": "B"}


def pair_graph(store: StateStore) -> Graph[Pair]:
    return Graph(Pair, state_store=store).flow(
        START >> begin, begin >> [left, right], left >> END, right >> END
    )


async def test_a_task_finished_before_a_failure_is_named_by_the_run_that_ran_it(
    store: StateStore,
) -> None:
    graph = pair_graph(store)
    fail_b["on"] = True
    with pytest.raises(RuntimeError):
        await graph.ainvoke({}, thread_id="t")
    first = (await graph.history("t")).events[1].data["run"]
    fail_b["on"] = False
    second = (await graph.ainvoke(None, thread_id="t")).run_id

    a = await provenance(store, "t", "a")
    b = await provenance(store, "t", "b")

    assert (a.writer.kind, a.writer.node, a.writer.run_id) == ("node", "left", first)
    assert (b.writer.kind, b.writer.node, b.writer.run_id) == ("node", "right", second)


async def test_a_task_finished_before_a_fork_is_named_by_the_parents_run(
    store: StateStore,
) -> None:
    graph = pair_graph(store)
    fail_b["on"] = False
    parent = (await graph.ainvoke({}, thread_id="t")).run_id
    finished = [e for e in (await graph.history("t")).events if e.type == "task_finished"]
    await graph.fork("t", from_=finished[0].id, name="alt")
    child = (await graph.ainvoke(None, thread_id="t", branch_id="alt")).run_id
    later = finished[1].data["node"]  # the task the fork runs again

    on_fork = {f: (await provenance(store, "t", f, branch_id="alt")).writer for f in ("a", "b")}

    first = "a" if later == "right" else "b"
    second = "b" if first == "a" else "a"
    assert (on_fork[first].branch_id, on_fork[first].run_id) == ("main", parent)
    assert (on_fork[second].branch_id, on_fork[second].run_id) == ("alt", child)
