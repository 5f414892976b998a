"""A task input is stored only if its JSON form reads back as the same input.

The task validates its input from the stored form, in the live run as in a continuation or
a new process, so a value the form changes (an ``IntEnum`` member or a tuple in an ``Any``
field, a nan) is refused when it is sent, as a ``StateUpdateError`` of the sending node;
and a model's computed fields, which its validation may refuse, are left out of the form.
"""

from __future__ import annotations

import enum
from typing import Any

import pytest
from pydantic import BaseModel, ConfigDict, Field, computed_field

from nodestep import END, START, BaseState, Command, Graph, Send, StateUpdateError, node
from nodestep.store import StateStore
from store_helpers import reopened


class Color(enum.IntEnum):
    RED = 1


class Seen(BaseState):
    got: str = ""


class Item(BaseModel):
    anything: Any = None
    ratio: float | None = 0.0


class Sized(BaseModel):
    model_config = ConfigDict(extra="forbid")

    n: int = 0

    @computed_field  # type: ignore[prop-decorator]
    @property
    def double(self) -> int:
        return self.n * 2


class Aliased(BaseModel):
    page_no: int = Field(alias="pageNo")


@node(name="work")
def work_aliased(state: Seen, item: Aliased) -> dict[str, Any]:
    return {"got": repr(item)}


class Renamed(BaseModel):
    count: int = Field(default=0, serialization_alias="Count")


@node(name="work")
def work_renamed(state: Seen, item: Renamed) -> dict[str, Any]:
    return {"got": repr(item)}


@node(name="work")
def work_item(state: Seen, item: Item) -> dict[str, Any]:
    return {"got": repr(item)}


@node(name="work")
def work_sized(state: Seen, item: Sized) -> dict[str, Any]:
    return {"got": repr(item)}


def _graph(model: type[BaseModel], payload: dict[str, Any], store: StateStore | None) -> Graph:
    work = {Item: work_item, Sized: work_sized, Aliased: work_aliased, Renamed: work_renamed}[model]

    @node(goto=[work])
    def fan(state: Seen) -> Command:
        return Command(goto=[Send(work, payload)])

    return Graph(Seen, state_store=store).flow(START >> fan, work >> END)


@pytest.mark.parametrize(
    ("payload", "where"),
    [
        (
            {"anything": Color.RED},
            "at .anything: <Color.RED: 1> (a Color) comes back as 1 (an int)",
        ),
        ({"anything": (1, 2)}, "at .anything: (1, 2) (a tuple) comes back as [1, 2] (a list)"),
        ({"ratio": float("nan")}, "at .ratio: nan (a float) comes back as None (a NoneType)"),
    ],
    ids=["intenum", "tuple", "nan"],
)
def test_a_task_input_that_would_read_back_different_is_refused_when_sent(
    store: StateStore, payload: dict[str, Any], where: str
) -> None:
    graph = _graph(Item, payload, store)
    with pytest.raises(StateUpdateError) as caught:
        graph.invoke({}, thread_id="t")
    message = str(caught.value)
    assert message.startswith(
        f"The input Item that 'fan' sent 'work' does not survive a JSON round trip {where}."
    )
    assert message.endswith("A run with a state store stores every task input.")
    assert caught.value.writer == "fan"


def test_without_a_store_a_task_input_is_handed_over_as_it_is() -> None:
    graph = _graph(Item, {"anything": Color.RED}, None)
    assert graph.invoke({}).state.got == "Item(anything=<Color.RED: 1>, ratio=0.0)"


@pytest.mark.parametrize("stored", [True, False], ids=["store", "no-store"])
def test_a_task_input_with_a_computed_field_under_extra_forbid_runs(
    store: StateStore, stored: bool
) -> None:
    graph = _graph(Sized, {"n": 2}, store if stored else None)
    result = graph.invoke({}, thread_id="t" if stored else None)
    assert result.state.got == "Sized(n=2, double=4)"
    if stored:
        again = _graph(Sized, {"n": 2}, reopened(store))
        assert again.get_state_sync("t").value.got == "Sized(n=2, double=4)"


@pytest.mark.parametrize("stored", [True, False], ids=["store", "no-store"])
def test_a_task_input_is_sent_by_its_fields_aliases(store: StateStore, stored: bool) -> None:
    graph = _graph(Aliased, {"pageNo": 3}, store if stored else None)
    result = graph.invoke({}, thread_id="t" if stored else None)
    assert result.state.got == "Aliased(page_no=3)"
    if stored:
        again = _graph(Aliased, {"pageNo": 3}, reopened(store))
        assert again.get_state_sync("t").value.got == "Aliased(page_no=3)"


def test_a_task_input_sent_by_field_name_is_refused_naming_the_alias() -> None:
    graph = _graph(Aliased, {"page_no": 3}, None)
    with pytest.raises(StateUpdateError) as caught:
        graph.invoke({})
    assert str(caught.value) == (
        "Node 'fan' sent 'work' the key 'page_no', which is not a field of its input model "
        "Aliased (fields: pageNo); the whole payload is the task's input. Add 'page_no' to "
        "Aliased, or leave it out of the payload."
    )


@pytest.mark.parametrize("stored", [True, False], ids=["store", "no-store"])
def test_a_task_input_with_a_serialization_alias_keeps_its_values(
    store: StateStore, stored: bool
) -> None:
    graph = _graph(Renamed, {"count": 3}, store if stored else None)
    assert graph.invoke({}, thread_id="t" if stored else None).state.got == "Renamed(count=3)"
