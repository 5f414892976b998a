"""Retry policies in runs: attempts recorded, waits through the graph's sleep, no double writes."""

from __future__ import annotations

from typing import Annotated, Any

import anyio
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from pydantic import BaseModel, Field

from nodestep import (
    END,
    START,
    BaseState,
    Command,
    Graph,
    GraphConfigError,
    GraphTimeoutError,
    InMemoryStateStore,
    NodeContext,
    NodeTimeoutError,
    Resume,
    RetryPolicy,
    Send,
    add,
    interrupt,
    node,
)
from nodestep.store import StateStore
from nodestep.testing import FakeTime, sequential_ids

pytestmark = pytest.mark.anyio


class S(BaseState):
    log: Annotated[list[str], add] = Field(default_factory=list)
    out: str = ""


def graph(first: Any, store: StateStore | None = None, **settings: Any) -> Graph[S]:
    fake = settings.pop("fake", None) or FakeTime()
    settings.setdefault("sleep", fake.sleep)
    return Graph(S, state_store=store, clock=fake, **settings).flow(START >> first, first >> END)


def failing_until(good: int, *, error: type[Exception] = ConnectionError, **options: Any) -> Any:
    """A node whose attempts before ``good`` raise ``error``; it logs every attempt."""
    options.setdefault("retry", RetryPolicy(attempts=5, backoff=1.0, jitter=0))

    @node(name="call", **options)
    def call(state: S, ctx: NodeContext) -> dict[str, Any]:
        if ctx.attempt < good:
            raise error(f"attempt {ctx.attempt} failed")
        return {"log": [f"attempt {ctx.attempt}"], "out": "done"}

    return call


async def kinds(g: Graph[S], thread: str) -> list[str]:
    return [e.type for e in (await g.history(thread)).events]


async def test_a_failing_task_runs_again_until_it_succeeds_and_each_retry_is_recorded(
    store: StateStore,
) -> None:
    fake = FakeTime()
    g = graph(failing_until(3), store, fake=fake)
    result = await g.ainvoke({}, thread_id="t")
    assert result.state.log == ["attempt 3"]
    assert fake.sleeps == [1.0, 2.0]
    events = (await g.history("t")).events
    retried = [e.data for e in events if e.type == "task_retried"]
    assert [(r["attempt"], r["error"], r["message"], r["delay"]) for r in retried] == [
        (1, "ConnectionError", "attempt 1 failed", 1.0),
        (2, "ConnectionError", "attempt 2 failed", 2.0),
    ]
    assert await kinds(g, "t") == [
        "checkpoint",
        "run_started",
        "task_retried",
        "task_retried",
        "superstep_completed",
        "run_completed",
    ]


async def test_after_the_last_attempt_the_task_fails_as_without_a_policy(
    store: StateStore,
) -> None:
    g = graph(failing_until(99, retry=RetryPolicy(attempts=3, backoff=0)), store)
    with pytest.raises(ConnectionError, match="attempt 3 failed"):
        await g.ainvoke({}, thread_id="t")
    assert (await kinds(g, "t"))[-3:] == ["task_retried", "task_retried", "run_failed"]
    snapshot = await g.get_state("t")
    assert (snapshot.status, snapshot.error_message) == ("failed", "attempt 3 failed")


async def test_a_continuation_after_the_last_attempt_starts_a_new_count() -> None:
    calls: list[int] = []

    @node(retry=RetryPolicy(attempts=2, backoff=0))
    def call(state: S, ctx: NodeContext) -> dict[str, Any]:
        calls.append(ctx.attempt)
        if len(calls) < 4:
            raise ConnectionError("down")
        return {"out": "done"}

    g = graph(call, InMemoryStateStore())
    with pytest.raises(ConnectionError):
        await g.ainvoke({}, thread_id="t")
    assert (await g.ainvoke(None, thread_id="t")).state.out == "done"
    assert calls == [1, 2, 1, 2]


