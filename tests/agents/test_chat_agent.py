"""A ReAct agent without tools: a chat, which a model answers in one step per turn."""

from __future__ import annotations

import pytest

from nodestep import END, InMemoryStateStore, ScriptedModel, create_react_agent

pytestmark = pytest.mark.anyio


async def test_an_agent_without_tools_is_a_chat_that_keeps_its_thread():
    model = ScriptedModel(["Hello Ada.", "You are Ada."])
    agent = create_react_agent(model, [], system="Be brief.", state_store=InMemoryStateStore())
    assert list(agent.nodes) == ["agent"]
    assert (agent.start, agent.edges) == ("agent", {"agent": END})
    await agent.ainvoke({"messages": "I am Ada."}, thread_id="t")
    result = await agent.ainvoke({"messages": "Who am I?"}, thread_id="t")
    assert [m.content for m in result.state.messages] == [
        "I am Ada.",
        "Hello Ada.",
        "Who am I?",
        "You are Ada.",
    ]
    assert model.calls[1][0].content == "Be brief."  # the system prompt, sent, not stored


def test_a_chat_turn_takes_one_superstep():
    model = ScriptedModel(["hi there"])
    result = create_react_agent(model, [], max_steps=1).invoke({"messages": "hi"})
    assert result.state.messages[-1].content == "hi there"
