"""The middleware hooks: order, sync and async, replacement, and errors naming the hook."""

from __future__ import annotations

from typing import Any

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from nodestep import END, START, BaseState, Graph, Middleware, node
from nodestep.middleware import (
    GraphMiddlewareContext,
    MiddlewareError,
    NodeMiddlewareContext,
    Replacement,
    RunOutcome,
)
from nodestep.store import InMemoryStateStore


class Count(BaseState):
    x: int = 0


@node
def inc(state: Count) -> dict[str, int]:
    return {"x": state.x + 1}


@node
def boom(state: Count) -> dict[str, int]:
    raise ValueError("no")


class Log(Middleware):
    def __init__(self, name: str, log: list[str], asynchronous: bool = False) -> None:
        self.name, self.log, self.asynchronous = name, log, asynchronous

    async def before_node(self, ctx: NodeMiddlewareContext) -> None:
        self.log.append(f"{self.name}:before:{ctx.node_name}")

    def after_node(self, ctx: NodeMiddlewareContext) -> None:
        self.log.append(f"{self.name}:after:{ctx.node_name}")

    def before_graph(self, ctx: GraphMiddlewareContext) -> None:
        self.log.append(f"{self.name}:start")

    def on_run_end(self, ctx: GraphMiddlewareContext, outcome: RunOutcome) -> None:
        self.log.append(f"{self.name}:end:{outcome.status}")


def test_before_hooks_run_in_list_order_and_after_hooks_reversed() -> None:
    log: list[str] = []
    graph = Graph(Count, middleware=[Log("a", log), Log("b", log)]).flow(START >> inc, inc >> END)
    assert graph.invoke({"x": 1}).state.x == 2
    assert log == [
        "a:start",
        "b:start",
        "a:before:inc",
        "b:before:inc",
        "b:after:inc",
        "a:after:inc",
        "b:end:completed",
        "a:end:completed",
    ]


@settings(max_examples=25, deadline=None)
@given(st.lists(st.sampled_from("abcdef"), min_size=1, max_size=5))
def test_the_order_invariant_holds_for_any_list_of_middleware(names: list[str]) -> None:
    log: list[str] = []
    graph = Graph(Count, middleware=[Log(n, log) for n in names]).flow(START >> inc, inc >> END)
    graph.invoke({})
    befores = [e.split(":")[0] for e in log if ":before:" in e]
    afters = [e.split(":")[0] for e in log if ":after:" in e]
    ends = [e.split(":")[0] for e in log if ":end:" in e]
    assert befores == names
    assert afters == list(reversed(names))
    assert ends == list(reversed(names))


def test_before_node_replaces_the_input_and_after_node_the_update() -> None:
    class Double(Middleware):
        def before_node(self, ctx: NodeMiddlewareContext) -> Replacement:
            return ctx.replace(ctx.state.model_copy(update={"x": 10}))

        async def after_node(self, ctx: NodeMiddlewareContext) -> Replacement:
            return ctx.replace({"x": ctx.update["x"] * 2})

    graph = Graph(Count, middleware=[Double()]).flow(START >> inc, inc >> END)
    assert graph.invoke({"x": 1}).state.x == 22


def test_on_error_may_replace_a_failure_with_an_update() -> None:
    class Mend(Middleware):
        def on_error(self, ctx: NodeMiddlewareContext, error: Exception) -> Replacement:
            return ctx.replace({"x": -1})

    graph = Graph(Count, middleware=[Mend()]).flow(START >> boom, boom >> END)
    assert graph.invoke({}).state.x == -1


def test_a_misspelled_hook_is_refused_when_the_class_is_defined() -> None:
    with pytest.raises(TypeError, match="after_tools, which is not a hook"):

        class Wrong(Middleware):
            def after_tools(self, ctx: Any) -> None: ...


def test_a_hook_returning_something_unexpected_is_an_error_naming_it() -> None:
    class Odd(Middleware):
        def after_node(self, ctx: NodeMiddlewareContext) -> Any:
            return {"x": 3}

    graph = Graph(Count, middleware=[Odd()]).flow(START >> inc, inc >> END)
    with pytest.raises(MiddlewareError, match="Odd's after_node returned") as caught:
        graph.invoke({})
    assert (caught.value.middleware, caught.value.hook) == ("Odd", "after_node")