async def test_an_error_the_policy_does_not_name_fails_at_once() -> None:
    policy = RetryPolicy(attempts=5, retry_on=ConnectionError)
    g = graph(failing_until(3, error=KeyError, retry=policy), InMemoryStateStore())
    with pytest.raises(KeyError):
        await g.ainvoke({}, thread_id="t")
    assert "task_retried" not in await kinds(g, "t")


async def test_a_retry_starts_from_the_state_the_task_first_read() -> None:
    # The first attempt changes the state in place, then fails: the retry must not see
    # that change, and the run must store the second attempt's writes only.
    @node(retry=RetryPolicy(attempts=2, backoff=0))
    def call(state: S, ctx: NodeContext) -> S:
        state.log.append(f"attempt {ctx.attempt} saw {len(state.log)}")
        if ctx.attempt == 1:
            raise ConnectionError("down")
        return state

    g = graph(call, InMemoryStateStore())
    result = await g.ainvoke({"log": ["input"]}, thread_id="t")
    assert result.state.log == ["input", "attempt 2 saw 1"]
    assert await g.load("t") == {"log": ["input", "attempt 2 saw 1"], "out": ""}


class Memory(BaseModel):
    seen: list[int] = []


async def test_a_failed_attempt_leaves_the_private_state_as_it_was() -> None:
    @node(retry=RetryPolicy(attempts=2, backoff=0), private_state=Memory)
    def call(state: S, ctx: NodeContext, *, memory: Memory) -> dict[str, Any]:
        memory.seen.append(ctx.attempt)
        if ctx.attempt == 1:
            raise ConnectionError("down")
        return {}

    g = graph(call, InMemoryStateStore())
    await g.ainvoke({}, thread_id="t")
    assert await g.node_state("t", call) == Memory(seen=[2])


async def test_no_attempt_starts_after_the_deadline() -> None:
    fake = FakeTime()
    policy = RetryPolicy(attempts=10, backoff=1.0, multiplier=1.0, jitter=0, deadline=2.5)
    g = graph(failing_until(99, retry=policy), InMemoryStateStore(), fake=fake)
    with pytest.raises(ConnectionError, match="attempt 3 failed"):
        await g.ainvoke({}, thread_id="t")
    assert fake.sleeps == [1.0, 1.0]


async def test_a_wait_that_ends_exactly_at_the_deadline_is_waited() -> None:
    fake = FakeTime()
    policy = RetryPolicy(attempts=5, backoff=0.5, jitter=0, deadline=0.5)
    g = graph(failing_until(99, retry=policy), InMemoryStateStore(), fake=fake)
    with pytest.raises(ConnectionError, match="attempt 2 failed"):
        await g.ainvoke({}, thread_id="t")
    assert fake.sleeps == [0.5]


@settings(max_examples=60, deadline=None)
@given(
    backoff=st.floats(0.01, 5.0),
    multiplier=st.floats(1.0, 3.0),
    waits=st.integers(0, 4),
    start=st.floats(0.0, 2e9),
)
def test_every_wait_that_ends_by_the_deadline_is_waited_and_no_later_one(
    backoff: float, multiplier: float, waits: int, start: float
) -> None:
    policy = RetryPolicy(attempts=6, backoff=backoff, multiplier=multiplier, jitter=0)
    delays = [policy.delay(n, "") for n in range(1, 6)]
    deadline = sum(delays[:waits]) if waits else backoff / 2
    bounded = RetryPolicy(
        attempts=6, backoff=backoff, multiplier=multiplier, jitter=0, deadline=deadline
    )
    fake = FakeTime(start=start)
    g = graph(failing_until(99, retry=bounded), InMemoryStateStore(), fake=fake)
    with pytest.raises(ConnectionError, match=f"attempt {waits + 1} failed"):
        g.invoke({}, thread_id="t")
    assert fake.sleeps == delays[:waits]


