"""Replay does not depend on when a superstep's parallel tasks finished, on every store.

Which tasks of a superstep had finished when a run failed, crashed or was forked is a
matter of timing, which a replay cannot choose. So a fork taken between two tasks'
records replays clean whichever task finishes first this time, and a run whose process
stopped in the middle of a superstep is made again as one run with the continuation
that finished it; a change of what a task writes is still caught at its event.
"""

from __future__ import annotations

import itertools
from typing import Any

import anyio
import pytest

from nodestep import END, START, BaseState, Graph, InMemoryStateStore, node
from nodestep.store import StateStore
from nodestep.testing import replay

pytestmark = pytest.mark.anyio


class Pair(BaseState):
    a: str = ""
    b: str = ""


def pair_graph(store: StateStore | None, *, first: str | None = None, a: str = "A") -> Graph[Pair]:
    """Two parallel tasks; ``first`` names the one that waits for none (the other waits
    for it), ``a`` what ``left`` writes."""
    gate: dict[str, anyio.Event] = {}

    @node
    def begin(state: Pair) -> dict[str, Any]:
        gate["done"] = anyio.Event()
        return {}

    async def finish(name: str) -> None:
        if first is None:
            return
        if name == first:
            gate["done"].set()
        else:
            await gate["done"].wait()

    @node
    async def left(state: Pair) -> dict[str, Any]:
        await finish("left")
        return {"a": a}

    @node
    async def right(state: Pair) -> dict[str, Any]:
        await finish("right")
        return {"b": "B"}

    return Graph(Pair, state_store=store).flow(
        START >> begin, begin >> [left, right], left >> END, right >> END
    )


async def test_a_fork_between_two_tasks_replays_clean_when_they_finish_the_other_way(
    store: StateStore,
) -> None:
    graph = pair_graph(store, first="left")
    await graph.ainvoke({}, thread_id="t")
    finished = [e for e in (await graph.history("t")).events if e.type == "task_finished"]
    await graph.fork("t", from_=finished[0].id, name="alt")
    await graph.ainvoke(None, thread_id="t", branch_id="alt")

    report = await replay(pair_graph(None, first="right"), store, "t", branch_id="alt")

    assert report.clean, report


async def crashed_thread(store: StateStore, *, continued: bool) -> None:
    """Store thread 't' as a process killed after its first parallel task leaves it, and
    (``continued``) the continuation a new process made."""
    whole = InMemoryStateStore()
    await pair_graph(whole, first="left").ainvoke({}, thread_id="t")  # left's record first
    records = await whole.read("t", "main")
    first_task = next(r["seq"] for r in records if r["type"] == "task_finished")
    await store.append("t", "main", records[:first_task], after=0)
    if continued:
        await pair_graph(store).ainvoke(None, thread_id="t")


async def test_a_crashed_run_replays_with_its_continuation_as_one_run(
    store: StateStore,
) -> None:
    await crashed_thread(store, continued=True)

    report = await replay(pair_graph(None), store, "t")

    assert report.clean, report
    assert report.calls == 1


async def test_a_change_in_a_crashed_runs_finished_task_is_caught_at_its_event(
    store: StateStore,
) -> None:
    await crashed_thread(store, continued=True)

    report = await replay(pair_graph(None, a="changed"), store, "t")

    found = report.divergence
    assert found is not None
    assert (found.event_type, found.node, found.field) == ("task_finished", "left", "a")
    assert (found.sequence, found.old, found.new) == (4, "A", "changed")


async def test_a_run_stored_without_an_end_ends_the_replay_with_a_note(
    store: StateStore,
) -> None:
    await crashed_thread(store, continued=False)

    report = await replay(pair_graph(None), store, "t")

    assert report.clean, report
    assert report.calls == 0
    assert report.note is not None and "main@4" in report.note
    assert "no end" in report.note


async def test_an_edit_after_a_crashed_run_ends_the_replay_with_a_note(
    store: StateStore,
) -> None:
    await crashed_thread(store, continued=False)
    graph = pair_graph(store)
    await graph.update_state("t", {"b": "edited"}, as_node="right")  # stands in for right
    await graph.ainvoke(None, thread_id="t")

    report = await replay(pair_graph(None), store, "t")

    assert report.clean, report
    assert report.note is not None and "main@4" in report.note


async def test_forks_inside_and_after_a_crashed_run_replay_clean(store: StateStore) -> None:
    await crashed_thread(store, continued=True)
    graph = pair_graph(store)
    await graph.ainvoke({}, thread_id="t")  # a later turn, numbered after the continuation
    events = (await graph.history("t")).events
    inside = next(e for e in events if e.type == "task_finished")  # before the crash
    later = [e for e in events if e.type == "superstep_completed"][-1]
    await graph.fork("t", from_=inside.id, name="inside")
    await graph.fork("t", from_=later.id, name="later")
    await graph.ainvoke(None, thread_id="t", branch_id="inside")
    await graph.ainvoke({}, thread_id="t", branch_id="later")

    for branch in ("inside", "later"):
        report = await replay(pair_graph(None), store, "t", branch_id=branch)
        assert report.clean, report
        assert report.note is None


async def test_a_checkpoint_after_a_runs_end_does_not_make_it_a_crashed_run() -> None:
    store = InMemoryStateStore()
    graph = pair_graph(store)
    while not any(  # until a checkpoint follows a run's end (one follows every 50 records)
        before["type"] == "run_completed" and after["type"] == "checkpoint"
        for before, after in itertools.pairwise(await store.read("t", "main"))
    ):
        await graph.ainvoke({}, thread_id="t")

    report = await replay(pair_graph(None), store, "t")

    assert report.clean, report
    assert report.note is None
