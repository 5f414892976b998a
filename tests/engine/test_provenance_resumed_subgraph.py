"""Provenance names a subgraph node that ran again to take its child's answer a resume.

A subgraph's interrupt names its task by its path (``child/ask``); the parent's task that
runs the subgraph again on resume (``child``) wrote its update as a ``"resume"``, as a
node of the parent that paused itself does.
"""

from __future__ import annotations

from typing import Annotated, Any

import pytest
from pydantic import Field

from nodestep import END, START, BaseState, Graph, Resume, add, interrupt, node, subgraph
from nodestep.history import provenance
from nodestep.store import StateStore

pytestmark = pytest.mark.anyio


class Notes(BaseState):
    notes: Annotated[list[str], add] = Field(default_factory=list)
    verdict: str = ""


@node
def ask(state: Notes) -> dict[str, Any]:
    return {"notes": [f"asked: {interrupt('ok?', id='ok')}"]}


@node
def decide(state: Notes) -> dict[str, Any]:
    return {"verdict": interrupt("verdict?", id="verdict")}


def notes_graph(store: StateStore) -> Graph[Notes]:
    child = subgraph("child", Graph(Notes, name="inner").flow(START >> ask, ask >> END))
    return Graph(Notes, state_store=store).flow(START >> child, child >> decide, decide >> END)


async def test_a_subgraph_node_that_took_its_childs_answer_is_a_resume(
    store: StateStore,
) -> None:
    graph = notes_graph(store)
    await graph.ainvoke({}, thread_id="t")
    await graph.ainvoke(None, thread_id="t", resume=Resume("yes"))
    await graph.ainvoke(None, thread_id="t", resume=Resume("ship"))

    notes = (await provenance(store, "t", "notes")).writer
    verdict = (await provenance(store, "t", "verdict")).writer

    assert (notes.kind, notes.node, notes.value) == ("resume", "child", ["asked: yes"])
    assert (verdict.kind, verdict.node) == ("resume", "decide")
