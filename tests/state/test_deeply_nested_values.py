"""A value nested too deeply is refused with a clear error naming its field, never a raw
``RecursionError``.

A store keeps values about 250 levels deep (its JSON encoders refuse a 255th, the record's
own levels included); without
a store a value goes as deep as ``copy.deepcopy`` can copy it, which the state does to
the caller's input and ``update_state`` values, a stream to the values it hands out, and
a node's view to a field it reads. Past that, each says which field, who wrote it, and
how deep a value may go.
"""

from __future__ import annotations

import sys
from collections.abc import Iterator
from typing import Any

import pytest

from nodestep import (
    END,
    START,
    BaseState,
    Graph,
    InMemoryStateStore,
    StateStoreError,
    StateUpdateError,
    node,
)

TOO_DEEP_TO_COPY = 5000  # past Python's default recursion limit, however deep the caller
FIX = "Flatten a deep tree"


@pytest.fixture(autouse=True)
def default_recursion_limit() -> Iterator[None]:
    """Run each test under Python's default recursion limit: a test that runs mypy in this
    process leaves it at 16,384, under which a copy of 5,000 levels succeeds."""
    was = sys.getrecursionlimit()
    sys.setrecursionlimit(1000)
    yield
    sys.setrecursionlimit(was)


def nested(depth: int) -> Any:
    value: Any = 1
    for _ in range(depth):
        value = [value]
    return value


class Tree(BaseState):
    tree: Any = None
    n: int = 0


def writes(depth: int) -> Any:
    @node(name="grow")
    def grow(state: Tree) -> dict[str, Any]:
        return {"tree": nested(depth)}

    return grow


@node
def count(state: Tree) -> dict[str, Any]:
    return {"n": state.n + 1}


@node
def read(state: Tree) -> dict[str, Any]:
    return {"n": len(state.tree)}


def _refused(caught: pytest.ExceptionInfo[StateUpdateError], writer: str | None) -> None:
    assert caught.value.field == "tree"
    assert caught.value.writer == writer
    assert "nested too deeply to copy" in str(caught.value)
    assert FIX in str(caught.value)


def test_input_nested_too_deeply_to_copy_is_refused_naming_the_field() -> None:
    graph = Graph(Tree).flow(START >> count, count >> END)
    with pytest.raises(StateUpdateError) as caught:
        graph.invoke({"tree": nested(TOO_DEEP_TO_COPY)})
    _refused(caught, "input")


def test_update_state_nested_too_deeply_to_copy_is_refused_naming_the_field() -> None:
    graph = Graph(Tree, state_store=InMemoryStateStore()).flow(START >> count, count >> END)
    with pytest.raises(StateUpdateError) as caught:
        graph.update_state_sync("t", {"tree": nested(TOO_DEEP_TO_COPY)}, create=True)
    _refused(caught, "update_state")


@pytest.mark.parametrize("mode", ["updates", "task_updates", "values"])
def test_a_stream_refuses_a_value_too_deep_to_copy_naming_the_field(mode: str) -> None:
    grow = writes(TOO_DEEP_TO_COPY)
    graph = Graph(Tree).flow(START >> grow, grow >> END)
    with pytest.raises(StateUpdateError) as caught:
        list(graph.stream({}, stream_mode=mode))
    _refused(caught, None if mode == "values" else "grow")


def test_a_node_reading_a_value_too_deep_to_copy_gets_a_clear_error() -> None:
    grow = writes(TOO_DEEP_TO_COPY)
    graph = Graph(Tree).flow(START >> grow, grow >> read, read >> END)
    with pytest.raises(StateUpdateError) as caught:
        graph.invoke({})
    _refused(caught, None)


def test_migrate_refuses_values_too_deep_to_copy() -> None:
    store = InMemoryStateStore()
    graph = Graph(Tree, state_store=store).flow(START >> count, count >> END)
    graph.invoke({}, thread_id="t")
    with pytest.raises(StateUpdateError, match="from 'migrate' nested too deeply") as caught:
        graph.migrate_sync("t", lambda values: {"tree": nested(TOO_DEEP_TO_COPY)}, from_state=Tree)
    assert FIX in str(caught.value)


@pytest.mark.parametrize("depth", [255, TOO_DEEP_TO_COPY])
def test_a_store_refuses_a_value_deeper_than_it_keeps_saying_how_deep(depth: int) -> None:
    grow = writes(depth)
    graph = Graph(Tree, state_store=InMemoryStateStore()).flow(START >> grow, grow >> END)
    with pytest.raises(StateStoreError, match="Field 'tree' cannot be stored as JSON: its") as e:
        graph.invoke({}, thread_id="t")
    assert FIX in str(e.value)


def test_a_value_as_deep_as_a_store_keeps_is_stored_and_read_back() -> None:
    grow = writes(240)
    store = InMemoryStateStore()
    graph = Graph(Tree, state_store=store).flow(START >> grow, grow >> read, read >> END)
    assert graph.invoke({}, thread_id="t").state.n == 1
    again = Graph(Tree, state_store=store).flow(START >> count, count >> END)
    assert again.get_state_sync("t").value.tree == nested(240)


def test_a_value_that_fits_its_field_but_not_the_record_is_refused_clearly() -> None:
    grow = writes(253)  # JSON data on its own; the record around it takes it past 254
    graph = Graph(Tree, state_store=InMemoryStateStore()).flow(START >> grow, grow >> END)
    with pytest.raises(StateStoreError, match=r"it nests too deeply .*Recursion limit") as e:
        graph.invoke({}, thread_id="t")
    assert "a list of nodes that name their parent's id" in str(e.value)
