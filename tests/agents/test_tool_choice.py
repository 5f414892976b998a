"""tool_choice: checked against the tools, passed to the model, reset after tool results."""

from __future__ import annotations

from collections.abc import AsyncIterator, Sequence
from typing import Any

import pytest
from chat_server import chat_server, completion

from nodestep import (
    GraphConfigError,
    ModelError,
    ScriptedModel,
    ScriptedReply,
    create_react_agent,
    model_node,
    tool,
)
from nodestep.agents import AssistantMessage, MessageChunk, OpenAIChatModel, UserMessage

pytestmark = pytest.mark.anyio


@tool
def specs(topic: str) -> str:
    """Look up the specifications."""
    return "720 Watts"


@tool
def weather(city: str) -> str:
    """Tell the weather."""
    return "sunny"


class OldModel:
    """A chat model written before tool_choice: its methods take no such keyword."""

    name = "old"

    async def complete(self, messages: Sequence[Any], tools: Sequence[Any]) -> AssistantMessage:
        return AssistantMessage(content="hi")

    async def stream(
        self, messages: Sequence[Any], tools: Sequence[Any]
    ) -> AsyncIterator[MessageChunk]:
        yield MessageChunk(content="hi")


@pytest.mark.parametrize("stream", [True, False])
async def test_a_forced_choice_holds_for_the_first_call_and_auto_follows_tool_results(stream):
    model = ScriptedModel([ScriptedReply(tool_calls=[("specs", {"topic": "x"})]), "720 W."])
    agent = create_react_agent(model, [specs, weather], tool_choice="specs", stream=stream)
    result = await agent.ainvoke({"messages": "max load?"})
    assert result.state.messages[-1].content == "720 W."
    assert model.tool_choices == ["specs", "auto"]


async def test_required_makes_the_model_call_a_tool_and_none_forbids_it():
    chatty = ScriptedModel(["I will not call anything."])
    agent = create_react_agent(chatty, [specs], tool_choice="required")
    with pytest.raises(ModelError, match="calls no tool, but tool_choice='required'"):
        await agent.ainvoke({"messages": "max load?"})

    caller = ScriptedModel([ScriptedReply(tool_calls=[("specs", {"topic": "x"})])])
    agent = create_react_agent(caller, [specs], tool_choice="none")
    with pytest.raises(ModelError, match="forbids tool calls"):
        await agent.ainvoke({"messages": "max load?"})
    assert caller.tool_choices == ["none"]


async def test_a_scripted_reply_calling_another_tool_than_the_named_choice_is_refused():
    caller = ScriptedModel([ScriptedReply(tool_calls=[("weather", {"city": "Oslo"})])])
    agent = create_react_agent(caller, [specs, weather], tool_choice="specs")
    with pytest.raises(ModelError, match=r"calls \['weather'\], but tool_choice='specs' asks"):
        await agent.ainvoke({"messages": "max load?"})


async def test_without_a_choice_the_model_gets_none_and_auto_stays_auto():
    model = ScriptedModel([ScriptedReply(tool_calls=[("specs", {"topic": "x"})]), "ok"])
    await create_react_agent(model, [specs]).ainvoke({"messages": "q"})
    assert model.tool_choices == [None, None]
    model = ScriptedModel([ScriptedReply(tool_calls=[("specs", {"topic": "x"})]), "ok"])
    await create_react_agent(model, [specs], tool_choice="auto").ainvoke({"messages": "q"})
    assert model.tool_choices == ["auto", "auto"]


@pytest.mark.parametrize(
    ("choice", "error"),
    [
        ("spec", r"tool_choice='spec' names no tool: the tools are 'specs', 'weather'"),
        ("Auto", r"tool_choice='Auto' names no tool"),
        (3, r"tool_choice=3 is not a choice: it takes 'auto', 'required', 'none'"),
        ({"type": "function"}, r"is not a choice"),
    ],
)
def test_a_bad_tool_choice_is_refused_when_built_naming_the_tools(choice, error):
    with pytest.raises(GraphConfigError, match=error):
        create_react_agent(ScriptedModel(["x"]), [specs, weather], tool_choice=choice)


def test_required_without_tools_and_a_model_without_the_keyword_are_refused():
    with pytest.raises(GraphConfigError, match="'required' asks the model to call a tool, but"):
        create_react_agent(ScriptedModel(["x"]), [], tool_choice="required")
    with pytest.raises(GraphConfigError, match=r"'old' \(OldModel\) takes no tool_choice"):
        model_node(OldModel(), tools=[specs], tool_choice="auto")
    model_node(OldModel(), tools=[specs])  # without a choice an old model still works


@pytest.mark.slow  # imports openai
async def test_the_openai_model_sends_the_choice_in_the_wire_format():
    pytest.importorskip("openai")
    with chat_server() as server:
        server.answers.extend([completion("a"), completion("b"), completion("c")])
        model = OpenAIChatModel("local-model", base_url=server.url, api_key="k")
        conversation = [UserMessage(content="hi")]
        await model.complete(conversation, [specs.spec], tool_choice="specs")
        await model.complete(conversation, [specs.spec], tool_choice="required")
        await model.complete(conversation, [], tool_choice="none")
    bodies = [request["body"] for request in server.requests]
    assert bodies[0]["tool_choice"] == {"type": "function", "function": {"name": "specs"}}
    assert bodies[1]["tool_choice"] == "required"
    assert "tool_choice" not in bodies[2] and "tools" not in bodies[2]  # refused without tools
