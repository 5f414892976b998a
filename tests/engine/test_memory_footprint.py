"""What a thread costs in memory: the stored lines and the graph's cache hold right-sized bytes.

orjson returns its output in a buffer of at least 4 KiB, whatever the length; kept as it is,
every stored line and every cached state would cost that much. tracemalloc counts the bytes
really allocated, so these tests fail if such a buffer is kept.
"""

from __future__ import annotations

import gc
import tracemalloc
from collections.abc import Callable

import pytest

from nodestep import END, START, BaseState, Graph, InMemoryStateStore, node


class Count(BaseState):
    n: int = 0


@node
def one(state: Count) -> dict:
    return {"n": state.n + 1}


@node
def two(state: Count) -> dict:
    return {"n": state.n + 1}


@node
def three(state: Count) -> dict:
    return {"n": state.n + 1}


def allocated_per_call(calls: int, call: Callable[[int], object]) -> float:
    """Return the bytes still allocated after ``calls`` calls of ``call``, per call."""
    kept = []
    gc.collect()
    tracemalloc.start()
    try:
        before = tracemalloc.get_traced_memory()[0]
        for i in range(calls):
            kept.append(call(i))
        gc.collect()
        return (tracemalloc.get_traced_memory()[0] - before) / calls
    finally:
        tracemalloc.stop()


@pytest.mark.slow  # tracemalloc slows every allocation down
def test_a_three_step_thread_holds_a_few_kilobytes_not_a_buffer_per_line() -> None:
    graph = Graph(Count, state_store=InMemoryStateStore()).flow(
        START >> one, one >> two, two >> three, three >> END
    )
    graph.invoke({}, thread_id="warm-up")
    # Six records a thread (checkpoint, run_started, three supersteps, run_completed) and
    # one cached state: with a 4 KiB buffer each kept, that would be over 28 KB.
    per_thread = allocated_per_call(200, lambda i: graph.invoke({}, thread_id=f"t{i}"))
    # About 4,900 to 5,200 bytes (the store indexes each event id by its thread too).
    assert per_thread < 6_000, f"{per_thread:.0f} bytes a thread"