async def test_each_attempt_gets_the_node_timeout_afresh_and_a_timeout_is_retried() -> None:
    @node(retry=RetryPolicy(attempts=2, backoff=0), timeout=0.05)
    async def call(state: S, ctx: NodeContext) -> dict[str, Any]:
        if ctx.attempt == 1:
            await anyio.sleep_forever()
        return {"out": "second"}

    g = graph(call, InMemoryStateStore())
    assert (await g.ainvoke({}, thread_id="t")).state.out == "second"
    events = (await g.history("t")).events
    assert [e.data["error"] for e in events if e.type == "task_retried"] == ["NodeTimeoutError"]


async def test_a_plain_def_node_timeout_is_retried_too() -> None:
    @node(retry=RetryPolicy(attempts=2, backoff=0, retry_on=NodeTimeoutError), timeout=1e-9)
    def call(state: S, ctx: NodeContext) -> dict[str, Any]:
        return {"out": "late"}

    g = graph(call, InMemoryStateStore())
    with pytest.raises(NodeTimeoutError):
        await g.ainvoke({}, thread_id="t")
    assert (await kinds(g, "t")).count("task_retried") == 1


async def test_an_interrupt_is_not_a_failure_and_is_not_retried() -> None:
    attempts: list[int] = []

    @node(retry=RetryPolicy(attempts=3, backoff=0))
    def ask(state: S, ctx: NodeContext) -> dict[str, Any]:
        attempts.append(ctx.attempt)
        return {"out": interrupt("approve?", id="approve")}

    g = graph(ask, InMemoryStateStore())
    paused = await g.ainvoke({}, thread_id="t")
    assert paused.status == "interrupted"
    result = await g.ainvoke(None, thread_id="t", resume=Resume("yes"))
    assert result.state.out == "yes"
    assert attempts == [1, 1]
    assert "task_retried" not in await kinds(g, "t")


async def test_the_graph_timeout_reaches_a_task_while_it_waits() -> None:
    g = graph(
        failing_until(99, retry=RetryPolicy(attempts=3, backoff=5.0)),
        InMemoryStateStore(),
        sleep=lambda seconds: anyio.sleep_forever(),
        timeout=0.05,
    )
    with pytest.raises(GraphTimeoutError):
        await g.ainvoke({}, thread_id="t")
    assert (await kinds(g, "t"))[-2:] == ["task_retried", "run_failed"]


@pytest.mark.parametrize("sync", [True, False], ids=["def", "async def"])
async def test_retried_sends_each_keep_their_own_attempts(sync: bool) -> None:
    # Plain def tasks of a fan-out run each attempt in a worker thread.
    def body(state: S, ctx: NodeContext) -> dict[str, Any]:
        if ctx.task_id == "work[1]" and ctx.attempt == 1:
            raise ConnectionError("once")
        return {"log": [f"{ctx.task_id}@{ctx.attempt}"]}

    async def async_body(state: S, ctx: NodeContext) -> dict[str, Any]:
        return body(state, ctx)

    work = node(body if sync else async_body, name="work", retry=RetryPolicy(backoff=0))

    @node(goto=[work])
    def fan(state: S) -> Command:
        return Command(goto=[Send(work, {}), Send(work, {})])

    g = Graph(S, state_store=InMemoryStateStore(), sleep=FakeTime().sleep)
    g.flow(START >> fan, work >> END)
    result = await g.ainvoke({}, thread_id="t")
    assert result.state.log == ["work@1", "work[1]@2"]
    events = (await g.history("t")).events
    assert [e.data.get("task") for e in events if e.type == "task_retried"] == ["work[1]"]


def test_the_same_ids_give_the_same_history_waits_included() -> None:
    def run() -> list[dict[str, Any]]:
        g = graph(
            failing_until(3, retry=RetryPolicy(attempts=3, backoff=1.0, jitter=0.5)),
            InMemoryStateStore(),
            id_factory=sequential_ids(),
        )
        g.invoke({}, thread_id="t")
        events = anyio.run(g.history, "t").events
        return [e.data for e in events]

    assert run() == run()


