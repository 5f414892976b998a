"""Sub-agent thread ids name the parent's superstep: stable across reloads, new per turn."""

from __future__ import annotations

import asyncio

from hypothesis import given, settings
from hypothesis import strategies as st

from nodestep import (
    END,
    START,
    AgentTask,
    BaseState,
    Graph,
    InMemoryStateStore,
    NodeContext,
    node,
)
from nodestep.store import StateStore


class Job(BaseState):
    n: int = 0


@node
def count(state: Job) -> dict:
    return {"n": state.n + 1}


counter = Graph(Job, name="counter").flow(START >> count, count >> END)


def parent(store: StateStore, seen: list[str]) -> Graph[Job]:
    @node
    async def spawn_one(state: Job, ctx: NodeContext) -> dict:
        handles = await ctx.spawn(AgentTask(counter, input={"n": state.n}))
        seen.extend(h.thread_id for h in handles)
        return {"n": (await ctx.gather(handles))[0].state.n}  # type: ignore[union-attr]

    return Graph(Job, name="parent", state_store=store).flow(START >> spawn_one, spawn_one >> END)


@settings(max_examples=15, deadline=None)
@given(turns=st.integers(min_value=1, max_value=20))
def test_each_turn_gets_new_threads_and_a_fresh_graph_counts_on_from_the_store(turns: int) -> None:
    store, seen = InMemoryStateStore(), []
    first = parent(store, seen)
    for _ in range(turns):
        first.invoke({}, thread_id="t")
    # A new graph object has no cached position: it reads the turn count from the store
    # (from a checkpoint once the thread has more than 50 records).
    again: list[str] = []
    parent(store, again).invoke({}, thread_id="t")
    assert seen == [f"t:spawn_one@{k}.0/counter#0" for k in range(1, turns + 1)]
    assert again == [f"t:spawn_one@{turns + 1}.0/counter#0"]


def test_a_forked_branch_gets_threads_of_its_own() -> None:
    store, seen = InMemoryStateStore(), []
    graph = parent(store, seen)
    graph.invoke({}, thread_id="t")

    async def fork_and_run() -> None:
        history = await graph.history("t")
        start = next(e for e in history.events if e.type == "run_started")
        branch = await graph.fork("t", from_=start.id, name="again")
        await graph.ainvoke(None, thread_id="t", branch_id=branch.id)

    asyncio.run(fork_and_run())
    assert seen[0] == "t:spawn_one@1.0/counter#0"
    assert seen[1].startswith("t~") and seen[1].endswith(":spawn_one@1.0/counter#0")
