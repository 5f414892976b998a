"""A field holding None that its type does not take is refused when stored, not when loaded.

Defaults are not validated, so ``name: str = None`` gives a thread a None its type
refuses. The store used to keep it, and every later load (a new process, a fork, an
older event) failed, as if the class had changed since; it is refused in the run that
would store it, with the fix.
"""

from __future__ import annotations

from typing import Any

import pytest
from pydantic import BaseModel

from nodestep import END, START, BaseState, Graph, StateStoreError, node
from nodestep.store import StateStore


class Line(BaseModel):
    sku: str = ""


def _graph(annotation: Any, store: StateStore | None) -> Graph[Any]:
    class Order(BaseState):
        value: annotation = None  # type: ignore[valid-type]
        count: int = 0

    @node
    def tally(state: Order) -> dict[str, Any]:
        return {"count": state.count + 1}

    return Graph(Order, state_store=store).flow(START >> tally, tally >> END)


@pytest.mark.parametrize(
    ("annotation", "shown"),
    [
        (str, "str"),
        (int, "int"),
        (list[str], "list[str]"),
        (dict[str, Any], "dict[str, Any]"),
        (list[Line], f"list[{Line.__module__}.Line]"),
        (Line, "Line"),
    ],
    ids=["str", "int", "list", "dict-any", "list-model", "model"],
)
def test_a_none_default_the_type_refuses_is_refused_when_stored(
    store: StateStore, annotation: Any, shown: str
) -> None:
    graph = _graph(annotation, store)
    with pytest.raises(StateStoreError) as caught:
        graph.invoke({}, thread_id="t")
    assert str(caught.value) == (
        f"Field 'value' holds None, which its type {shown} does not take, so it could not be "
        f"loaded back (a default of None?). Declare the field as {shown} | None, or give it "
        f"a default of its type."
    )


def test_a_none_default_is_refused_even_when_the_input_writes_the_field(
    store: StateStore,
) -> None:
    # A new thread's first checkpoint holds the defaults, which a load at that event
    # (time travel, a fork, a new process before the next checkpoint) reads.
    graph = _graph(list[str], store)
    with pytest.raises(StateStoreError, match=r"^Field 'value' holds None"):
        graph.invoke({"value": ["a"]}, thread_id="t")


def test_a_none_default_of_an_optional_type_is_stored(store: StateStore) -> None:
    graph = _graph(list[str] | None, store)
    graph.invoke({}, thread_id="t")
    assert _graph(list[str] | None, store).load_sync("t")["value"] is None


def test_without_a_store_a_none_default_stays_in_memory() -> None:
    graph = _graph(list[str], None)
    assert graph.invoke({}).state.value is None
