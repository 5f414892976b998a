"""Circuit breakers in runs: shared by every run of the process, visible in history and streams."""

from __future__ import annotations

import threading
from typing import Any

import anyio
import pytest

from nodestep import (
    END,
    START,
    BaseState,
    CircuitBreaker,
    CircuitOpenError,
    Graph,
    InMemoryStateStore,
    NodeContext,
    Resume,
    RetryPolicy,
    interrupt,
    node,
)
from nodestep.store import StateStore
from nodestep.testing import FakeTime

pytestmark = pytest.mark.anyio


class S(BaseState):
    out: str = ""


class Service:
    """A service the node calls: down until told otherwise; counts its calls."""

    def __init__(self) -> None:
        self.up = False
        self.calls = 0
        self.lock = threading.Lock()

    def call(self) -> str:
        with self.lock:
            self.calls += 1
        if not self.up:
            raise ConnectionError("service down")
        return "ok"


def setup(
    store: StateStore | None, **options: Any
) -> tuple[Graph[S], Service, CircuitBreaker, FakeTime]:
    service = Service()
    breaker = CircuitBreaker(failures=2, window=60, cooldown=30)
    fake = FakeTime()

    @node(breaker=breaker, **options)
    def call(state: S) -> dict[str, Any]:
        return {"out": service.call()}

    g = Graph(S, state_store=store, clock=fake, sleep=fake.sleep).flow(START >> call, call >> END)
    return g, service, breaker, fake


async def types(g: Graph[S], thread: str) -> list[str]:
    return [e.type for e in (await g.history(thread)).events]


async def test_it_opens_after_failures_of_several_runs_and_then_fails_fast(
    store: StateStore,
) -> None:
    g, service, breaker, _ = setup(store)
    for thread in ("a", "b"):
        with pytest.raises(ConnectionError):
            await g.ainvoke({}, thread_id=thread)
    assert breaker.state == "open"
    assert (await types(g, "b"))[-2:] == ["breaker_changed", "run_failed"]
    opened = [e.data for e in (await g.history("b")).events if e.type == "breaker_changed"]
    assert opened == [{"step": 0, "node": "call", "state": "open"}]
    with pytest.raises(CircuitOpenError, match="circuit breaker is open") as caught:
        await g.ainvoke({}, thread_id="c")
    assert (caught.value.node, caught.value.retry_after) == ("call", 30.0)
    assert service.calls == 2
    assert (await g.get_state("c")).error_type == "CircuitOpenError"


async def test_after_the_cooldown_a_successful_trial_closes_it_in_that_runs_history(
    store: StateStore,
) -> None:
    g, service, breaker, fake = setup(store)
    for thread in ("a", "b"):
        with pytest.raises(ConnectionError):
            await g.ainvoke({}, thread_id=thread)
    service.up = True
    fake.advance(30)
    assert (await g.ainvoke(None, thread_id="b")).state.out == "ok"
    changes = [
        e.data["state"] for e in (await g.history("b")).events if e.type == "breaker_changed"
    ]
    assert changes == ["open", "half_open", "closed"]
    assert breaker.state == "closed"


async def test_an_open_breaker_is_not_retried() -> None:
    g, service, _, fake = setup(InMemoryStateStore(), retry=RetryPolicy(attempts=5, backoff=1))
    with pytest.raises(CircuitOpenError):
        await g.ainvoke({}, thread_id="a")
    # Two failed attempts opened it, which ended the task: no third attempt, no wait for it.
    assert service.calls == 2
    assert fake.sleeps == [pytest.approx(1.0, rel=0.1)]


async def test_the_failure_that_opens_the_breaker_ends_the_task_without_another_wait() -> None:
    retry = RetryPolicy(attempts=5, backoff=20, jitter=0)
    g, service, breaker, fake = setup(InMemoryStateStore(), retry=retry)
    with pytest.raises(CircuitOpenError) as caught:
        await g.ainvoke({}, thread_id="a")
    assert (service.calls, fake.sleeps) == (2, [20.0])
    assert caught.value.retry_after == breaker.cooldown
    assert isinstance(caught.value.__cause__, ConnectionError)  # the failure that opened it
    kept = ("task_retried", "breaker_changed", "run_failed")
    events = [e for e in (await g.history("a")).events if e.type in kept]
    assert [(e.type, e.data.get("attempt", e.data.get("state"))) for e in events] == [
        ("task_retried", 1),
        ("breaker_changed", "open"),
        ("run_failed", None),
    ]
    assert events[-1].data["error"] == "CircuitOpenError"


async def test_a_breaker_another_run_opened_during_an_attempt_ends_the_task_at_once() -> None:
    breaker = CircuitBreaker(failures=1, cooldown=30)
    fake = FakeTime()

    @node(breaker=breaker, retry=RetryPolicy(attempts=3, backoff=5, jitter=0))
    def call(state: S) -> dict[str, Any]:
        breaker.after_call(fake(), ConnectionError("another run's failure"))
        raise ValueError("this run's failure, which the breaker does not count")

    g = Graph(S, clock=fake, sleep=fake.sleep).flow(START >> call, call >> END)
    with pytest.raises(CircuitOpenError):
        await g.ainvoke({})
    assert fake.sleeps == []


def test_the_debug_stream_shows_it_open_and_close_without_a_store() -> None:
    g, service, _, fake = setup(None)
    with pytest.raises(ConnectionError):
        g.invoke({})
    states = []
    with pytest.raises(ConnectionError):
        for event in g.stream({}, stream_mode="debug"):
            if event.data["type"] == "breaker_changed":
                states.append(event.data["state"])
    service.up = True
    fake.advance(31)
    for event in g.stream({}, stream_mode="debug"):
        if event.mode == "debug" and event.data["type"] == "breaker_changed":
            states.append(event.data["state"])
    assert states == ["open", "half_open", "closed"]


async def test_runs_in_threads_share_one_breaker() -> None:
    g, service, breaker, _ = setup(InMemoryStateStore())
    errors: list[BaseException] = []

    def run(thread: str) -> None:
        try:
            g.invoke({}, thread_id=thread)
        except Exception as error:
            errors.append(error)

    threads = [threading.Thread(target=run, args=(f"t{n}",)) for n in range(6)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    assert breaker.state == "open"
    assert len(errors) == 6
    assert service.calls + sum(isinstance(e, CircuitOpenError) for e in errors) == 6
    assert service.calls >= 2


async def test_a_paused_trial_leaves_the_breaker_half_open_for_the_next_trial() -> None:
    breaker = CircuitBreaker(failures=1, window=60, cooldown=0)
    breaker.after_call(0.0, ValueError())

    @node(breaker=breaker)
    def ask(state: S, ctx: NodeContext) -> dict[str, Any]:
        return {"out": interrupt("go?", id="go")}

    g = Graph(S, state_store=InMemoryStateStore()).flow(START >> ask, ask >> END)
    assert (await g.ainvoke({}, thread_id="t")).status == "interrupted"
    assert breaker.state == "half_open"
    result = await g.ainvoke(None, thread_id="t", resume=Resume("yes"))
    assert result.state.out == "yes"
    assert breaker.state == "closed"


def test_each_graph_using_the_node_shares_its_breaker() -> None:
    g1, _, breaker, fake = setup(None)
    g2 = Graph(S, name="other", clock=fake).flow(START >> g1.nodes["call"], g1.nodes["call"] >> END)
    with pytest.raises(ConnectionError):
        g1.invoke({})
    with pytest.raises(ConnectionError):
        anyio.run(g2.ainvoke, {})
    assert breaker.state == "open"
    with pytest.raises(CircuitOpenError):
        g2.invoke({})
