"""Several tasks of one model node in a superstep: each reply keeps an id of its own."""

from __future__ import annotations

from collections.abc import AsyncIterator, Sequence
from typing import Any

import anyio
import pytest

from nodestep import END, START, Command, Graph, MessagesState, Send, model_node, node
from nodestep.agents import AssistantMessage, MessageChunk

pytestmark = pytest.mark.anyio


class Echo:
    """Answers ``re: <last message>``; the call about ``"a"`` finishes after the one about
    ``"b"``, so the tasks finish in the reverse of their scheduling order."""

    name = "echo"

    def __init__(self) -> None:
        self.b_done = anyio.Event()

    async def _answer(self, messages: Sequence[Any]) -> str:
        last = messages[-1].content
        if last == "a":
            with anyio.fail_after(5):  # only a guard: "b" sets the event at once
                await self.b_done.wait()
        return f"re: {last}"

    async def complete(
        self, messages: Sequence[Any], tools: Sequence[dict[str, Any]], **_: Any
    ) -> AssistantMessage:
        text = await self._answer(messages)
        if text == "re: b":
            self.b_done.set()
        return AssistantMessage(content=text)

    async def stream(
        self, messages: Sequence[Any], tools: Sequence[dict[str, Any]], **_: Any
    ) -> AsyncIterator[MessageChunk]:
        text = await self._answer(messages)
        yield MessageChunk(content=text)
        if text == "re: b":
            self.b_done.set()


def _fan_out(stream: bool) -> Graph[MessagesState]:
    chat = model_node(Echo(), stream=stream)

    @node(goto=[chat])
    def fan(state: MessagesState) -> Command:
        return Command(goto=[Send(chat, {"messages": ["a"]}), Send(chat, {"messages": ["b"]})])

    return Graph(MessagesState).flow(START >> fan, chat >> END)


@pytest.mark.parametrize("stream", [False, True])
async def test_parallel_sends_to_a_model_node_keep_every_reply(stream: bool):
    result = await _fan_out(stream).ainvoke({"messages": ["hi"]})
    assert [(m.id, m.content) for m in result.state.messages] == [
        ("msg-1", "hi"),
        ("agent-1", "re: a"),
        ("agent[1]-1", "re: b"),
    ]


async def test_parallel_replies_stream_under_the_ids_they_are_stored_with():
    graph = _fan_out(stream=True)
    events = [e async for e in graph.astream({"messages": ["hi"]}, stream_mode="messages")]
    streamed = sorted((e.task_id, e.data.message_id) for e in events if e.mode == "messages")
    assert streamed == [("agent", "agent-1"), ("agent[1]", "agent[1]-1")]


async def test_the_next_reply_after_parallel_replies_counts_on_past_them():
    chat = model_node(Echo(), stream=False)
    again = model_node(Echo(), name="again", stream=False)

    @node(goto=[chat])
    def fan(state: MessagesState) -> Command:
        sends = [Send(chat, {"messages": [*state.messages, text]}) for text in ("a", "b")]
        return Command(goto=sends)

    graph = Graph(MessagesState).flow(START >> fan, chat >> again, again >> END)
    result = await graph.ainvoke({"messages": ["hi"]})
    assert [m.id for m in result.state.messages] == ["msg-1", "agent-2", "agent[1]-2", "again-3"]
