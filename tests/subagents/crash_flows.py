"""The graphs of the sub-agent crash test, imported by its child processes and by the test."""

from __future__ import annotations

import asyncio
import os
from pathlib import Path

from pydantic import Field

from nodestep import END, START, AgentTask, BaseState, Graph, NodeContext, node
from nodestep.store import StateStore

LEASE = 0.5


def note(line: str) -> None:
    with Path(os.environ["LEDGER"]).open("a") as ledger:
        ledger.write(line + "\n")


class Piece(BaseState):
    text: str = ""
    steps: list[str] = Field(default_factory=list)


@node
def quick(state: Piece) -> dict:
    note(f"quick {state.text}")
    return {"steps": [*state.steps, "quick"]}


@node
def prepare(state: Piece) -> dict:
    note(f"prepare {state.text}")
    return {"steps": [*state.steps, "prepare"]}


@node
async def finish(state: Piece) -> dict:
    note(f"finish {state.text}")
    if os.environ.get("HOLD") == "1":
        print("slow is holding", flush=True)
        await asyncio.sleep(3600)
    return {"steps": [*state.steps, "finish"]}


class Report(BaseState):
    parts: list[str] = Field(default_factory=list)


@node
async def dispatch(state: Report, ctx: NodeContext) -> dict:
    tasks = [AgentTask("quick", input={"text": "a"}), AgentTask("slow", input={"text": "b"})]
    results = await ctx.gather(await ctx.spawn(tasks))
    return {"parts": ["/".join(r.state.steps) for r in results]}


def report(store: StateStore) -> Graph[Report]:
    quick_graph = Graph(Piece, name="quick", lease_ttl=LEASE).flow(START >> quick, quick >> END)
    slow_graph = Graph(Piece, name="slow", lease_ttl=LEASE).flow(
        START >> prepare, prepare >> finish, finish >> END
    )
    return Graph(Report, state_store=store, agents=[quick_graph, slow_graph], lease_ttl=LEASE).flow(
        START >> dispatch, dispatch >> END
    )
