"""A subgraph's shared fields: the update it returns takes the parent to the child's values."""

from __future__ import annotations

import operator
from typing import Annotated, Any

import pytest
from hypothesis import given
from hypothesis import strategies as st
from pydantic import Field

from nodestep import END, START, BaseState, Graph, Replace, add, merge_dict, node
from nodestep._engine.subgraph_map import StateMap
from nodestep._superstep.merge import apply_writes


class Shared(BaseState):
    items: Annotated[list[int], add] = Field(default_factory=list)
    tags: Annotated[dict[str, int], merge_dict] = Field(default_factory=dict)
    count: Annotated[int, operator.add] = 0
    name: str = ""


@node
def noop(state: Shared) -> None:
    return None


SCHEMA = Graph(Shared).flow(START >> noop, noop >> END).schema

lists = st.lists(st.integers(0, 5), max_size=4)
tag_dicts = st.dictionaries(st.sampled_from("abc"), st.integers(0, 3), max_size=3)
states = st.builds(
    Shared, items=lists, tags=tag_dicts, count=st.integers(-3, 3), name=st.sampled_from("xy")
)


@given(old=states, new=states, grown=st.booleans())
def test_the_update_of_shared_fields_takes_the_parent_to_the_childs_final_values(
    old: Shared, new: Shared, grown: bool
) -> None:
    if grown:  # the usual case: the child added to what it was given
        new = new.model_copy(
            update={"items": old.items + new.items, "tags": {**old.tags, **new.tags}}
        )
    update = StateMap().output(SCHEMA, old, new)
    after = apply_writes(SCHEMA.channels, old.model_dump(), SCHEMA.validate_update(update, "sub"))
    assert after == new.model_dump()


def test_an_unchanged_child_returns_no_update() -> None:
    state = Shared(items=[1], tags={"a": 1}, count=2, name="x")
    assert StateMap().output(SCHEMA, state, state.model_copy(deep=True)) == {}


def test_grown_fields_are_written_as_what_the_child_added() -> None:
    old = Shared(items=[1], tags={"a": 1})
    new = Shared(items=[1, 2], tags={"a": 1, "b": 2}, count=5)
    assert StateMap().output(SCHEMA, old, new) == {
        "items": [2],
        "tags": {"b": 2},
        "count": Replace(5),
    }


@pytest.mark.parametrize(
    ("share", "expected"),
    [(("items",), {"items": [2]}), (("name",), {"name": "z"})],
)
def test_only_shared_fields_flow_back(share: tuple[str, ...], expected: dict[str, Any]) -> None:
    old, new = Shared(items=[1]), Shared(items=[1, 2], name="z")
    assert StateMap(share=share).output(SCHEMA, old, new) == expected
    assert StateMap(share=share).input(old) == {f: Replace(getattr(old, f)) for f in share}