def test_an_observer_hook_may_not_return_a_replacement() -> None:
    class Odd(Middleware):
        def before_graph(self, ctx: GraphMiddlewareContext) -> Any:
            return Replacement(1)

    graph = Graph(Count, middleware=[Odd()]).flow(START >> inc, inc >> END)
    with pytest.raises(MiddlewareError, match="it only observes"):
        graph.invoke({})


def test_a_raising_hook_names_the_middleware_and_stores_nothing_of_the_step() -> None:
    class Broken(Middleware):
        def after_node(self, ctx: NodeMiddlewareContext) -> None:
            raise KeyError("lost")

    store = InMemoryStateStore()
    graph = Graph(Count, middleware=[Broken()], state_store=store).flow(START >> inc, inc >> END)
    with pytest.raises(MiddlewareError, match="Broken raised in after_node: KeyError") as caught:
        graph.invoke({"x": 1}, thread_id="t")
    assert isinstance(caught.value.__cause__, KeyError)
    snapshot = graph.get_state_sync("t")
    assert snapshot.value.x == 1  # the node's write never landed
    assert (snapshot.status, snapshot.failed_node) == ("failed", "inc")


def test_on_run_end_reports_a_failed_run() -> None:
    log: list[str] = []
    graph = Graph(Count, middleware=[Log("a", log)]).flow(START >> boom, boom >> END)
    with pytest.raises(ValueError, match="no"):
        graph.invoke({})
    assert log[-1] == "a:end:failed"


def test_a_middleware_list_item_that_is_not_middleware_is_refused() -> None:
    from nodestep import GraphConfigError

    with pytest.raises(GraphConfigError, match="instantiate it"):
        Graph(Count, middleware=[Log])  # type: ignore[list-item]
    with pytest.raises(GraphConfigError, match="wrap it in a list"):
        Graph(Count, middleware=Log("a", []))  # type: ignore[arg-type]


def test_a_sync_node_sees_the_hooks_and_can_still_pause() -> None:
    from nodestep import Command, interrupt

    seen: list[Any] = []

    class Watch(Middleware):
        def on_interrupt(self, ctx: NodeMiddlewareContext, payload: Any) -> None:
            seen.append(payload)

    @node
    def ask(state: Count) -> dict[str, int]:
        return {"x": int(interrupt("how many?", id="count"))}

    graph = Graph(Count, middleware=[Watch()], state_store=InMemoryStateStore()).flow(
        START >> ask, ask >> END
    )
    assert graph.invoke({}, thread_id="p").status == "interrupted"
    assert seen == ["how many?"]
    assert graph.invoke(Command(resume="4"), thread_id="p").state.x == 4


class SyncDouble(Middleware):
    def before_node(self, ctx: NodeMiddlewareContext) -> Replacement:
        return ctx.replace(ctx.state.model_copy(update={"x": ctx.state.x + 100}))

    def after_node(self, ctx: NodeMiddlewareContext) -> Replacement:
        return ctx.replace({"x": ctx.update["x"] * 2})


class AsyncDouble(Middleware):
    async def before_node(self, ctx: NodeMiddlewareContext) -> Replacement:
        return ctx.replace(ctx.state.model_copy(update={"x": ctx.state.x + 100}))

    async def after_node(self, ctx: NodeMiddlewareContext) -> Replacement:
        return ctx.replace({"x": ctx.update["x"] * 2})


@node
async def ainc(state: Count) -> dict[str, int]:
    return {"x": state.x + 1}


@pytest.mark.parametrize("middleware", [SyncDouble, AsyncDouble])
@pytest.mark.parametrize("step", [inc, ainc], ids=["def node", "async node"])
def test_def_and_async_hooks_do_the_same_on_def_and_async_nodes(
    middleware: type[Middleware], step: Any
) -> None:
    graph = Graph(Count, middleware=[middleware()]).flow(START >> step, step >> END)
    assert graph.invoke({"x": 1}).state.x == 204


