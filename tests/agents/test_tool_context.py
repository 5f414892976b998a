"""ToolContext: a tool's view of the run that calls it, hidden from the model, never stored."""

from __future__ import annotations

import json
from typing import Any

import pytest
from pydantic import Field

from nodestep import (
    ContextNotProvidedError,
    GraphConfigError,
    InMemoryStateStore,
    MessagesState,
    ScriptedModel,
    ScriptedReply,
    create_react_agent,
    tool,
)
from nodestep.agents import ToolContext, ToolMessage
from nodestep.memory import InMemoryMemoryStore

pytestmark = pytest.mark.anyio

SECRET = "context-secret-7f3a"


class Shop(MessagesState):
    customer: str = "ada"
    visits: list[str] = Field(default_factory=list)


seen: list[dict[str, Any]] = []


@tool
async def whoami(greeting: str, run: ToolContext) -> str:
    """Greet the customer of the conversation.

    Args:
        greeting: The word to greet with.
    """
    seen.append(
        {
            "thread": run.thread_id,
            "branch": run.branch_id,
            "call": run.tool_call_id,
            "tool": run.tool_name,
            "customer": run.state.customer,
            "messages": len(run.state.messages),
            "context": run.context,
            "memory": run.memory,
        }
    )
    run.writer({"greeting": greeting})
    return f"{greeting}, {run.state.customer}"


@tool
def remember(fact: str, run: ToolContext) -> str:
    """Remember a fact about the customer.

    Args:
        fact: The fact.
    """
    assert run.memory is not None
    run.memory.put_sync(("facts", run.state.customer), "last", {"fact": fact})
    return "noted"


@tool
def needs_context(run: ToolContext) -> str:
    """Read the run's context."""
    return str(run.context)


def _agent(tools: list, script: list, **options: Any):
    return create_react_agent(ScriptedModel(script), tools, state=Shop, **options)


def test_the_tool_context_parameter_is_not_in_the_models_schema():
    parameters = whoami.spec["parameters"]
    assert list(parameters["properties"]) == ["greeting"]
    assert parameters["required"] == ["greeting"]
    assert "ToolContext" not in json.dumps(whoami.spec)
    assert whoami.context_param == "run"


async def test_a_tool_sees_thread_state_call_id_context_and_memory():
    seen.clear()
    memory = InMemoryMemoryStore()
    agent = _agent(
        [whoami],
        [ScriptedReply(tool_calls=[("whoami", {"greeting": "hi"})]), "done"],
        state_store=InMemoryStateStore(),
    )
    result = await agent.ainvoke(
        {"messages": "hello", "customer": "bo"}, thread_id="t1", context=SECRET, memory=memory
    )
    assert result.state.messages[2].content == "hi, bo"
    assert seen == [
        {
            "thread": "t1",
            "branch": "main",
            "call": "call-1-1",
            "tool": "whoami",
            "customer": "bo",
            "messages": 2,
            "context": SECRET,
            "memory": memory,
        }
    ]


async def test_a_tool_writes_custom_stream_events_through_its_writer():
    agent = _agent([whoami], [ScriptedReply(tool_calls=[("whoami", {"greeting": "hey"})]), "ok"])
    events = [
        event
        async for event in agent.astream(
            {"messages": "hello"}, stream_mode="custom", context=SECRET
        )
    ]
    custom = [event.data for event in events if event.mode == "custom"]
    assert custom == [{"greeting": "hey"}]


async def test_the_memory_is_none_without_a_store_and_a_tool_can_write_to_one():
    seen.clear()
    agent = _agent([whoami], [ScriptedReply(tool_calls=[("whoami", {"greeting": "yo"})]), "ok"])
    await agent.ainvoke({"messages": "hello"}, context=None)
    assert seen[0]["memory"] is None and seen[0]["context"] is None

    memory = InMemoryMemoryStore()
    agent = _agent([remember], [ScriptedReply(tool_calls=[("remember", {"fact": "tea"})]), "ok"])
    await agent.ainvoke({"messages": "I like tea"}, memory=memory)
    item = await memory.get(("facts", "ada"), "last")
    assert item is not None and item.value == {"fact": "tea"}


async def test_reading_the_context_of_a_run_without_one_fails_the_run_whatever_handle_errors():
    # The caller must pass context=; an error tool message would ask the model to fix it.
    agent = _agent([needs_context], [ScriptedReply(tool_calls=[("needs_context", {})]), "ok"])
    with pytest.raises(
        ContextNotProvidedError,
        match=r"Tool 'needs_context' \(call 'call-1-1'\) read the run's context.*Pass context=",
    ):
        await agent.ainvoke({"messages": "go"})


async def test_the_tool_context_is_never_stored_in_the_history():
    store = InMemoryStateStore()
    agent = _agent(
        [whoami],
        [ScriptedReply(tool_calls=[("whoami", {"greeting": "hi"})]), "done"],
        state_store=store,
    )
    await agent.ainvoke({"messages": "hello"}, thread_id="t", context=SECRET)
    history = await agent.history("t")
    stored = json.dumps([event.data for event in history], default=str)
    assert "hi, ada" in stored  # the tool ran and its message is stored
    assert SECRET not in stored and "ToolContext" not in stored


async def test_a_tool_context_needs_the_tool_node_or_a_ctx():
    with pytest.raises(GraphConfigError, match=r"takes a ToolContext \(parameter 'run'\)"):
        await whoami.ainvoke({"greeting": "hi"})


def test_its_repr_names_the_call_and_never_the_state_or_context():
    captured: list[str] = []

    @tool
    def show(run: ToolContext) -> str:
        """Show the context."""
        captured.append(repr(run))
        return "ok"

    agent = _agent([show], [ScriptedReply(tool_calls=[("show", {})]), "ok"])
    agent.invoke({"messages": "go", "customer": "secret-customer"}, context=SECRET)
    assert captured[0].startswith("ToolContext(tool_name='show', tool_call_id='call-1-1', ")
    assert captured[0].endswith(", branch_id='main')")
    assert SECRET not in captured[0] and "secret-customer" not in captured[0]


async def test_calls_of_one_reply_each_get_their_own_context():
    seen.clear()
    calls = [("whoami", {"greeting": word}) for word in ("hi", "hello", "hey")]
    agent = _agent([whoami], [ScriptedReply(tool_calls=calls), "done"])
    result = await agent.ainvoke({"messages": "greet"}, context=SECRET)
    assert sorted(entry["call"] for entry in seen) == ["call-1-1", "call-1-2", "call-1-3"]
    answers = [m.content for m in result.state.messages if isinstance(m, ToolMessage)]
    assert answers == ["hi, ada", "hello, ada", "hey, ada"]
