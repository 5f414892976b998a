"""``Graph(timeout=)`` in a superstep of several tasks: a task that failed before the
timeout ran out is the run's failure, raised and recorded; the timeout is a note on it."""

from __future__ import annotations

from typing import Any

import anyio
import pytest

from nodestep import (
    END,
    START,
    BaseState,
    CachePolicy,
    Graph,
    GraphTimeoutError,
    InMemoryStateStore,
    RetryPolicy,
    node,
)
from nodestep.testing import FakeTime, sequential_ids

pytestmark = [pytest.mark.anyio, pytest.mark.slow]

# Long enough for ``pay``'s two attempts (no waits: a fake sleep) under a loaded machine.
TIMEOUT = 0.5


class Order(BaseState):
    paid: bool = False


@node
def start(state: Order) -> dict[str, Any]:
    return {}


@node
async def ship(state: Order) -> dict[str, Any]:
    await anyio.sleep_forever()  # still running when the timeout runs out
    return {}


def order_graph(pay: Any) -> Graph[Order]:
    graph = Graph(
        Order,
        state_store=InMemoryStateStore(),
        timeout=TIMEOUT,
        sleep=FakeTime().sleep,
        id_factory=sequential_ids(),
    )
    return graph.flow(START >> start, start >> [pay, ship], pay >> END, ship >> END)


async def test_a_task_that_spent_its_retries_before_the_timeout_fails_the_run() -> None:
    @node(retry=RetryPolicy(attempts=2, backoff=0))
    def pay(state: Order) -> dict[str, Any]:
        raise ConnectionError("the payment API is down")

    graph = order_graph(pay)
    with pytest.raises(ConnectionError, match="the payment API is down") as raised:
        await graph.ainvoke({}, thread_id="t")
    assert raised.value.__notes__ == [
        f"Then the graph's timeout={TIMEOUT:g}s ran out in step 1 and stopped the tasks "
        "that had not finished ('ship'). With a state store, invoke(None, thread_id=...) "
        "runs them and the failed task again."
    ]
    events = (await graph.history("t")).events
    assert [e.type for e in events][-2:] == ["task_retried", "run_failed"]
    failed = events[-1].data
    assert (failed["step"], failed["node"], failed["error"]) == (1, "pay", "ConnectionError")
    assert failed["message"] == "the payment API is down"
    assert (await graph.get_state("t")).status == "failed"


async def test_a_stop_iteration_before_the_timeout_is_raised_as_without_one() -> None:
    @node
    def pay(state: Order) -> dict[str, Any]:
        return next(iter([]))

    graph = order_graph(pay)
    with pytest.raises(Exception, match="Node 'pay' raised StopIteration") as raised:
        await graph.ainvoke({}, thread_id="t")
    assert isinstance(raised.value.__cause__, StopIteration)
    failed = (await graph.history("t")).events[-1].data
    assert (failed["node"], failed["error"]) == ("pay", "StopIteration")


async def test_a_cache_key_that_raised_before_the_timeout_fails_the_run() -> None:
    def broken_key(state: Order) -> Any:
        raise KeyError("no price list for this order")

    @node(cache=CachePolicy(key=broken_key))
    def pay(state: Order) -> dict[str, Any]:
        return {"paid": True}

    graph = order_graph(pay)
    with pytest.raises(KeyError, match="no price list") as raised:
        await graph.ainvoke({}, thread_id="t")
    assert "stopped the tasks that had not finished ('ship')" in raised.value.__notes__[0]
    failed = (await graph.history("t")).events[-1].data
    assert (failed["node"], failed["error"]) == ("pay", "KeyError")


async def test_with_no_failed_task_the_timeout_is_the_failure() -> None:
    @node
    async def pay(state: Order) -> dict[str, Any]:
        return {"paid": True}

    graph = order_graph(pay)
    with pytest.raises(GraphTimeoutError, match="stopped in step 1"):
        await graph.ainvoke({}, thread_id="t")
    events = (await graph.history("t")).events
    assert [e.type for e in events][-2:] == ["task_finished", "run_failed"]
    assert events[-1].data["error"] == "GraphTimeoutError"
    assert "node" not in events[-1].data
