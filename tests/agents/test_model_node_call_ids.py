"""The model node gives each tool call of a reply an id of its own."""

from __future__ import annotations

from collections.abc import AsyncIterator
from typing import Any

import pytest

from nodestep import (
    InMemoryStateStore,
    ScriptedModel,
    ScriptedReply,
    create_react_agent,
    interrupt,
    tool,
)
from nodestep.agents import AssistantMessage, MessageChunk, ToolCall, ToolMessage
from nodestep.testing import replay

pytestmark = pytest.mark.anyio


@tool
def echo(text: str) -> str:
    """Say the text back."""
    return f"echo {text}"


@tool
def ask(text: str) -> str:
    """Ask a person about the text."""
    return f"{text}: {interrupt(f'{text}?', id='ok')}"


def _one_id(name: str, call_id: str) -> list[ToolCall]:
    """Two calls of ``name`` with one id, as a server that numbers each reply's calls."""
    return [
        ToolCall(name=name, args={"text": "a"}, id=call_id),
        ToolCall(name=name, args={"text": "b"}, id=call_id),
    ]


class _Seeing(ScriptedModel):
    """A scripted model that keeps each conversation it is sent."""

    def __init__(self, script: list[Any]) -> None:
        super().__init__(script)
        self.sent: list[list[Any]] = []

    async def complete(self, messages: list[Any], tools: Any = None, **options: Any) -> Any:
        self.sent.append(list(messages))
        return await super().complete(messages, tools, **options)

    async def stream(
        self, messages: list[Any], tools: Any = None, **options: Any
    ) -> AsyncIterator[MessageChunk]:
        self.sent.append(list(messages))
        async for chunk in super().stream(messages, tools, **options):
            yield chunk


def _pairs(messages: list[Any]) -> list[tuple[str, str]]:
    """Return each tool call's id and args' text, then each tool result's call id and text."""
    calls = [
        (c.id, c.args["text"]) for m in messages if m.role == "assistant" for c in m.tool_calls
    ]
    results = [(m.tool_call_id, m.content) for m in messages if isinstance(m, ToolMessage)]
    return calls + results


@pytest.mark.parametrize("stream", [True, False])
async def test_a_repeated_call_id_gets_one_of_its_own_and_its_own_result(stream):
    model = _Seeing([ScriptedReply(tool_calls=_one_id("echo", "x")), "done"])
    agent = create_react_agent(model, [echo], stream=stream)
    done = await agent.ainvoke({"messages": "go"})
    expected = [("x", "a"), ("agent-2-call-1", "b"), ("x", "echo a"), ("agent-2-call-1", "echo b")]
    assert _pairs(done.state.messages) == expected
    assert _pairs(model.sent[-1]) == expected  # what the model is told


@pytest.mark.parametrize("stream", [True, False])
async def test_calls_without_ids_are_named_after_the_reply(stream):
    calls = [ToolCall(name="echo", args={"text": t}, id="") for t in "ab"]
    agent = create_react_agent(
        ScriptedModel([AssistantMessage(tool_calls=calls), "done"]), [echo], stream=stream
    )
    done = await agent.ainvoke({"messages": "go"})
    assert _pairs(done.state.messages) == [
        ("agent-2-call-0", "a"),
        ("agent-2-call-1", "b"),
        ("agent-2-call-0", "echo a"),
        ("agent-2-call-1", "echo b"),
    ]


async def test_a_pause_of_two_calls_of_one_id_holds_both_questions():
    agent = create_react_agent(
        ScriptedModel([ScriptedReply(tool_calls=_one_id("ask", "x")), "done"]),
        [ask],
        state_store=InMemoryStateStore(),
    )
    paused = await agent.ainvoke({"messages": "go"}, thread_id="t")
    assert {key: i.payload for key, i in paused.interrupts.items()} == {
        "tools/x:ok": "a?",
        "tools/agent-2-call-1:ok": "b?",
    }


async def test_a_recorded_replay_gives_each_call_of_one_id_its_own_result():
    store = InMemoryStateStore()
    script = [ScriptedReply(tool_calls=_one_id("echo", "x")), "done"]
    await create_react_agent(ScriptedModel(script), [echo], state_store=store).ainvoke(
        {"messages": "go"}, thread_id="t"
    )
    report = await replay(create_react_agent(ScriptedModel([]), [echo]), store, "t", recorded=True)
    assert report.clean, report
