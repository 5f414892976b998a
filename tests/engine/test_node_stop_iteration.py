"""A node that raises ``StopIteration`` (``next()`` on an empty iterator) fails the run with
an error naming the node and the fix, not Python's ``RuntimeError: coroutine raised
StopIteration``, which a coroutine makes of it; the history records the ``StopIteration``."""

from __future__ import annotations

import pytest

from nodestep import (
    END,
    START,
    BaseState,
    Graph,
    GraphExecutionError,
    InMemoryStateStore,
    RetryPolicy,
    node,
)


class Feed(BaseState):
    item: str = ""


@node
def first_item(state: Feed) -> dict[str, str]:
    return {"item": next(iter([]))}


@node
def other(state: Feed) -> None:
    return None


@node(retry=RetryPolicy(attempts=2, backoff=0, retry_on=StopIteration))
def retried(state: Feed) -> dict[str, str]:
    return {"item": next(iter([]))}


MESSAGE = (
    "Node 'first_item' raised StopIteration, which cannot pass out of nodestep's coroutines "
    "(Python would raise 'RuntimeError: coroutine raised StopIteration'). Catch it in the "
    "node, e.g. next(iterator, default), and return what the node should."
)


def test_a_lone_node_raising_stop_iteration_is_named_with_the_fix() -> None:
    graph = Graph(Feed, state_store=InMemoryStateStore()).flow(
        START >> first_item, first_item >> END
    )
    with pytest.raises(GraphExecutionError) as caught:
        graph.invoke({}, thread_id="t")
    assert str(caught.value) == MESSAGE
    assert isinstance(caught.value, RuntimeError)
    assert isinstance(caught.value.__cause__, StopIteration)
    (failed,) = [e for e in graph.history_sync("t").events if e.type == "run_failed"]
    assert (failed.data["error"], failed.data["node"]) == ("StopIteration", "first_item")


def test_a_node_among_others_in_a_superstep_and_a_stream_say_the_same() -> None:
    graph = Graph(Feed).flow(
        START >> other, other >> [first_item, retried], first_item >> END, retried >> END
    )
    with pytest.raises(GraphExecutionError, match=r"^Node 'first_item' raised StopIteration"):
        graph.invoke({})
    with pytest.raises(GraphExecutionError, match=r"^Node 'first_item' raised StopIteration"):
        list(graph.stream({}, stream_mode="values"))


def test_a_retried_node_is_retried_and_then_named() -> None:
    graph = Graph(Feed, state_store=InMemoryStateStore()).flow(START >> retried, retried >> END)
    with pytest.raises(GraphExecutionError, match=r"^Node 'retried' raised StopIteration"):
        graph.invoke({}, thread_id="t")
    kinds = [e.type for e in graph.history_sync("t").events]
    assert kinds.count("task_retried") == 1
