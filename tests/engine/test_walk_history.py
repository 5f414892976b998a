"""Walking a branch's history: ``state_history`` gives every event with the state after it.

It must say what ``get_state(at=...)`` says at each event, read the branch once however
long it is, and find the events worth forking at (the last pause, before a node ran).
"""

from __future__ import annotations

from pathlib import Path
from typing import Annotated, Any

import pytest
from pydantic import Field

from nodestep import (
    END,
    START,
    BaseState,
    Command,
    Graph,
    HistoryStep,
    InMemoryStateStore,
    Resume,
    StateHistory,
    UnknownThreadError,
    add,
    interrupt,
    node,
)
from nodestep.store import StateStore
from store_helpers import counting_store

pytestmark = pytest.mark.anyio


class Trip(BaseState):
    log: Annotated[list[str], add] = Field(default_factory=list)
    answer: str = ""


class Switch:
    def __init__(self) -> None:
        self.hotel_down = False
        self.ask = False
        self.calls: list[str] = []


def trip_graph(store: StateStore, switch: Switch) -> Graph[Trip]:
    @node
    async def book_flight(state: Trip) -> dict:
        switch.calls.append("book_flight")
        return {"log": ["flight"]}

    @node
    async def book_hotel(state: Trip) -> dict:
        switch.calls.append("book_hotel")
        if switch.hotel_down:
            raise ConnectionError("the hotel service is down")
        answer = interrupt("which room?", id="room") if switch.ask else ""
        return {"log": ["hotel"], "answer": str(answer)}

    @node(goto=[book_flight, book_hotel])
    def plan(state: Trip) -> Command:
        switch.calls.append("plan")
        return Command(goto=[book_flight, book_hotel])

    @node
    def pay(state: Trip) -> dict:
        switch.calls.append("pay")
        return {"log": ["pay"]}

    return Graph(Trip, state_store=store).flow(
        START >> plan, book_flight >> pay, book_hotel >> pay, pay >> END
    )


async def eventful_thread(store: StateStore, switch: Switch) -> Graph[Trip]:
    """A thread with a failure, a continuation, a pause, an answer and an edit."""
    graph = trip_graph(store, switch)
    switch.hotel_down = True
    with pytest.raises(ConnectionError):
        await graph.ainvoke({}, thread_id="t")
    switch.hotel_down, switch.ask = False, True
    assert (await graph.ainvoke(None, thread_id="t")).status == "interrupted"
    await graph.update_state("t", {"log": ["edited"]})
    await graph.ainvoke(None, thread_id="t", resume=Resume("sea view"))
    return graph


async def test_every_step_shows_what_get_state_at_its_event_shows(store: StateStore) -> None:
    graph = await eventful_thread(store, Switch())
    walked = await graph.state_history("t")
    assert isinstance(walked, StateHistory) and isinstance(walked[0], HistoryStep)
    events = [e for e in await graph.history("t") if e.type != "checkpoint" or e.sequence == 1]
    assert [step.event for step in walked] == events
    for step in walked:
        assert step.snapshot == await graph.get_state("t", at=step.event.id), step.event.type
    assert walked[-1].snapshot == await graph.get_state("t")
    assert walked[-1].snapshot.value.answer == "sea view"


async def test_each_step_names_the_nodes_its_event_records(store: StateStore) -> None:
    graph = await eventful_thread(store, Switch())
    steps = [(s.event.type, s.nodes) for s in await graph.state_history("t")]
    assert ("superstep_completed", ("plan",)) in steps
    assert ("run_failed", ("book_hotel",)) in steps
    assert ("run_paused", ("book_hotel",)) in steps
    assert ("superstep_completed", ("book_flight", "book_hotel")) in steps
    assert ("superstep_completed", ("pay",)) in steps
    assert all(nodes == () for kind, nodes in steps if kind in ("run_started", "state_updated"))


async def test_a_failed_step_says_failed_and_lists_only_the_unfinished_task(
    store: StateStore,
) -> None:
    graph = await eventful_thread(store, Switch())
    failed = next(s for s in await graph.state_history("t") if s.event.type == "run_failed")
    assert (failed.snapshot.status, failed.snapshot.next) == ("failed", ("book_hotel",))
    assert failed.snapshot.error_type == "ConnectionError"


