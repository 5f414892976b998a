"""A value that would read back as another type is refused when written, even if it is ==.

An ``IntEnum`` member equals its int and a ``StrEnum`` member its text, so where a field's
type also takes the plain value (``Any``, ``int | Color``) the member's JSON form reads back
as the plain value: the check that the JSON form reads back equal must compare types too.
"""

from __future__ import annotations

import copy
import enum
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pytest
from hypothesis import given
from hypothesis import strategies as st
from pydantic import BaseModel, Field

from nodestep import END, START, BaseState, FilesystemStateStore, Graph, StateStoreError, node
from nodestep._state.read_back import first_difference, is_json_data
from nodestep.store import StateStore


class Color(enum.IntEnum):
    RED = 1


class Mood(enum.StrEnum):
    HAPPY = "happy"


class Label(str):
    pass


class Holder(BaseModel):
    anything: Any = None


@dataclass
class Box:
    anything: Any = None


class Loose(BaseState):
    anything: Any = None
    by_name: dict[str, Any] = Field(default_factory=dict)
    items: list[Any] = Field(default_factory=list)
    pair: tuple[Any, ...] = ()
    color_or_int: Color | int = 0
    int_or_mood: str | Mood = ""
    holder: Holder | None = None
    box: Box | None = None
    color: Color = Color.RED
    mood: Mood = Mood.HAPPY
    plain: float | int = 0


def _graph(update: dict[str, Any], store: StateStore) -> Graph:
    @node
    def write(state: Loose) -> dict[str, Any]:
        return update

    return Graph(Loose, state_store=store).flow(START >> write, write >> END)


@pytest.mark.parametrize(
    ("update", "where", "kind", "plain"),
    [
        ({"anything": Color.RED}, "its value", "Color", "int"),
        ({"anything": Mood.HAPPY}, "its value", "Mood", "str"),
        ({"anything": Label("x")}, "its value", "Label", "str"),
        ({"by_name": {"k": Color.RED}}, "at ['k']", "Color", "int"),
        ({"items": [1, Mood.HAPPY]}, "at [1]", "Mood", "str"),
        ({"pair": (Color.RED,)}, "at [0]", "Color", "int"),
        ({"color_or_int": Color.RED}, "its value", "Color", "int"),
        ({"int_or_mood": Mood.HAPPY}, "its value", "Mood", "str"),
        ({"holder": Holder(anything=Color.RED)}, "at .anything", "Color", "int"),
        ({"box": Box(anything=Mood.HAPPY)}, "at .anything", "Mood", "str"),
    ],
    ids=[
        "any-intenum",
        "any-strenum",
        "any-str-subclass",
        "dict",
        "list",
        "tuple",
        "union-int",
        "union-str",
        "model",
        "dataclass",
    ],
)
def test_a_member_that_reads_back_as_its_plain_value_is_refused_when_written(
    store: StateStore, update: dict[str, Any], where: str, kind: str, plain: str
) -> None:
    graph = _graph(update, store)
    field = next(iter(update))
    with pytest.raises(StateStoreError) as caught:
        graph.invoke({}, thread_id="t")
    message = str(caught.value)
    assert message.startswith(f"Field '{field}' does not survive a JSON round trip")
    assert f"({where}: a {kind} comes back as {plain})" in message
    assert f"declare that place as {kind} alone, or store the plain {plain}." in message
    # Nothing of the write was stored, so nothing reads back different later.
    assert getattr(graph.get_state_sync("t").value, field) == Loose.model_fields[field].get_default(
        call_default_factory=True
    )


def test_update_state_refuses_a_member_that_reads_back_as_its_plain_value(
    tmp_path: Path,
) -> None:
    graph = _graph({}, FilesystemStateStore(tmp_path / "h.jsonl"))
    graph.invoke({}, thread_id="t")
    with pytest.raises(StateStoreError, match="at \\['k'\\]: a Color comes back as int"):
        graph.update_state_sync("t", {"by_name": {"k": Color.RED}})
    assert graph.get_state_sync("t").value.by_name == {}


def test_members_declared_as_their_enum_and_plain_values_read_back_as_written(
    store: StateStore,
) -> None:
    update = {
        "color": Color.RED,
        "mood": Mood.HAPPY,
        "anything": {"n": 1, "x": 1.5, "ok": True, "none": None, "s": "é"},
        "plain": 1,
        "color_or_int": 2,
    }
    graph = _graph(update, store)
    graph.invoke({}, thread_id="t")
    again = Graph(Loose, state_store=store).get_state_sync("t").value
    for name, value in update.items():
        back = getattr(again, name)
        assert back == value and type(back) is type(value), name


_json = st.recursive(
    st.none() | st.booleans() | st.integers() | st.floats(allow_nan=False) | st.text(),
    lambda inner: st.lists(inner, max_size=4) | st.dictionaries(st.text(), inner, max_size=4),
    max_leaves=12,
)


@pytest.mark.slow
@given(_json)
def test_json_data_is_its_own_read_back_and_an_enum_in_it_is_not(data: Any) -> None:
    assert is_json_data(data)
    assert first_difference(data, copy.deepcopy(data)) is None
    swapped = [data, Color.RED]
    assert not is_json_data(swapped)
    assert first_difference(swapped, [data, 1]) == ("[1]", Color.RED, 1)
