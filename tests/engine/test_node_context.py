"""A NodeContext reaches its node by annotation, positional or keyword-only, wherever it runs."""

from __future__ import annotations

from typing import Annotated

import pytest
from pydantic import Field

from nodestep import (
    END,
    START,
    BaseState,
    Command,
    Graph,
    InMemoryStateStore,
    NodeContext,
    Resume,
    add,
    interrupt,
    node,
)

pytestmark = pytest.mark.anyio


class S(BaseState):
    log: Annotated[list[str], add] = Field(default_factory=list)


@node
def inline_def(state: S, *, ctx: NodeContext):
    return {"log": [f"{ctx.node}@{ctx.step}"]}


@node
async def on_loop(state: S, *, info: NodeContext):
    return {"log": [f"{info.node}@{info.step}"]}


@node(timeout=5)
def timed_def(state: S, *, ctx: NodeContext):
    return {"log": [f"{ctx.node}@{ctx.step}"]}


@node(timeout=5)
async def timed_async(state: S, *, ctx: NodeContext):
    return {"log": [f"{ctx.node}@{ctx.step}"]}


@node
def in_thread_a(state: S, *, ctx: NodeContext):
    return {"log": [f"{ctx.task_id}@{ctx.step}"]}


@node
def in_thread_b(ctx: NodeContext, state: S):
    return {"log": [f"{ctx.task_id}@{ctx.step}"]}


@node(goto=[in_thread_a, in_thread_b])
def fan(state: S, *, ctx: NodeContext):
    return Command(update={"log": [f"{ctx.node}@{ctx.step}"]}, goto=[in_thread_a, in_thread_b])


async def test_keyword_only_context_reaches_every_kind_of_task():
    graph = Graph(S).flow(
        START >> inline_def,
        inline_def >> on_loop,
        on_loop >> timed_def,
        timed_def >> timed_async,
        timed_async >> fan,
        in_thread_a >> END,
        in_thread_b >> END,
    )
    assert (await graph.ainvoke({})).state.log == [
        "inline_def@0",
        "on_loop@1",
        "timed_def@2",
        "timed_async@3",
        "fan@4",
        "in_thread_a@5",
        "in_thread_b@5",
    ]


async def test_keyword_only_context_keeps_its_cache_across_a_pause():
    calls: list[dict[str, str]] = []

    @node
    def ask(state: S, *, ctx: NodeContext):
        calls.append(dict(ctx.cache))
        ctx.cache.setdefault("draft", "v1")
        return {"log": [f"{ctx.cache['draft']}:{interrupt('ok?', id='ok')}"]}

    graph = Graph(S, state_store=InMemoryStateStore()).flow(START >> ask, ask >> END)
    assert (await graph.ainvoke({}, thread_id="t")).status == "interrupted"
    result = await graph.ainvoke(None, thread_id="t", resume=Resume("yes"))
    assert result.state.log == ["v1:yes"]
    assert calls == [{}, {"draft": "v1"}]
