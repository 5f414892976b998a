"""Sub-agents on every built-in store: concurrent runs, a pause, a resume, a read-back."""

from __future__ import annotations

import asyncio

from pydantic import Field

from nodestep import (
    END,
    START,
    AgentTask,
    BaseState,
    Graph,
    NodeContext,
    Resume,
    interrupt,
    node,
)
from nodestep.store import StateStore


class Item(BaseState):
    text: str = ""
    out: str = ""


class Order(BaseState):
    items: list[str] = Field(default_factory=list)
    outs: list[str] = Field(default_factory=list)


calls: list[str] = []


@node
async def pack(state: Item) -> dict:
    calls.append(state.text)
    if state.text == "fragile":
        return {"out": f"{state.text}: {interrupt('wrap it?', id='wrap')}"}
    return {"out": f"{state.text}: packed"}


packer = Graph(Item, name="packer").flow(START >> pack, pack >> END)


@node
async def pack_all(state: Order, ctx: NodeContext) -> dict:
    handles = await ctx.spawn([AgentTask(packer, input={"text": t}) for t in state.items])
    return {"outs": [r.state.out for r in await ctx.gather(handles)]}  # type: ignore[union-attr]


def test_sub_agents_pause_resume_and_read_back_on_every_store(store: StateStore) -> None:
    calls.clear()
    items = [f"box{i}" for i in range(8)] + ["fragile"]
    graph = Graph(Order, state_store=store).flow(START >> pack_all, pack_all >> END)

    async def scenario() -> list[str]:
        paused = await graph.ainvoke({"items": items}, thread_id="o-1")
        assert list(paused.interrupts) == ["pack_all/packer#8/pack:wrap"]
        done = await graph.ainvoke(None, thread_id="o-1", resume=Resume("bubble wrap"))
        return list(done.state.outs)

    outs = asyncio.run(scenario())
    assert outs == [f"box{i}: packed" for i in range(8)] + ["fragile: bubble wrap"]
    assert sorted(calls) == sorted([*items, "fragile"])  # only the paused one ran twice