@pytest.mark.parametrize("counting", ["memory", "filesystem"])
async def test_the_walk_reads_the_branch_once_however_long(counting: str, tmp_path: Path) -> None:
    store = counting_store(counting, tmp_path)
    graph = trip_graph(store, Switch())
    for _ in range(25):  # past two checkpoints
        await graph.ainvoke({}, thread_id="t")
    store.read_sizes.clear()
    walked = await trip_graph(store, Switch()).state_history("t")
    history = await graph.history("t")
    assert len(store.read_sizes) == 2  # the walk's one read, and history()'s
    assert len(walked) == len(history) - len(history.checkpoints) + 1
    assert [s.snapshot.value.log.count("pay") for s in walked][-1] == 25
    await store.aclose()


async def test_a_fork_at_the_step_before_a_node_runs_it_again(store: StateStore) -> None:
    switch = Switch()
    graph = await eventful_thread(store, switch)
    walked = await graph.state_history("t")
    before = walked.before("book_hotel")
    assert before is not None and "book_hotel" in before.snapshot.next
    assert walked.before("nobody") is None
    branch = await graph.fork("t", from_=before.event.id, name="again")
    switch.calls.clear()
    switch.ask = False
    result = await graph.ainvoke(None, thread_id="t", branch_id=branch.id)
    assert switch.calls == ["book_hotel", "pay"] and result.status == "completed"


async def test_before_a_node_of_a_single_task_superstep_is_the_event_before_it(
    store: StateStore,
) -> None:
    switch = Switch()
    graph = trip_graph(store, switch)
    await graph.ainvoke({}, thread_id="t")
    walked = await graph.state_history("t")
    before = walked.before("pay")
    assert before is not None and before.snapshot.next == ("pay",)
    plan_before = walked.before("plan")
    assert plan_before is not None and plan_before.event.type == "run_started"


async def test_last_pause_is_the_fork_point_to_answer_again(store: StateStore) -> None:
    graph = await eventful_thread(store, Switch())
    walked = await graph.state_history("t")
    paused = walked.last_pause()
    assert paused is not None and paused.snapshot.status == "paused"
    assert list(paused.snapshot.interrupts) == ["book_hotel:room"]
    branch = await graph.fork("t", from_=paused.event.id, name="other-room")
    result = await graph.ainvoke(
        None, thread_id="t", branch_id=branch.id, resume=Resume("garden view")
    )
    assert result.state.answer == "garden view"
    assert (await graph.get_state("t")).value.answer == "sea view"


async def test_a_branch_walk_starts_at_the_fork(store: StateStore) -> None:
    graph = trip_graph(store, Switch())
    first = await graph.ainvoke({}, thread_id="t")
    await graph.ainvoke({}, thread_id="t")
    branch = await graph.fork("t", from_=first.checkpoint_id, name="b")
    await graph.ainvoke({"log": ["on b"]}, thread_id="t", branch_id="b")
    walked = await graph.state_history("t", branch_id=branch.id)
    assert walked.branch_id == "b" and walked[0].event.type == "checkpoint"
    assert walked[0].snapshot.value == first.state
    assert walked[-1].snapshot == await graph.get_state("t", branch_id="b")
    assert walked.last_pause() is None


async def test_walking_an_unknown_thread_or_branch_raises(store: StateStore) -> None:
    graph = trip_graph(store, Switch())
    with pytest.raises(UnknownThreadError, match=r"^Thread 'nobody' has no history"):
        await graph.state_history("nobody")
    await graph.ainvoke({}, thread_id="t")
    with pytest.raises(UnknownThreadError, match="has no history on branch 'typo'"):
        await graph.state_history("t", branch_id="typo")


def test_the_sync_form_walks_the_same_steps() -> None:
    store = InMemoryStateStore()
    graph = trip_graph(store, Switch())
    graph.invoke({}, thread_id="t")
    steps: Any = graph.state_history_sync("t")
    assert [(s.event.id, s.snapshot.value) for s in steps] == [
        (e.id, graph.get_state_sync("t", at=e.id).value)
        for e in graph.history_sync("t")
        if e.type != "checkpoint" or e.sequence == 1
    ]
