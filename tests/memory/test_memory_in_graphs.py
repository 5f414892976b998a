"""A graph's nodes and tools reach the memory store through their context, never the history."""

from __future__ import annotations

import json
from typing import Any

import pytest

from nodestep import (
    END,
    START,
    BaseState,
    ContextNotProvidedError,
    Graph,
    GraphConfigError,
    InMemoryStateStore,
    MessagesState,
    NodeContext,
    ScriptedModel,
    ScriptedReply,
    create_react_agent,
    node,
    tool,
)
from nodestep.memory import InMemoryMemoryStore, MemoryStore

pytestmark = pytest.mark.anyio


class Visits(BaseState):
    user: str = ""
    count: int = 0


@node
async def count_visit(state: Visits, ctx: NodeContext) -> dict[str, Any]:
    ns = ("visits", state.user)
    seen = await ctx.memory.get(ns, "count")
    count = 1 + (seen.value["n"] if seen else 0)
    await ctx.memory.put(ns, "count", {"n": count, "last_thread": ctx.thread_id})
    return {"count": count}


def _graph(**options: Any) -> Graph[Visits]:
    return Graph(Visits, **options).flow(START >> count_visit, count_visit >> END)


async def test_threads_of_a_graph_share_its_memory_store() -> None:
    memory = InMemoryMemoryStore()
    graph = _graph(state_store=InMemoryStateStore(), memory=memory)
    assert graph.memory is memory and _graph().memory is None
    counts = [
        (await graph.ainvoke({"user": "ann"}, thread_id=t)).state.count for t in ("t1", "t2", "t3")
    ]
    assert counts == [1, 2, 3]
    item = await memory.get(("visits", "ann"), "count")
    assert item is not None and item.value == {"n": 3, "last_thread": "t3"}


async def test_a_call_s_memory_wins_over_the_graph_s() -> None:
    own, given = InMemoryMemoryStore(), InMemoryMemoryStore()
    graph = _graph(memory=own)
    await graph.ainvoke({"user": "bo"}, memory=given)
    assert await own.get(("visits", "bo"), "count") is None
    assert await given.get(("visits", "bo"), "count") is not None
    graph.invoke({"user": "bo"})  # the sync form, with the graph's own
    assert await own.get(("visits", "bo"), "count") is not None


async def test_the_memory_store_and_its_items_are_never_in_the_history() -> None:
    states = InMemoryStateStore()
    memory = InMemoryMemoryStore()
    await memory.put(("visits", "cy"), "count", {"n": 41, "secret": "only-in-memory"})
    graph = _graph(state_store=states, memory=memory)
    result = await graph.ainvoke({"user": "cy"}, thread_id="t")
    assert result.state.count == 42
    text = json.dumps(await states.read("t", "main"), default=str)
    assert "only-in-memory" not in text and "MemoryStore" not in text


async def test_a_node_of_a_run_without_memory_is_told_how_to_give_one() -> None:
    with pytest.raises(ContextNotProvidedError, match=r"ctx\.memory.*memory=\.\.\."):
        await _graph().ainvoke({"user": "dee"})


async def test_memory_that_is_not_a_memory_store_is_refused() -> None:
    with pytest.raises(GraphConfigError, match="memory= takes a MemoryStore, got dict"):
        _graph(memory={})
    with pytest.raises(GraphConfigError, match="memory= takes a MemoryStore, got str"):
        await _graph().ainvoke({"user": "x"}, memory="sqlite:///m.db")


async def test_a_subgraph_s_nodes_get_the_parent_s_memory() -> None:
    memory = InMemoryMemoryStore()
    child = _graph(name="child")
    parent = Graph(Visits, memory=memory).flow(START >> child, child >> END)
    assert (await parent.ainvoke({"user": "eve"})).state.count == 1
    assert await memory.get(("visits", "eve"), "count") is not None


@tool
async def remember(fact: str, memory: MemoryStore) -> str:
    """Remember a fact about the user.

    Args:
        fact: The fact.
    """
    await memory.put(("facts",), fact, {"fact": fact})
    return f"noted {fact}"


async def test_a_tool_s_memory_store_parameter_gets_the_run_s_store_and_is_hidden_from_the_model():
    assert list(remember.spec["parameters"]["properties"]) == ["fact"]
    memory = InMemoryMemoryStore()
    model = ScriptedModel(
        [ScriptedReply(tool_calls=[("remember", {"fact": "likes tea"})]), ScriptedReply("ok")]
    )
    agent = create_react_agent(model, [remember])
    result = await agent.ainvoke({"messages": "I like tea"}, memory=memory)
    assert [m.content for m in result.state.messages if m.role == "tool"] == ["noted likes tea"]
    item = await memory.get(("facts",), "likes tea")
    assert item is not None and item.value == {"fact": "likes tea"}
    assert isinstance(result.state, MessagesState)


async def test_a_tool_that_takes_the_memory_store_called_without_a_context_says_so() -> None:
    with pytest.raises(GraphConfigError, match=r"Tool 'remember' takes the memory store"):
        await remember.ainvoke({"fact": "x"})
