"""A run keeps its thread while a plain ``def`` node that runs inline, on the run's own
event loop, takes longer than the lease's ttl: the lease is renewed from another thread.

Why it matters: a lone plain ``def`` node (a sync model call, say) blocks the loop whose
task renews the lease. Past the ttl (30 s by default) the lease expired, a caller waiting
with ``wait_for_thread=`` took the thread over, and the run's next append was refused with
``ThreadBusyError``, the node's work thrown away.
"""

from __future__ import annotations

import threading
import time
from functools import partial

import anyio
import pytest

from nodestep import END, START, BaseState, Graph, ThreadBusyError, node
from nodestep.store import StateStore

TTL = 0.5


class Job(BaseState):
    done: bool = False


def try_to_take(store: StateStore) -> BaseException | None:
    """Try to take thread 't' from another OS thread; return what refused it, if anything."""
    refused: list[BaseException | None] = []

    def take() -> None:
        try:
            anyio.run(partial(store.acquire_lease, "t", "main", "intruder", ttl=TTL))
            refused.append(None)
        except BaseException as error:
            refused.append(error)

    thread = threading.Thread(target=take)
    thread.start()
    thread.join()
    return refused[0]


@pytest.mark.slow
def test_a_plain_def_node_longer_than_the_lease_ttl_keeps_the_thread(store: StateStore) -> None:
    refusals: list[BaseException | None] = []

    @node
    def work(state: Job) -> dict:
        time.sleep(2 * TTL)  # a long sync call, on the run's loop thread (a lone plain def)
        refusals.append(try_to_take(store))
        return {"done": True}

    graph = Graph(Job, state_store=store, lease_ttl=TTL).flow(START >> work, work >> END)
    result = graph.invoke({}, thread_id="t")
    assert isinstance(refusals[0], ThreadBusyError), "another writer took the thread"
    assert result.status == "completed" and result.state.done
