"""Error routes: a node's failure taken by an ``$is_error`` edge instead of failing the run."""

from __future__ import annotations

import time
from typing import Annotated, Any

import anyio
import pytest
from pydantic import BaseModel, Field, SecretStr

from nodestep import (
    END,
    START,
    BaseState,
    Command,
    ContextNotProvidedError,
    Graph,
    GraphExecutionError,
    InMemoryStateStore,
    NodeTimeoutError,
    add,
    failed,
    node,
    when,
)
from nodestep.testing import sequential_ids


class Job(BaseState):
    mode: str = ""
    status: str = ""
    log: Annotated[list[str], add] = Field(default_factory=list)


class Unauthorized(Exception):
    pass


@node
def call(job: Job) -> dict[str, Any]:
    if job.mode == "timeout":
        raise TimeoutError("backend slow for account 7")
    if job.mode == "auth":
        raise Unauthorized("bad token")
    if job.mode == "boom":
        raise ValueError("boom")
    return {"status": "complete", "log": ["called"]}


@node
def fallback(job: Job) -> dict[str, Any]:
    return {"status": "fallback", "log": ["fallback"]}


@node
def done(job: Job) -> dict[str, Any]:
    return {"log": ["done"]}


def graph(route: Any, **options: Any) -> Graph[Job]:
    """``call`` with ``route`` after it; the targets among fallback and done end the run."""
    targets = route.targets() if hasattr(route, "targets") else [route]
    ends = [n >> END for n in (fallback, done) if n in targets]
    return Graph(Job, id_factory=sequential_ids(), **options).flow(
        START >> call, call >> route, *ends
    )


ROUTE = when(
    "$is_error('TimeoutError', 'Unauthorized')",
    fallback,
    otherwise=when("status == 'complete'", done, otherwise=END),
)


@pytest.mark.parametrize("mode", ["timeout", "auth"])
def test_a_failure_matching_an_error_route_runs_its_target(mode: str) -> None:
    result = graph(ROUTE).invoke({"mode": mode})
    assert result.status == "completed"
    assert result.state.log == ["fallback"]


def test_success_never_takes_an_error_route() -> None:
    assert graph(ROUTE).invoke({"mode": "ok"}).state.log == ["called", "done"]


def test_a_failure_no_error_route_matches_fails_the_run_as_before() -> None:
    with pytest.raises(ValueError, match="boom"):
        graph(ROUTE).invoke({"mode": "boom"})


def test_a_plain_condition_that_holds_does_not_take_a_failure() -> None:
    # status is already 'complete' in the state the failing node read; only $is_error
    # conditions are asked about a failure, so the run still fails.
    route = when("status == 'complete'", done, otherwise=END)
    with pytest.raises(ValueError, match="boom"):
        graph(route).invoke({"mode": "boom", "status": "complete"})


def test_the_routed_failure_is_recorded_in_history_redacted_like_a_stored_error() -> None:
    store = InMemoryStateStore()
    g = graph(ROUTE, state_store=store)
    g.invoke({"mode": "timeout"}, thread_id="t", context={"api_key": SecretStr("account 7")})
    step = next(e for e in g.history_sync("t").events if e.type == "superstep_completed")
    task = step.data["tasks"]["call"]
    assert task["failed"]["error"] == "TimeoutError"
    assert "account 7" not in task["failed"]["message"]
    assert task["routes"] == ["fallback"]
    assert task["update"] == {}


def test_a_thread_with_a_routed_failure_loads_back_and_continues() -> None:
    store = InMemoryStateStore()
    g = graph(ROUTE, state_store=store)
    g.invoke({"mode": "auth"}, thread_id="t")
    again = graph(ROUTE, state_store=store)
    assert again.get_state_sync("t").value.log == ["fallback"]
    assert again.invoke({"mode": "ok"}, thread_id="t").state.log == ["fallback", "called", "done"]


def test_failed_with_classes_routes_the_engines_own_timeout() -> None:
    @node(timeout=0.05, name="call")
    async def slow(job: Job) -> dict[str, Any]:
        await anyio.sleep(5)  # real time: what the node's timeout of 0.05 s must cut short
        return {}

    g = Graph(Job).flow(
        START >> slow,
        slow >> when(failed(NodeTimeoutError), fallback, otherwise=END),
        fallback >> END,
    )
    started = time.monotonic()
    assert g.invoke({}).state.log == ["fallback"]
    assert time.monotonic() - started < 5


def test_a_plain_def_node_in_a_worker_thread_is_routed_too() -> None:
    @node(timeout=30, name="call")
    def threaded(job: Job) -> dict[str, Any]:
        raise Unauthorized("in a thread")

    g = Graph(Job).flow(
        START >> threaded, threaded >> when(failed(), fallback, otherwise=END), fallback >> END
    )
    assert g.invoke({}).state.log == ["fallback"]


def test_an_error_route_in_a_superstep_of_several_tasks_records_the_task() -> None:
    @node(goto=[call, "other"])
    def fan(job: Job) -> Command:
        return Command(goto=[call, other])

    @node
    def other(job: Job) -> dict[str, Any]:
        return {"log": ["other"]}

    store = InMemoryStateStore()
    g = Graph(Job, state_store=store, id_factory=sequential_ids()).flow(
        START >> fan,
        call >> ROUTE,
        other >> END,
        fallback >> END,
        done >> END,
    )
    assert sorted(g.invoke({"mode": "timeout"}, thread_id="t").state.log) == ["fallback", "other"]
    events = g.history_sync("t").events
    recorded = [e.data for e in events if e.type == "task_finished" and "failed" in e.data]
    assert [(d["node"], d["failed"]["error"], d["goto"]) for d in recorded] == [
        ("call", "TimeoutError", ["fallback"])
    ]


def test_an_error_route_condition_that_cannot_be_evaluated_fails_the_run_with_both_errors() -> None:
    route = when("$is_error() and context.retry == true", fallback, otherwise=END)
    with pytest.raises(ContextNotProvidedError) as caught:
        graph(route).invoke({"mode": "boom"})
    assert isinstance(caught.value.__context__, ValueError)


def test_conditions_read_the_runs_context_and_the_nodes_output() -> None:
    class Caller(BaseModel):
        tier: str = "free"

    route = when(
        "tier == 'gold' and output.status == 'complete'", done, otherwise=END, context=Caller
    )
    assert graph(route).invoke({}, context=Caller(tier="gold")).state.log == ["called", "done"]
    assert graph(route).invoke({}, context=Caller()).state.log == ["called"]


def test_a_condition_that_does_not_fit_the_state_fails_when_the_flow_compiles() -> None:
    from nodestep import ConditionError

    with pytest.raises(ConditionError, match="unknown name 'stats'"):
        graph(when("stats == 'x'", done, otherwise=END))


def test_several_bad_conditions_are_reported_together() -> None:
    from nodestep import GraphConfigError

    route = when("stats == 'x'", done, otherwise=when("status < 1", fallback, otherwise=END))
    with pytest.raises(GraphConfigError) as caught:
        graph(route)
    assert len(caught.value.problems) == 2


def test_a_runtime_evaluation_problem_fails_the_run_naming_the_condition() -> None:
    route = when("context.n < 3", done, otherwise=END)
    with pytest.raises(GraphExecutionError, match="could not be evaluated"):
        graph(route).invoke({}, context={"n": "many"})
