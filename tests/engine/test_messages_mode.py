"""The "messages" stream mode: what nodes emit with ctx.emit(data, mode="messages")."""

from __future__ import annotations

import pytest

from nodestep import END, START, BaseState, Graph, GraphConfigError, NodeContext, node

pytestmark = pytest.mark.anyio


class S(BaseState):
    text: str = ""


@node
async def writer(state: S, ctx: NodeContext) -> dict:
    for token in ("a", "b"):
        ctx.emit({"token": token}, "messages")
    ctx.emit("custom data")
    return {"text": "ab"}


@node
def sync_writer(state: S, ctx: NodeContext) -> dict:
    ctx.emit("from a thread", mode="messages")
    return {"text": "x"}


GRAPH = Graph(S).flow(START >> writer, writer >> END)


async def test_messages_mode_yields_the_nodes_messages_events_only():
    events = [e async for e in GRAPH.astream({}, stream_mode="messages")]
    assert [(e.mode, e.node, e.task_id, e.step, e.data) for e in events[:-1]] == [
        ("messages", "writer", "writer", 0, {"token": "a"}),
        ("messages", "writer", "writer", 0, {"token": "b"}),
    ]
    assert events[-1].mode == "final"


async def test_custom_mode_does_not_get_messages_events():
    events = [e async for e in GRAPH.astream({}, stream_mode="custom")]
    assert [e.data for e in events if e.mode != "final"] == ["custom data"]


async def test_messages_events_come_before_the_update_of_their_step():
    events = [e async for e in GRAPH.astream({}, stream_mode=["messages", "updates"])]
    assert [e.mode for e in events] == ["messages", "messages", "updates", "final"]


async def test_a_sync_node_emits_messages_from_its_worker_thread():
    graph = Graph(S).flow(START >> sync_writer, sync_writer >> END)
    events = [e async for e in graph.astream({}, stream_mode="messages")]
    assert [e.data for e in events if e.mode == "messages"] == ["from a thread"]


async def test_emit_refuses_an_unknown_mode_even_when_nobody_streams():
    @node
    def wrong(state: S, ctx: NodeContext) -> None:
        ctx.emit("x", mode="updates")

    graph = Graph(S).flow(START >> wrong, wrong >> END)
    with pytest.raises(ValueError, match="takes mode 'custom' or 'messages', got 'updates'"):
        await graph.ainvoke({})


def test_an_unknown_stream_mode_lists_messages_among_the_known():
    with pytest.raises(GraphConfigError, match="'messages'"):
        list(GRAPH.stream({}, stream_mode="tokens"))


async def test_a_node_can_tell_which_modes_the_run_streams():
    seen: list[tuple[bool, bool]] = []

    @node
    def looks(state: S, ctx: NodeContext) -> None:
        seen.append((ctx.streams("messages"), ctx.streams("custom")))

    graph = Graph(S).flow(START >> looks, looks >> END)
    await graph.ainvoke({})
    [e async for e in graph.astream({}, stream_mode="messages")]
    [e async for e in graph.astream({}, stream_mode=["custom", "updates"])]
    assert seen == [(False, False), (True, False), (False, True)]
