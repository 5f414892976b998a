"""``update_state_sync`` and ``migrate_sync`` close the caller's own held sync stream first.

A sync stream kept in a variable after a ``break`` holds its thread's lease, and only the
OS thread that holds it could ask it for more events. ``invoke`` and ``stream`` close it
before they take the thread (see ``_engine.sync.track_paused``); the thread methods that
take the thread too (``update_state``, ``migrate``) must do alike, or they raise
``ThreadBusyError`` on a stream their own caller left.
"""

from __future__ import annotations

import threading
from operator import add
from typing import Annotated, Any

from pydantic import Field

from nodestep import END, START, BaseState, Graph, ThreadBusyError, node
from nodestep.store import StateStore
from store_helpers import records_sync


class Steps(BaseState):
    done: Annotated[list[str], add] = Field(default_factory=list)


@node
def one(state: Steps) -> dict[str, Any]:
    return {"done": ["one"]}


@node
def two(state: Steps) -> dict[str, Any]:
    return {"done": ["two"]}


def test_update_state_sync_closes_a_stream_its_caller_holds(store: StateStore) -> None:
    graph = Graph(Steps, state_store=store).flow(START >> one, one >> two, two >> END)
    held = graph.stream({}, thread_id="t", stream_mode="updates")
    next(held)  # the run pauses after superstep 1, holding the thread
    graph.update_state_sync("t", {"done": ["edit"]})
    assert list(held) == []  # closed: its run stopped where it paused
    stopped = [r for r in records_sync(store, "t") if r["type"] == "run_stopped"]
    assert [r["reason"] for r in stopped] == ["stream_closed"]
    assert graph.invoke(None, thread_id="t").state.done == ["one", "edit", "two"]


def test_migrate_sync_closes_a_stream_its_caller_holds(store: StateStore) -> None:
    graph = Graph(Steps, state_store=store).flow(START >> one, one >> END)
    held = graph.stream({}, thread_id="t", stream_mode="updates")
    next(held)
    graph.migrate_sync("t", lambda values: values, from_state=Steps)
    assert list(held) == []
    assert records_sync(store, "t")[-1]["type"] == "checkpoint"


def test_update_state_sync_leaves_a_stream_of_another_os_thread_alone(
    store: StateStore,
) -> None:
    graph = Graph(Steps, state_store=store).flow(START >> one, one >> two, two >> END)
    held = graph.stream({}, thread_id="t", stream_mode="updates")
    next(held)
    refused: list[BaseException] = []

    def other() -> None:
        try:
            graph.update_state_sync("t", {"done": ["edit"]})
        except ThreadBusyError as e:
            refused.append(e)

    worker = threading.Thread(target=other)
    worker.start()
    worker.join()
    assert len(refused) == 1
    assert [e.node for e in held if e.mode == "updates"] == ["two"]  # still open: it runs on
