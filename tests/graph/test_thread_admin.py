"""``Graph.list_threads``, ``delete_thread`` and ``prune``, on every built-in store.

The store-level rules are the conformance suite's; these tests are about what a graph
adds: its store (or ``state_store=``), its cached states, runs after a prune, sync forms.
"""

from __future__ import annotations

import re
from typing import Annotated

import pytest
from pydantic import Field

from nodestep import (
    END,
    START,
    BaseState,
    Graph,
    GraphConfigError,
    InMemoryStateStore,
    UnknownThreadError,
    add,
    interrupt,
    node,
)
from nodestep.store import StateStore

pytestmark = pytest.mark.anyio


class Log(BaseState):
    items: Annotated[list[str], add] = Field(default_factory=list)


@node
def step(state: Log) -> dict:
    if "ask" in state.items[-1:]:
        return {"items": [interrupt("why?", id="why")]}
    return {"items": [f"seen {len(state.items)}"]}


def log_graph(store: StateStore | None) -> Graph[Log]:
    return Graph(Log, state_store=store).flow(START >> step, step >> END)


async def test_list_threads_gives_the_status_of_each_thread(store: StateStore) -> None:
    graph = log_graph(store)
    await graph.ainvoke({"items": ["a"]}, thread_id="done")
    await graph.ainvoke({"items": ["ask"]}, thread_id="asking")
    page = await graph.list_threads()
    assert {t.thread_id: t.status for t in page.threads} == {
        "done": "completed",
        "asking": "paused",
    }
    assert [t.thread_id for t in (await graph.list_threads(status="paused")).threads] == ["asking"]


async def test_a_deleted_thread_is_not_served_from_the_graphs_cache(store: StateStore) -> None:
    graph = log_graph(store)
    await graph.ainvoke({"items": ["old"]}, thread_id="t")
    assert (await graph.get_state("t")).value.items == ["old", "seen 1"]  # now cached
    assert await graph.delete_thread("t")
    with pytest.raises(UnknownThreadError):
        await graph.get_state("t")
    # A new history as long as the old one: the cache must not take it for the old.
    await graph.ainvoke({"items": ["new"]}, thread_id="t")
    assert (await graph.get_state("t")).value.items == ["new", "seen 1"]


@pytest.mark.parametrize("bad", ["", 5, None])
async def test_delete_thread_and_prune_refuse_a_thread_id_that_is_not_a_name(
    store: StateStore, bad: object
) -> None:
    graph = log_graph(store)
    await graph.ainvoke({"items": ["a"]}, thread_id="t")
    words = rf"^thread_id must be a non-empty string, got {re.escape(repr(bad))}\."
    with pytest.raises(GraphConfigError, match=words):
        await graph.delete_thread(bad)  # type: ignore[arg-type]
    if bad is not None:  # prune(None) prunes every thread
        with pytest.raises(GraphConfigError, match=words):
            await graph.prune(bad, keep_last=1)  # type: ignore[arg-type]
    assert (await graph.get_state("t")).value.items == ["a", "seen 1"]


async def test_a_pruned_thread_runs_on_and_its_old_forks_still_run(store: StateStore) -> None:
    graph = log_graph(store)
    for k in range(25):
        await graph.ainvoke({"items": [str(k)]}, thread_id="t")
    early = (await graph.history("t")).events[4]
    fork = await graph.fork("t", from_=early.id, name="early")
    before = (await graph.get_state("t")).value
    assert await graph.prune("t", keep_last=3) > 0
    assert (await graph.get_state("t")).value == before
    result = await graph.ainvoke({"items": ["more"]}, thread_id="t")
    assert result.state.items[-2:] == ["more", "seen 51"]
    on_fork = await graph.ainvoke({"items": ["f"]}, thread_id="t", branch_id=fork.id)
    assert on_fork.state.items[-1] == "seen 4"
    with pytest.raises(UnknownThreadError):
        await graph.fork("t", from_=early.id, name="too-late")


async def test_state_store_argument_wins_over_the_graphs_store() -> None:
    mine, other = InMemoryStateStore(), InMemoryStateStore()
    graph = log_graph(mine)
    await graph.ainvoke({"items": ["a"]}, thread_id="t", state_store=other)
    assert (await graph.list_threads()).threads == []
    assert [t.thread_id for t in (await graph.list_threads(state_store=other)).threads] == ["t"]
    assert await graph.prune(keep_last=1, state_store=other) == 0
    assert await graph.delete_thread("t", state_store=other)


async def test_a_graph_without_a_store_says_to_give_one() -> None:
    graph = log_graph(None)
    with pytest.raises(GraphConfigError, match="has no state store"):
        await graph.list_threads()
    with pytest.raises(GraphConfigError, match="has no state store"):
        await graph.delete_thread("t")
    with pytest.raises(GraphConfigError, match="has no state store"):
        await graph.prune(keep_last=1)


def test_the_sync_forms_do_what_the_async_methods_do() -> None:
    graph = log_graph(InMemoryStateStore())
    for k in range(20):
        graph.invoke({"items": [str(k)]}, thread_id="t")
    assert [t.thread_id for t in graph.list_threads_sync().threads] == ["t"]
    assert graph.prune_sync("t", keep_last=1) > 0
    assert graph.prune_sync(older_than=0.0) == 0
    assert graph.delete_thread_sync("t") is True
    assert graph.list_threads_sync(limit=5).threads == []


async def test_the_sync_forms_work_inside_a_running_loop() -> None:
    graph = log_graph(InMemoryStateStore())
    await graph.ainvoke({"items": ["a"]}, thread_id="t")
    page = graph.list_threads_sync()  # called on the loop's thread: runs on a worker
    assert [t.thread_id for t in page.threads] == ["t"]
