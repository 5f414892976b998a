"""A subgraph starts from the parent's values of the shared fields, not merged into its defaults."""

from __future__ import annotations

import operator
from typing import Annotated, Any

from pydantic import Field

from nodestep import END, START, BaseState, Graph, InMemoryStateStore, add, merge_dict, node
from nodestep import subgraph as subgraph_node


class Seeded(BaseState):
    log: Annotated[list[str], add] = Field(default_factory=lambda: ["start"])
    total: Annotated[int, operator.add] = 1
    tags: Annotated[dict[str, int], merge_dict] = Field(default_factory=lambda: {"d": 0})
    plain: str = "p"


class Other(BaseState):
    log: Annotated[list[str], add] = Field(default_factory=lambda: ["child start"])
    total: Annotated[int, operator.add] = 100
    own: Annotated[list[str], add] = Field(default_factory=lambda: ["own"])


seen: list[tuple[Any, ...]] = []


@node
def before(state: Seeded) -> dict[str, Any]:
    return {"log": ["before"], "total": 10, "tags": {"d": 5}}


@node
def writes_plain(state: Seeded) -> dict[str, Any]:
    seen.append((list(state.log), state.total, dict(state.tags)))
    return {"plain": "child ran"}


@node
def adds(state: Seeded) -> dict[str, Any]:
    return {"log": ["child"], "total": 3}


@node
def other_adds(state: Other) -> dict[str, Any]:
    seen.append((list(state.log), state.total, list(state.own)))
    return {"log": ["other"], "own": ["more"]}


def _parent(child: Any, store: bool = False) -> Graph:
    kw: dict[str, Any] = {"state_store": InMemoryStateStore()} if store else {}
    return Graph(Seeded, name="parent", **kw).flow(START >> before >> child >> END)


def test_a_child_that_writes_no_reducer_field_leaves_it_as_the_parent_had_it() -> None:
    seen.clear()
    child = Graph(Seeded, name="child").flow(START >> writes_plain >> END)
    state = _parent(child).invoke({}).state
    assert seen == [(["start", "before"], 11, {"d": 5})]
    assert (state.log, state.total, state.tags, state.plain) == (
        ["start", "before"],
        11,
        {"d": 5},
        "child ran",
    )


def test_a_childs_reducer_writes_reach_the_parent_once() -> None:
    child = Graph(Seeded, name="child").flow(START >> adds >> END)
    state = _parent(child, store=True).invoke({}, thread_id="t").state
    assert (state.log, state.total) == (["start", "before", "child"], 14)


def test_a_child_of_another_class_starts_shared_fields_from_the_parents_values() -> None:
    seen.clear()
    child = Graph(Other, name="other").flow(START >> other_adds >> END)
    wrapped = subgraph_node("other", child, share=["log", "total"])
    state = _parent(wrapped).invoke({}).state
    # Shared fields replace the child's defaults; its own field starts from its default.
    assert seen == [(["start", "before"], 11, ["own"])]
    assert (state.log, state.total) == (["start", "before", "other"], 11)