def test_a_def_hook_that_returns_an_awaitable_is_an_error_saying_to_make_it_async() -> None:
    async def later() -> None: ...

    class Sly(Middleware):
        def before_node(self, ctx: NodeMiddlewareContext) -> Any:
            return later()

    graph = Graph(Count, middleware=[Sly()]).flow(START >> inc, inc >> END)
    with pytest.raises(MiddlewareError, match="make it an async def"):
        graph.invoke({})


def test_hooks_name_the_hooks_a_middleware_defines() -> None:
    assert Log("a", []).hooks() == {"before_node", "after_node", "before_graph", "on_run_end"}
    assert Middleware().hooks() == frozenset()


def test_a_stream_runs_the_hooks_and_on_run_end_sees_a_pause() -> None:
    from nodestep import interrupt

    outcomes: list[RunOutcome] = []

    class Watch(Middleware):
        def on_run_end(self, ctx: GraphMiddlewareContext, outcome: RunOutcome) -> None:
            outcomes.append(outcome)

    @node
    def ask(state: Count) -> dict[str, int]:
        return {"x": int(interrupt("how many?", id="count"))}

    graph = Graph(Count, middleware=[Watch()], state_store=InMemoryStateStore()).flow(
        START >> ask, ask >> END
    )
    events = list(graph.stream({}, thread_id="s", stream_mode="updates"))
    assert events[-1].mode == "interrupt"
    assert outcomes[0].status == "paused"
    assert [i.payload for i in outcomes[0].interrupts.values()] == ["how many?"]


def test_a_subgraph_runs_its_own_middleware_and_not_its_parents() -> None:
    log: list[str] = []
    child = Graph(Count, name="child", middleware=[Log("child", log)]).flow(
        START >> inc, inc >> END
    )
    parent = Graph(Count, name="parent", middleware=[Log("parent", log)]).flow(
        START >> child, child >> END
    )
    assert parent.invoke({"x": 1}).state.x == 2
    assert log == [
        "parent:start",
        "child:start",
        "child:before:inc",
        "child:after:inc",
        "child:end:completed",
        "parent:end:completed",
    ]


def test_before_node_replacing_the_state_with_a_dict_is_an_error_naming_the_fix() -> None:
    class Wrong(Middleware):
        def before_node(self, ctx: NodeMiddlewareContext) -> Replacement:
            return ctx.replace({"x": 5})

    graph = Graph(Count, middleware=[Wrong()]).flow(START >> inc, inc >> END)
    with pytest.raises(
        MiddlewareError, match=r"with another Count, such as ctx\.replace"
    ) as caught:
        graph.invoke({})
    assert (caught.value.middleware, caught.value.hook) == ("Wrong", "before_node")


class Three(BaseState):
    a: int = 0
    b: int = 0
    c: int = 0


def test_a_hook_failing_in_a_parallel_step_commits_nothing_and_the_thread_continues(
    tmp_path: Any,
) -> None:
    from nodestep.store import SQLiteStateStore

    ran: list[str] = []

    @node
    def a(state: Three) -> dict[str, int]:
        return {"a": 1}

    @node
    def b(state: Three) -> dict[str, int]:
        ran.append("b")
        return {"b": 1}

    @node
    def c(state: Three) -> dict[str, int]:
        ran.append("c")
        return {"c": 1}

    class Flaky(Middleware):
        broken = True

        def after_node(self, ctx: NodeMiddlewareContext) -> None:
            if ctx.node_name == "c" and self.broken:
                raise RuntimeError("the audit log is down")

    flaky = Flaky()
    store = SQLiteStateStore(tmp_path / "threads.db")
    graph = Graph(Three, state_store=store, middleware=[flaky]).flow(
        START >> a, a >> [b, c], [b, c] >> END
    )
    with pytest.raises(MiddlewareError, match="Flaky raised in after_node"):
        graph.invoke({}, thread_id="t")
    snapshot = graph.get_state_sync("t")
    assert (snapshot.value.b, snapshot.value.c) == (0, 0)  # the step was not merged
    assert (snapshot.status, snapshot.next) == ("failed", ("c",))
    flaky.broken = False
    assert graph.invoke(None, thread_id="t").state == Three(a=1, b=1, c=1)
    assert sorted(ran) == ["b", "c", "c"]  # b's finished task was kept, not run again
