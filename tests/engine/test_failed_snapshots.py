"""The snapshot of a thread whose last superstep failed: status, error, failing node, next.

``get_state`` answers from the folded position (the cache, or the last checkpoint and the
records after it), so the failure is part of the position: ``run_failed`` moves it there,
a checkpoint stores it, and a continuation clears it.
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
    InvalidUpdateError,
    RunLimitExceededError,
    add,
    node,
)
from nodestep._superstep.position import Failure, Position
from nodestep._superstep.records import Checkpoint, RunFailed
from nodestep.store import StateStore
from store_helpers import counting_store, reopened

pytestmark = pytest.mark.anyio


class Trip(BaseState):
    log: Annotated[list[str], add] = Field(default_factory=list)
    hotel: str = ""


class Switch:
    def __init__(self) -> None:
        self.down = True


def trip_graph(store: StateStore, switch: Switch, **options: Any) -> Graph[Trip]:
    @node
    async def book_flight(state: Trip) -> dict:
        return {"log": ["flight"]}

    @node
    async def book_hotel(state: Trip) -> dict:
        if switch.down:
            raise ConnectionError("the hotel service is down")
        return {"log": ["hotel"], "hotel": "Adler"}

    @node(goto=[book_flight, book_hotel])
    def plan(state: Trip) -> Command:
        return Command(goto=[book_flight, book_hotel])

    return Graph(Trip, state_store=store, **options).flow(
        START >> plan, book_flight >> END, book_hotel >> END
    )


async def fail_once(store: StateStore, switch: Switch) -> Graph[Trip]:
    graph = trip_graph(store, switch)
    with pytest.raises(ConnectionError, match=r"^the hotel service is down$"):
        await graph.ainvoke({}, thread_id="t")
    return graph


async def test_snapshot_of_a_failed_superstep_names_the_failed_node_and_error(
    store: StateStore,
) -> None:
    switch = Switch()
    graph = await fail_once(store, switch)
    for reader in (graph, trip_graph(reopened(store), switch)):  # the cache, then the store
        snapshot = await reader.get_state("t")
        assert snapshot.status == "failed"
        assert snapshot.next == ("book_hotel",)  # book_flight finished: it will not run again
        assert (snapshot.error_type, snapshot.error_message, snapshot.failed_node) == (
            "ConnectionError",
            "the hotel service is down",
            "book_hotel",
        )
    failed = (await graph.history("t")).events[-1]
    assert failed.type == "run_failed" and failed.data["node"] == "book_hotel"
    assert (await graph.get_state("t", at=failed.id)).failed_node == "book_hotel"


async def test_continuing_a_failed_superstep_clears_the_failure(store: StateStore) -> None:
    switch = Switch()
    graph = await fail_once(store, switch)
    switch.down = False
    assert (await graph.ainvoke(None, thread_id="t")).state.hotel == "Adler"
    snapshot = await graph.get_state("t")
    assert (snapshot.status, snapshot.next, snapshot.error_type, snapshot.failed_node) == (
        "idle",
        (),
        None,
        None,
    )
    started = [e for e in await graph.history("t") if e.type == "run_started"][-1]
    at_continue = await graph.get_state("t", at=started.id)
    assert (at_continue.status, at_continue.error_type) == ("running", None)


async def test_a_failure_after_a_failure_shows_the_latest_error(store: StateStore) -> None:
    switch = Switch()
    graph = await fail_once(store, switch)
    with pytest.raises(ConnectionError):
        await graph.ainvoke(None, thread_id="t")
    snapshot = await trip_graph(reopened(store), switch).get_state("t")
    assert (snapshot.status, snapshot.next, snapshot.failed_node) == (
        "failed",
        ("book_hotel",),
        "book_hotel",
    )


async def test_a_write_conflict_blocks_the_superstep_without_a_failed_node(
    store: StateStore,
) -> None:
    class Plain(BaseState):
        answer: str = ""

    @node
    def left(state: Plain) -> dict:
        return {"answer": "left"}

    @node
    def right(state: Plain) -> dict:
        return {"answer": "right"}

    @node(goto=[left, right])
    def fan(state: Plain) -> Command:
        return Command(goto=[left, right])

    graph = Graph(Plain, state_store=store).flow(START >> fan, left >> END, right >> END)
    with pytest.raises(InvalidUpdateError, match="answer"):
        await graph.ainvoke({}, thread_id="t")
    snapshot = await graph.get_state("t")
    assert (snapshot.status, snapshot.error_type, snapshot.failed_node) == (
        "blocked",
        "InvalidUpdateError",
        None,
    )
    assert snapshot.next == ()  # both finished: nothing is left to run


async def test_a_run_limit_fails_the_planned_superstep_without_a_failed_node(
    store: StateStore,
) -> None:
    graph = trip_graph(store, Switch(), max_steps=1)
    with pytest.raises(RunLimitExceededError, match="max_steps=1"):
        await graph.ainvoke({}, thread_id="t")
    snapshot = await graph.get_state("t")
    assert (snapshot.status, snapshot.next) == ("failed", ("book_flight", "book_hotel"))
    assert (snapshot.error_type, snapshot.failed_node) == ("RunLimitExceededError", None)
    assert snapshot.error_message is not None and "max_steps=1" in snapshot.error_message


@pytest.mark.parametrize("counting", ["memory", "filesystem"])
async def test_get_state_of_a_failed_long_thread_reads_only_the_tail(
    counting: str, tmp_path: Path
) -> None:
    store = counting_store(counting, tmp_path)
    switch = Switch()
    switch.down = False
    graph = trip_graph(store, switch)
    for _ in range(30):  # five records a turn: checkpoints come every 50
        await graph.ainvoke({}, thread_id="t")
    switch.down = True
    with pytest.raises(ConnectionError):
        await graph.ainvoke({}, thread_id="t")
    store.read_sizes.clear()
    snapshot = await trip_graph(store, switch).get_state("t")  # a new graph: no cache
    assert snapshot.status == "failed" and snapshot.failed_node == "book_hotel"
    assert store.read_sizes and max(store.read_sizes) <= 51
    await store.aclose()


def test_a_checkpoint_keeps_the_failure_of_the_position() -> None:
    graph = trip_graph(None, Switch())  # type: ignore[arg-type]
    schema = graph.schema
    pos = Position(values=schema.defaults())
    failure = Failure(3, "ConnectionError", "down", "book", "book[1]")
    RunFailed("run", failure).advance(schema, pos)
    assert (pos.status, pos.failure) == ("failed", failure)
    body = Checkpoint(pos).to_json(schema)
    assert body["failure"] == {
        "step": 3,
        "error": "ConnectionError",
        "message": "down",
        "node": "book",
        "task": "book[1]",
    }
    assert Checkpoint.from_json(schema, body).position.failure == failure


def test_a_run_failed_record_of_an_earlier_release_has_no_node() -> None:
    schema = trip_graph(None, Switch()).schema  # type: ignore[arg-type]
    body = {"type": "run_failed", "run": "r", "step": 1, "error": "E", "message": "m"}
    record = RunFailed.from_json(schema, body)
    assert record.failure == Failure(1, "E", "m") and record.mergeable
