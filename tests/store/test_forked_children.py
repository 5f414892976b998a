"""A process forked after the parent used a store runs on that store at once, on every store.

A child of ``os.fork`` (or of ``multiprocessing`` with the fork start method) has only the
thread that forked: a lock another thread held, a pool whose workers are gone, an event loop
whose selector it shares with the parent, a connection SQLite or PostgreSQL must not see
cross a fork. Each store and the sync driver reset theirs at fork; here the child's first
calls must work, within a timeout, so that a hang fails the test instead of the suite.
"""

from __future__ import annotations

import asyncio
import multiprocessing
import threading

import pytest
from forking import in_child, needs_fork, wait

from nodestep.store import StateStore
from store_helpers import poll_graph

pytestmark = needs_fork

CHILD_TIMEOUT = 30.0
"""Seconds a child may take; one that hangs is killed and the test fails."""


def _run_twice(store: StateStore, thread_id: str) -> int:
    """In the child: two runs on a thread of its own and one on the parent's; 0 if right."""
    graph = poll_graph(store)
    graph.invoke({"votes": ["c"]}, thread_id=thread_id)
    second = graph.invoke({"votes": ["d"]}, thread_id=thread_id)
    shared = graph.invoke({"votes": ["c"]}, thread_id="parent")
    ok = second.state.votes == ["c", "d"] and shared.state.votes[-1] == "c"
    return 0 if ok else 3


def test_a_child_forked_after_a_sync_invoke_runs_on_the_store(store: StateStore) -> None:
    poll_graph(store).invoke({"votes": ["p"]}, thread_id="parent")
    pid = in_child(lambda: _run_twice(store, "child"))
    assert wait(pid, CHILD_TIMEOUT) == 0
    # The parent goes on after its child, on the store it had open.
    assert poll_graph(store).invoke({"votes": ["q"]}, thread_id="parent").state.count >= 2


def test_a_child_forked_after_an_invoke_from_a_running_loop_runs(store: StateStore) -> None:
    # invoke() inside a running loop runs on the sync driver's worker pool, whose threads a
    # child does not have: the child must get a pool of its own, not wait for dead workers.
    graph = poll_graph(store)

    async def invoke_in_loop(thread_id: str) -> int:
        return graph.invoke({"votes": ["x"]}, thread_id=thread_id).state.count

    assert asyncio.run(invoke_in_loop("parent")) == 1
    pid = in_child(lambda: 0 if asyncio.run(invoke_in_loop("child")) == 1 else 3)
    assert wait(pid, CHILD_TIMEOUT) == 0


def test_a_multiprocessing_fork_child_runs_on_the_store(store: StateStore) -> None:
    poll_graph(store).invoke({"votes": ["p"]}, thread_id="parent")

    def child() -> None:
        if _run_twice(store, "mp-child") != 0:
            raise SystemExit(3)

    process = multiprocessing.get_context("fork").Process(target=child)
    process.start()
    process.join(CHILD_TIMEOUT)
    if process.is_alive():
        process.kill()
        process.join()
        pytest.fail(f"the child hung: killed after {CHILD_TIMEOUT} s")
    assert process.exitcode == 0


@pytest.mark.slow
def test_children_forked_while_another_thread_runs_on_the_store_all_run(
    store: StateStore,
) -> None:
    # A thread of the parent runs graphs without pause, so most forks catch it inside a
    # store call, holding the store's locks (and, on SQLite, inside SQLite itself).
    graph = poll_graph(store)
    graph.invoke({"votes": ["p"]}, thread_id="parent")
    stop = threading.Event()

    def busy() -> None:
        n = 0
        while not stop.is_set():
            graph.invoke({"votes": ["b"]}, thread_id=f"busy-{n % 3}")
            n += 1

    worker = threading.Thread(target=busy)
    worker.start()
    try:
        codes = []
        for k in range(12):
            pid = in_child(lambda k=k: _run_twice(store, f"child-{k}"))
            codes.append(wait(pid, CHILD_TIMEOUT))
    finally:
        stop.set()
        worker.join()
    assert codes == [0] * 12