def test_the_debug_stream_shows_each_retry() -> None:
    g = graph(failing_until(2), None)
    events = list(g.stream({}, stream_mode="debug"))
    retried = [e for e in events if e.mode == "debug" and e.data["type"] == "task_retried"]
    assert len(retried) == 1
    assert retried[0].node == "call"
    assert retried[0].data["attempt"] == 1


def test_a_failed_attempt_message_is_stored_with_the_graph_redact() -> None:
    g = graph(failing_until(2), InMemoryStateStore(), redact=lambda m: m.replace("attempt", "#"))
    g.invoke({}, thread_id="t")
    events = anyio.run(g.history, "t").events
    assert [e.data["message"] for e in events if e.type == "task_retried"] == ["# 1 failed"]


def test_a_retry_on_function_that_raises_fails_the_task_with_its_error() -> None:
    def broken(error: BaseException) -> bool:
        raise LookupError("the predicate broke")

    g = graph(failing_until(3, retry=RetryPolicy(retry_on=broken)), InMemoryStateStore())
    with pytest.raises(LookupError, match="the predicate broke"):
        g.invoke({}, thread_id="t")
    assert anyio.run(g.get_state, "t").error_type == "LookupError"


def test_a_sleep_that_is_not_async_fails_the_task() -> None:
    g = graph(failing_until(3), InMemoryStateStore(), sleep=lambda seconds: None)
    with pytest.raises(TypeError):
        g.invoke({}, thread_id="t")


def test_state_history_names_the_node_of_each_retry() -> None:
    g = graph(failing_until(2), InMemoryStateStore())
    g.invoke({}, thread_id="t")
    steps = [(s.event.type, s.nodes) for s in anyio.run(g.state_history, "t")]
    assert ("task_retried", ("call",)) in steps


def test_a_graph_sleep_that_is_not_a_function_is_refused() -> None:
    with pytest.raises(GraphConfigError, match="sleep must be an async function"):
        Graph(S, sleep=0.5)  # type: ignore[arg-type]


@pytest.mark.slow
@settings(max_examples=40, deadline=None)
@given(attempts=st.integers(1, 5), failures=st.integers(0, 6), sync=st.booleans())
def test_a_task_runs_until_it_succeeds_or_its_attempts_run_out(
    attempts: int, failures: int, sync: bool
) -> None:
    runs: list[int] = []
    policy = RetryPolicy(attempts=attempts, backoff=1.0, multiplier=2.0, jitter=0)

    def body(state: S, ctx: NodeContext) -> dict[str, Any]:
        runs.append(ctx.attempt)
        if len(runs) <= failures:
            raise ConnectionError(f"failure {len(runs)}")
        return {"log": [f"ok on {ctx.attempt}"]}

    async def async_body(state: S, ctx: NodeContext) -> dict[str, Any]:
        return body(state, ctx)

    call = node(body if sync else async_body, name="call", retry=policy)
    fake = FakeTime()
    g = graph(call, InMemoryStateStore(), fake=fake)
    succeeds = failures < attempts
    if succeeds:
        assert g.invoke({}, thread_id="t").state.log == [f"ok on {failures + 1}"]
    else:
        with pytest.raises(ConnectionError, match=f"failure {attempts}"):
            g.invoke({}, thread_id="t")
    ran = min(failures + 1, attempts)
    assert runs == list(range(1, ran + 1))
    assert fake.sleeps == [2.0 ** (n - 1) for n in range(1, ran)]
    events = anyio.run(g.history, "t").events
    assert [e.data["attempt"] for e in events if e.type == "task_retried"] == list(range(1, ran))
    assert (events[-1].type == "run_completed") is succeeds
