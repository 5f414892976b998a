"""A cancel from outside stops a run where it stands and records ``run_stopped``, on asyncio
and trio, for ``ainvoke`` and ``astream``, so the unfinished superstep can be continued; and
a stream's run waits while the caller handles an event."""

from __future__ import annotations

from collections.abc import Sequence
from typing import Annotated

import anyio
import pytest
from pydantic import Field

from nodestep import END, START, BaseState, Command, Graph, InMemoryStateStore, add, node
from nodestep.store import Record, StateStore
from store_helpers import cancel_when

pytestmark = pytest.mark.anyio


class Trip(BaseState):
    log: Annotated[list[str], add] = Field(default_factory=list)


class FastStored(InMemoryStateStore):
    """A memory store that says when it has stored fast's ``task_finished``: slow still runs."""

    def __init__(self) -> None:
        super().__init__()
        self.fast_finished = anyio.Event()

    async def append(
        self, thread_id: str, branch_id: str, records: Sequence[Record], *, after: int
    ) -> None:
        await super().append(thread_id, branch_id, records, after=after)
        if any(r["type"] == "task_finished" and r["node"] == "fast" for r in records):
            self.fast_finished.set()


def trip_graph(store: StateStore, runs: list[str], gate: dict[str, bool]) -> Graph[Trip]:
    @node
    async def fast(state: Trip) -> dict:
        runs.append("fast")
        return {"log": ["fast"]}

    @node
    async def slow(state: Trip) -> dict:
        runs.append("slow")
        if gate["hold"]:
            await anyio.sleep(30)  # held until the cancel; 30 s bounds a cancel that never comes
        return {"log": ["slow"]}

    @node(goto=[fast, slow])
    def plan(state: Trip) -> Command:
        return Command(goto=[fast, slow])

    return Graph(Trip, state_store=store).flow(START >> plan, fast >> END, slow >> END)


async def test_a_cancel_scope_around_ainvoke_records_run_stopped_and_the_run_continues() -> None:
    store = FastStored()
    runs: list[str] = []
    gate = {"hold": True}
    graph = trip_graph(store, runs, gate)
    with anyio.CancelScope() as scope:
        async with anyio.create_task_group() as tasks:
            tasks.start_soon(cancel_when, store.fast_finished, scope)
            await graph.ainvoke({}, thread_id="t")
    assert scope.cancelled_caught
    events = (await graph.history("t")).events
    assert [e.type for e in events][-3:] == ["superstep_completed", "task_finished", "run_stopped"]
    assert events[-1].data["reason"] == "cancelled" and events[-1].data["step"] == 1
    snapshot = await graph.get_state("t")
    assert snapshot.status == "running" and snapshot.next == ("slow",)  # fast finished

    gate["hold"] = False
    runs.clear()
    result = await graph.ainvoke(None, thread_id="t")
    assert runs == ["slow"], "the finished task ran again"
    assert result.status == "completed" and result.state.log == ["fast", "slow"]


async def test_cancelling_the_code_that_iterates_astream_records_run_stopped() -> None:
    store = FastStored()
    runs: list[str] = []
    graph = trip_graph(store, runs, {"hold": True})
    seen: list[str | None] = []
    with anyio.CancelScope() as scope:
        async with anyio.create_task_group() as tasks:
            tasks.start_soon(cancel_when, store.fast_finished, scope)
            async for event in graph.astream({}, stream_mode="updates", thread_id="t"):
                seen.append(event.node)
    assert seen == ["plan"]  # superstep 1 never completes: slow is still running
    last = (await graph.history("t")).events[-1]
    assert last.type == "run_stopped" and last.data["reason"] == "cancelled"


async def test_closing_astream_early_records_stream_closed() -> None:
    store = InMemoryStateStore()
    graph = trip_graph(store, [], {"hold": False})
    stream = graph.astream({}, stream_mode="updates", thread_id="t")
    first = await stream.__anext__()
    assert first.node == "plan"
    await stream.aclose()
    last = (await graph.history("t")).events[-1]
    assert last.type == "run_stopped" and last.data["reason"] == "stream_closed"
    assert (await graph.ainvoke(None, thread_id="t")).state.log == ["fast", "slow"]


async def test_no_superstep_starts_while_the_caller_handles_an_event() -> None:
    ran: list[str] = []

    @node
    async def one(state: Trip) -> dict:
        ran.append("one")
        return {"log": ["one"]}

    @node
    async def two(state: Trip) -> dict:
        ran.append("two")
        return {"log": ["two"]}

    graph = Graph(Trip).flow(START >> one, one >> two, two >> END)
    async for event in graph.astream({}, stream_mode="updates"):
        if event.node == "one":
            await anyio.wait_all_tasks_blocked()  # the run could go on meanwhile; it must not
            assert ran == ["one"]
    assert ran == ["one", "two"]


async def test_a_node_error_reaches_the_caller_of_astream_unchanged() -> None:
    @node
    async def boom(state: Trip) -> dict:
        raise LookupError("no such booking")

    graph = Graph(Trip).flow(START >> boom, boom >> END)
    with pytest.raises(LookupError, match="no such booking"):
        async for _ in graph.astream({}, stream_mode="updates"):
            pass
