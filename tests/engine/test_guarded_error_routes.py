"""Error routes on nodes with a retry policy or a breaker: retries and counts come first."""

from __future__ import annotations

from typing import Annotated, Any

import pytest
from pydantic import Field

from nodestep import (
    END,
    START,
    BaseState,
    CircuitBreaker,
    CircuitOpenError,
    Graph,
    InMemoryStateStore,
    RetryPolicy,
    add,
    failed,
    node,
    when,
)
from nodestep.testing import FakeTime


class Call(BaseState):
    log: Annotated[list[str], add] = Field(default_factory=list)


def build(fn: Any, *, retry: RetryPolicy | None, breaker: CircuitBreaker | None) -> Any:
    guarded = node(fn, name="call", retry=retry, breaker=breaker)

    @node
    def fallback(state: Call) -> dict[str, Any]:
        return {"log": ["fallback"]}

    fake = FakeTime()
    graph = Graph(Call, state_store=InMemoryStateStore(), clock=fake, sleep=fake.sleep)
    route = when(failed(ConnectionError, CircuitOpenError), fallback, otherwise=END)
    return graph.flow(START >> guarded, guarded >> route, fallback >> END), fake


def events(graph: Any, thread: str, kind: str) -> list[dict[str, Any]]:
    return [e.data for e in graph.history_sync(thread).events if e.type == kind]


@pytest.mark.parametrize("is_async", [False, True], ids=["def", "async"])
def test_a_retried_node_is_retried_before_its_error_route_takes_the_last_failure(
    is_async: bool,
) -> None:
    calls: list[int] = []

    def down(state: Call) -> None:
        calls.append(1)
        raise ConnectionError(f"down (call {len(calls)})")

    async def down_async(state: Call) -> None:
        down(state)

    fn = down_async if is_async else down
    policy = RetryPolicy(attempts=3, backoff=1, jitter=0)
    graph, fake = build(fn, retry=policy, breaker=None)
    assert graph.invoke({}, thread_id="t").state.log == ["fallback"]
    assert len(calls) == 3
    assert [r["attempt"] for r in events(graph, "t", "task_retried")] == [1, 2]
    step = events(graph, "t", "superstep_completed")[0]
    assert step["tasks"]["call"]["failed"] == {
        "error": "ConnectionError",
        "message": "down (call 3)",
    }
    assert fake.sleeps == [1.0, 2.0]


def test_an_error_route_does_not_hide_failures_from_the_breaker() -> None:
    def down(state: Call) -> None:
        raise ConnectionError("down")

    breaker = CircuitBreaker(failures=2, window=60, cooldown=30)
    graph, _ = build(down, retry=None, breaker=breaker)
    graph.invoke({}, thread_id="a")
    assert breaker.state == "closed"
    graph.invoke({}, thread_id="b")
    assert breaker.state == "open"
    assert [r["state"] for r in events(graph, "b", "breaker_changed")] == ["open"]


def test_an_error_route_takes_the_refusal_of_an_open_breaker() -> None:
    calls: list[int] = []

    def down(state: Call) -> None:
        calls.append(1)
        raise ConnectionError("down")

    breaker = CircuitBreaker(failures=1, cooldown=30)
    graph, _ = build(down, retry=RetryPolicy(attempts=2, backoff=0), breaker=breaker)
    assert graph.invoke({}, thread_id="t").state.log == ["fallback"]
    assert len(calls) == 1  # the second attempt was refused without calling the node
    step = events(graph, "t", "superstep_completed")[0]
    assert step["tasks"]["call"]["failed"]["error"] == "CircuitOpenError"


def test_a_failure_no_error_route_takes_still_fails_the_run_after_the_retries() -> None:
    calls: list[int] = []

    def wrong(state: Call) -> None:
        calls.append(1)
        raise ValueError("not a connection problem")

    graph, _ = build(wrong, retry=RetryPolicy(attempts=2, backoff=0), breaker=None)
    with pytest.raises(ValueError, match="not a connection problem"):
        graph.invoke({}, thread_id="t")
    assert len(calls) == 2
    assert [e.type for e in graph.history_sync("t").events][-1] == "run_failed"
