"""The run hooks at a run's end (``after_graph``, ``on_run_end``) run before ``run_completed``
is stored: one that raises fails the run, and the history says so."""

from __future__ import annotations

from typing import Any

import pytest

from nodestep import END, START, BaseState, Graph, InMemoryStateStore, Middleware, node
from nodestep.middleware import GraphMiddlewareContext, MiddlewareError, RunOutcome
from nodestep.testing import sequential_ids


class Count(BaseState):
    n: int = 0


@node
def bump(state: Count) -> dict[str, Any]:
    return {"n": state.n + 1}


class Broken(Middleware):
    """Raises in ``hook`` the first ``times`` calls; logs every ``on_run_end``."""

    def __init__(self, hook: str, times: int = 1) -> None:
        self.hook, self.times = hook, times
        self.ends: list[str] = []

    def _maybe_raise(self, hook: str) -> None:
        if self.hook == hook and self.times:
            self.times -= 1
            raise ConnectionError("the audit log is down")

    def after_graph(self, ctx: GraphMiddlewareContext) -> None:
        self._maybe_raise("after_graph")

    def on_run_end(self, ctx: GraphMiddlewareContext, outcome: RunOutcome) -> None:
        self.ends.append(outcome.status)
        self._maybe_raise("on_run_end")


def counting(middleware: Middleware) -> Graph[Count]:
    graph = Graph(
        Count,
        state_store=InMemoryStateStore(),
        middleware=[middleware],
        id_factory=sequential_ids(),
    )
    return graph.flow(START >> bump, bump >> END)


@pytest.mark.parametrize("hook", ["after_graph", "on_run_end"])
def test_an_end_hook_that_raises_stores_the_run_as_failed(hook: str) -> None:
    audit = Broken(hook)
    graph = counting(audit)
    with pytest.raises(MiddlewareError, match=f"Broken raised in {hook}") as raised:
        graph.invoke({"n": 1}, thread_id="t")
    assert isinstance(raised.value.__cause__, ConnectionError)
    snapshot = graph.get_state_sync("t")
    assert (snapshot.value.n, snapshot.status) == (2, "failed")
    events = graph.history_sync("t").events
    assert [e.type for e in events][-2:] == ["superstep_completed", "run_failed"]
    failed = events[-1].data
    assert failed["error"] == "MiddlewareError"
    assert failed["message"] == (
        f"Middleware Broken raised in {hook}: ConnectionError: the audit log is down"
    )
    # on_run_end is called once: told of the failure when after_graph raised
    assert audit.ends == (["failed"] if hook == "after_graph" else ["completed"])


@pytest.mark.parametrize("hook", ["after_graph", "on_run_end"])
def test_a_run_failed_at_its_end_is_ended_again_by_a_continuation(hook: str) -> None:
    audit = Broken(hook)
    graph = counting(audit)
    with pytest.raises(MiddlewareError):
        graph.invoke({"n": 1}, thread_id="t")
    result = graph.invoke(None, thread_id="t")
    assert result.state.n == 2  # nothing runs again
    assert graph.get_state_sync("t").status == "idle"
    assert [e.type for e in graph.history_sync("t").events][-2:] == [
        "run_started",
        "run_completed",
    ]
    assert audit.ends[-1] == "completed"


def test_an_end_hook_that_raises_without_a_store_fails_the_call() -> None:
    graph = Graph(Count, middleware=[Broken("after_graph")]).flow(START >> bump, bump >> END)
    with pytest.raises(MiddlewareError, match="Broken raised in after_graph"):
        graph.invoke({"n": 1})


def test_a_subgraph_end_hook_that_raises_fails_the_parent_task() -> None:
    inner = Graph(Count, middleware=[Broken("after_graph")], name="inner")
    inner.flow(START >> bump, bump >> END)
    outer = Graph(Count, state_store=InMemoryStateStore(), id_factory=sequential_ids())
    outer.flow(START >> inner, inner >> END)
    with pytest.raises(MiddlewareError, match="Broken raised in after_graph"):
        outer.invoke({"n": 1}, thread_id="t")
    assert outer.get_state_sync("t").status == "failed"
    assert outer.invoke(None, thread_id="t").state.n == 2
