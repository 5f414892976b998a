"""A sync stream left early gives its thread back before the caller's next call, on every store.

The run of a stream holds its thread's lease while the caller handles an event; leaving the
loop must stop the run and give the lease back at once, so that the next call on the thread
does not find it busy (``ThreadBusyError``).
"""

from __future__ import annotations

import threading
from collections.abc import Iterator
from operator import add
from typing import Annotated

import pytest
from pydantic import Field

from nodestep import END, START, BaseState, Graph, StreamEvent, ThreadBusyError, node
from nodestep.store import StateStore
from store_helpers import records_sync

ROUNDS = 10


class Steps(BaseState):
    """Three steps a run goes through, so that a stream left after one has more to do."""

    done: Annotated[list[str], add] = Field(default_factory=list)


@node
def one(state: Steps) -> dict[str, list[str]]:
    return {"done": ["one"]}


@node
def two(state: Steps) -> dict[str, list[str]]:
    return {"done": ["two"]}


@node
async def three(state: Steps) -> dict[str, list[str]]:
    return {"done": ["three"]}


def steps_graph(store: StateStore) -> Graph[Steps]:
    return Graph(Steps, state_store=store).flow(
        START >> one, one >> two, two >> three, three >> END
    )


def _kinds(store: StateStore) -> list[str]:
    return [r["type"] for r in records_sync(store, "t")]


def test_leaving_a_stream_loop_lets_the_next_call_on_its_thread_run_at_once(
    store: StateStore,
) -> None:
    graph = steps_graph(store)
    for _ in range(ROUNDS):
        for _event in graph.stream({}, thread_id="t", stream_mode="updates"):
            break
        assert graph.invoke({}, thread_id="t").status == "completed"
    assert _kinds(store).count("run_stopped") == ROUNDS


def test_a_held_stream_left_with_break_is_closed_by_the_next_call_on_its_thread(
    store: StateStore,
) -> None:
    graph = steps_graph(store)
    for _ in range(ROUNDS):
        held = graph.stream({}, thread_id="t", stream_mode="debug")
        for _event in held:
            break  # `held` still refers to the open stream: Python does not close it
        assert graph.invoke({}, thread_id="t").status == "completed"
        assert list(held) == []  # closed: its run stopped where it paused
    stopped = [r for r in records_sync(store, "t") if r["type"] == "run_stopped"]
    assert [r["reason"] for r in stopped] == ["stream_closed"] * ROUNDS


def test_a_held_stream_is_closed_by_a_new_stream_of_its_thread(store: StateStore) -> None:
    graph = steps_graph(store)
    held: Iterator[StreamEvent] = graph.stream({}, thread_id="t", stream_mode="updates")
    next(held)
    events = list(graph.stream({}, thread_id="t", stream_mode="updates"))
    assert events[-1].mode == "final"
    assert list(held) == []


def test_a_stream_held_open_by_another_os_thread_keeps_its_thread_busy(
    store: StateStore,
) -> None:
    graph = steps_graph(store)
    held = graph.stream({}, thread_id="t", stream_mode="updates")
    next(held)
    refused: list[BaseException] = []

    def other() -> None:
        try:
            graph.invoke({}, thread_id="t")
        except ThreadBusyError as e:
            refused.append(e)

    worker = threading.Thread(target=other)
    worker.start()
    worker.join()
    assert len(refused) == 1
    held.close()
    assert graph.invoke({}, thread_id="t").status == "completed"


@pytest.mark.parametrize("close", ["close", "del"])
def test_closing_or_dropping_a_stream_gives_its_thread_back(store: StateStore, close: str) -> None:
    graph = steps_graph(store)
    for _ in range(ROUNDS):
        held = graph.stream({}, thread_id="t", stream_mode="values")
        next(held)
        if close == "close":
            held.close()  # type: ignore[attr-defined]
        else:
            del held
        assert graph.invoke({}, thread_id="t").status == "completed"
