"""Which field types need the type-by-type read-back check, and which only ``==``.

A place that admits a plain builtin where a subclass of it was written (an ``IntEnum``
member in an ``Any`` field) reads it back as the builtin, ``==`` to it; only there is the
slower type-by-type comparison needed. Everywhere else validation gives back the declared
type, and ``==`` is the whole check.
"""

from __future__ import annotations

import dataclasses
import enum
from typing import Annotated, Any, Literal, TypedDict

import pytest
from hypothesis import given
from hypothesis import strategies as st
from pydantic import BaseModel, ConfigDict, Field

from nodestep import END, START, BaseState, Graph, InMemoryStateStore, StateStoreError, node
from nodestep._state.read_back import may_read_back_as_base


class Color(enum.IntEnum):
    RED = 1


class Message(BaseModel):
    role: Literal["user", "assistant"] = "user"
    content: str | list[str] = ""
    tags: tuple[str, ...] = ()


class Loose(BaseModel):
    extra_data: Any = None


class Open(BaseModel):
    model_config = ConfigDict(extra="allow")


class Node(BaseModel):
    children: list[Node] = Field(default_factory=list)


@dataclasses.dataclass
class Point:
    x: int = 0
    meta: dict[str, Any] = dataclasses.field(default_factory=dict)


class Row(TypedDict):
    name: str


@pytest.mark.parametrize(
    "annotation",
    [str, int, Color, list[Message], dict[str, Message], Message | None, Node, Row,
     Annotated[list[int], "note"], Literal["a", "b"], tuple[int, str]],
)  # fmt: skip
def test_a_type_that_gives_back_what_it_declares_needs_only_equality(annotation: Any) -> None:
    assert may_read_back_as_base(annotation) is False


@pytest.mark.parametrize(
    "annotation",
    [Any, object, list, dict, list[Any], dict[str, Any], tuple[Any, ...], int | Color,
     str | Color, Loose, list[Loose], Open, Point],
)  # fmt: skip
def test_a_place_that_admits_a_plain_builtin_for_a_subclass_is_compared_by_type(
    annotation: Any,
) -> None:
    assert may_read_back_as_base(annotation) is True


class Board(BaseState):
    messages: list[Message] = Field(default_factory=list)
    notes: list[Loose] = Field(default_factory=list)


def test_the_check_still_refuses_an_enum_member_in_a_model_s_any_field() -> None:
    @node
    def write(state: Board) -> dict[str, Any]:
        return {"messages": [Message(content=["a", "b"])], "notes": [Loose(extra_data=Color.RED)]}

    graph = Graph(Board, state_store=InMemoryStateStore()).flow(START >> write, write >> END)
    with pytest.raises(StateStoreError, match="Field 'notes' does not survive a JSON round trip"):
        graph.invoke({}, thread_id="t")


_leaves = st.one_of(
    st.none(), st.booleans(), st.integers(-3, 3), st.text(max_size=2), st.sampled_from(list(Color))
)
_values = st.recursive(
    _leaves,
    lambda inner: st.one_of(
        st.lists(inner, max_size=3),
        st.dictionaries(st.one_of(st.text(max_size=2), st.integers(0, 2)), inner, max_size=3),
    ),
    max_leaves=8,
)


@given(_values, _values)
def test_the_quick_walk_finds_a_difference_wherever_the_placed_walk_does(a: Any, b: Any) -> None:
    # first_difference answers "the same" from the quick walk, and places a difference
    # with the slow one: the two must agree on "the same".
    from nodestep._state.read_back import _difference, _same, first_difference

    assert first_difference(a, b) == _difference(a, b, "")
    if _same(a, b):
        assert _difference(a, b, "") is None
