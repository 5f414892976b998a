"""Sync and async both whole: every way to run a graph and read its threads works from plain
code, from inside a running event loop (asyncio or trio, as in a notebook cell), and from a
node that runs another graph."""

from __future__ import annotations

import asyncio
import contextvars
from typing import Annotated, Any

import anyio
import pytest
from pydantic import Field

from nodestep import END, START, BaseState, Graph, InMemoryStateStore, NodeContext, add, node
from nodestep.store import StateStore


class Log(BaseState):
    log: Annotated[list[str], add] = Field(default_factory=list)
    n: int = 0


@node
def first(state: Log) -> dict:
    return {"log": ["first"], "n": state.n + 1}


@node
def second(state: Log, ctx: NodeContext) -> dict:
    ctx.emit(f"second sees {state.n}")
    return {"log": ["second"], "n": state.n + 1}


def two_steps(store: StateStore | None = None) -> Graph[Log]:
    return Graph(Log, state_store=store).flow(START >> first, first >> second, second >> END)


def event_view(events: list[Any]) -> list[tuple[Any, ...]]:
    return [(e.mode, e.node, e.step, e.data if e.mode != "final" else e.data.state) for e in events]


# -- invoke and stream inside a running loop --------------------------------------------------


@pytest.mark.anyio
async def test_invoke_inside_a_running_loop_gives_what_ainvoke_gives() -> None:
    graph = two_steps()
    inside = graph.invoke({"n": 1})
    awaited = await graph.ainvoke({"n": 1})
    assert inside.status == awaited.status == "completed"
    assert inside.state == awaited.state == Log(log=["first", "second"], n=3)
    assert inside.step == awaited.step == 1


@pytest.mark.anyio
async def test_stream_inside_a_running_loop_gives_the_events_of_astream() -> None:
    graph = two_steps()
    modes = ["updates", "custom", "values"]
    inside = list(graph.stream({}, stream_mode=modes))
    awaited = [e async for e in graph.astream({}, stream_mode=modes)]
    assert event_view(inside) == event_view(awaited)
    assert [e.mode for e in inside] == [
        "updates",
        "values",
        "custom",
        "updates",
        "values",
        "final",
    ]


def test_invoke_and_stream_from_plain_code_give_the_same_as_inside_a_loop() -> None:
    graph = two_steps()
    plain = graph.invoke({"n": 5}).state
    streamed = event_view(list(graph.stream({"n": 5}, stream_mode="updates")))

    async def inside() -> tuple[Any, Any]:
        return graph.invoke({"n": 5}).state, event_view(
            list(graph.stream({"n": 5}, stream_mode="updates"))
        )

    assert asyncio.run(inside()) == (plain, streamed)


@pytest.mark.anyio
async def test_a_stream_closed_inside_a_running_loop_stops_its_run() -> None:
    store = InMemoryStateStore()
    graph = two_steps(store)
    events = graph.stream({}, stream_mode="updates", thread_id="t")
    assert next(events).node == "first"
    events.close()
    history = await graph.history("t")
    assert history.events[-1].type == "run_stopped"
    assert history.events[-1].data["reason"] == "stream_closed"
    assert (await graph.ainvoke(None, thread_id="t")).state.log == ["first", "second"]


# -- the thread methods' sync forms ----------------------------------------------------------


async def _async_answers(graph: Graph[Log], event_id: str) -> list[Any]:
    return [
        await graph.exists("t"),
        (await graph.history("t")).events[-1].type,
        await graph.load("t"),
        await graph.load("t", at=event_id),
        (await graph.get_state("t")).value,
        await graph.branches("t"),
    ]


def _sync_answers(graph: Graph[Log], event_id: str) -> list[Any]:
    return [
        graph.exists_sync("t"),
        graph.history_sync("t").events[-1].type,
        graph.load_sync("t"),
        graph.load_sync("t", at=event_id),
        graph.get_state_sync("t").value,
        graph.branches_sync("t"),
    ]


def test_sync_thread_methods_answer_as_the_async_ones_in_plain_code() -> None:
    graph = two_steps(InMemoryStateStore())
    result = graph.invoke({"n": 1}, thread_id="t")
    assert result.checkpoint_id is not None
    expected = asyncio.run(_async_answers(graph, result.checkpoint_id))
    assert _sync_answers(graph, result.checkpoint_id) == expected
    assert expected[0] is True and expected[2] == {"log": ["first", "second"], "n": 3}


@pytest.mark.anyio
async def test_sync_thread_methods_work_inside_a_running_loop() -> None:
    graph = two_steps(InMemoryStateStore())
    result = await graph.ainvoke({"n": 1}, thread_id="t")
    assert result.checkpoint_id is not None
    expected = await _async_answers(graph, result.checkpoint_id)
    assert _sync_answers(graph, result.checkpoint_id) == expected


@pytest.mark.anyio
async def test_sync_edits_and_forks_inside_a_running_loop_are_stored() -> None:
    graph = two_steps(InMemoryStateStore())
    result = await graph.ainvoke({}, thread_id="t")
    assert result.checkpoint_id is not None
    event_id = graph.update_state_sync("t", {"log": ["edited"]})
    assert (await graph.load("t"))["log"] == ["first", "second", "edited"]
    assert (await graph.history("t")).events[-1].id == event_id
    branch = graph.fork_sync("t", from_=result.checkpoint_id, name="again")
    assert branch.id == "again"
    assert await graph.load("t", branch_id="again") == {"log": ["first", "second"], "n": 2}


# -- graphs that run graphs ------------------------------------------------------------------


INNER = two_steps()


@node
def calls_inner_sync(state: Log) -> dict:
    # A lone plain def node runs inline on the event loop's thread: invoke() must still work.
    return {"log": INNER.invoke({}).state.log, "n": state.n + 1}


@node
async def calls_inner_async(state: Log) -> dict:
    inner = INNER.invoke({})  # blocks this loop; works, as in a notebook cell
    awaited = await INNER.ainvoke({})
    return {"log": [*inner.state.log, *awaited.state.log]}


@pytest.mark.parametrize("caller", [calls_inner_sync, calls_inner_async], ids=["def", "async"])
def test_a_node_may_invoke_another_graph(caller: Any) -> None:
    outer = Graph(Log).flow(START >> caller, caller >> END)
    result = outer.invoke({})
    assert result.state.log[:2] == ["first", "second"]
    assert len(result.state.log) in (2, 4)


# -- context variables -----------------------------------------------------------------------

request_id: contextvars.ContextVar[str] = contextvars.ContextVar("request_id", default="none")


@node
async def reads_context_variable(state: Log) -> dict:
    return {"log": [request_id.get()]}


@pytest.mark.anyio
async def test_context_variables_of_the_caller_reach_nodes_in_every_way_to_run() -> None:
    graph = Graph(Log).flow(START >> reads_context_variable, reads_context_variable >> END)
    token = request_id.set("req-7")
    try:
        awaited = (await graph.ainvoke({})).state.log
        inside = graph.invoke({}).state.log
        streamed = [e async for e in graph.astream({}, stream_mode="values")][-1].data.state.log
        synced = list(graph.stream({}, stream_mode=[]))[-1].data.state.log
    finally:
        request_id.reset(token)
    assert awaited == inside == streamed == synced == ["req-7"]


def test_a_sync_call_from_a_worker_thread_uses_that_threads_own_loop() -> None:
    graph = two_steps()
    results: list[Any] = []

    def work() -> None:
        results.append(graph.invoke({"n": 10}).state.n)

    async def main() -> None:
        await anyio.to_thread.run_sync(work)
        await anyio.to_thread.run_sync(work)

    anyio.run(main)
    assert results == [12, 12]
