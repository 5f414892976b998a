"""A node's private state is stored only if its JSON form reads back as the same value.

The next task, a resume and a new process get the model validated from the stored form, so
a value that form changes (a nan, an ``IntEnum`` member in an ``Any`` field, a secret, a
tuple) or cannot be read back from (a str appended to a ``list[int]``) fails the task that
wrote it, with the thread left as it was, never a later task or a silent change.
"""

from __future__ import annotations

import enum
from collections.abc import Callable
from typing import Any

import pytest
from pydantic import BaseModel, ConfigDict, Field, SecretStr, computed_field

from nodestep import END, START, BaseState, Graph, StateStoreError, node
from nodestep.store import StateStore
from store_helpers import reopened


class Color(enum.IntEnum):
    RED = 1


class Turn(BaseState):
    text: str = ""


class Scratch(BaseModel):
    anything: Any = None
    numbers: list[int] = Field(default_factory=list)
    total: float = 0.0
    key: SecretStr = SecretStr("")


def _graph(store: StateStore, change: Callable[[Scratch], None]) -> Graph[Turn]:
    @node(private_state=Scratch)
    def work(state: Turn, *, scratch: Scratch) -> None:
        change(scratch)

    return Graph(Turn, state_store=store).flow(START >> work, work >> END)


def _set_anything(value: Any) -> Callable[[Scratch], None]:
    def change(scratch: Scratch) -> None:
        scratch.anything = value

    return change


def _append_text(scratch: Scratch) -> None:
    scratch.numbers.append("many")  # type: ignore[arg-type]


def _set_secret(scratch: Scratch) -> None:
    scratch.key = SecretStr("hunter2")


@pytest.mark.parametrize(
    ("change", "message"),
    [
        (
            _set_anything(Color.RED),
            "does not survive a JSON round trip at .anything: <Color.RED: 1> (a Color) comes "
            "back as 1 (an int)",
        ),
        (
            _set_anything(float("nan")),
            "does not survive a JSON round trip at .anything: nan (a float) comes back as "
            "None (a NoneType)",
        ),
        (
            _set_anything((1, 2)),
            "at .anything: (1, 2) (a tuple) comes back as [1, 2] (a list)",
        ),
        (_set_anything({1: "one"}), "does not survive a JSON round trip at .anything[1]"),
        (_set_secret, "at .key: a SecretStr is stored masked, as '**********'"),
        (
            _append_text,
            "holds a value that does not fit the model: Input should be a valid "
            "integer, unable to parse string as an integer at .numbers[0]",
        ),
        (_set_anything(2**70), "cannot be stored as JSON at ['anything']"),
    ],
    ids=["intenum", "nan", "tuple", "int-key", "secret", "wrong-type", "big-int"],
)
def test_a_private_state_that_would_read_back_different_fails_its_task(
    store: StateStore, change: Callable[[Scratch], None], message: str
) -> None:
    graph = _graph(store, change)
    with pytest.raises(StateStoreError) as caught:
        graph.invoke({}, thread_id="t")
    assert str(caught.value).startswith("The private state of node 'work' (Scratch) ")
    assert message in str(caught.value)
    # Nothing was stored: the thread reads and runs on (this time without the change).
    assert graph.node_state_sync("t", "work") == Scratch()
    _graph(store, lambda scratch: None).invoke({}, thread_id="t")


def test_a_private_state_is_stored_in_the_form_its_model_validates_from(
    store: StateStore,
) -> None:
    class Counted(BaseModel):
        model_config = ConfigDict(extra="forbid")

        count: int = Field(default=0, alias="Count")
        total: float = 0.0

        @computed_field  # type: ignore[prop-decorator]
        @property
        def double(self) -> int:
            return self.count * 2

    @node(private_state=Counted)
    def work(state: Turn, *, counted: Counted) -> None:
        counted.count += 1
        counted.total = 3  # an int on a float field is kept as 3.0

    graph = Graph(Turn, state_store=store).flow(START >> work, work >> END)
    graph.invoke({}, thread_id="t")
    graph.invoke({}, thread_id="t")
    again = Graph(Turn, state_store=reopened(store)).flow(START >> work, work >> END)
    found = again.node_state_sync("t", work)
    assert (found.count, found.total, type(found.total)) == (2, 3.0, float)


class Renamed(BaseModel):
    count: int = Field(default=0, serialization_alias="Count")
    scratch: int = Field(default=0, exclude=True)


def test_a_private_state_with_a_serialization_alias_keeps_its_values(
    store: StateStore,
) -> None:
    @node(private_state=Renamed)
    def work(state: Turn, *, renamed: Renamed) -> None:
        renamed.count += 1

    graph = Graph(Turn, state_store=store).flow(START >> work, work >> END)
    graph.invoke({}, thread_id="t")
    graph.invoke({}, thread_id="t")
    again = Graph(Turn, state_store=reopened(store)).flow(START >> work, work >> END)
    assert again.node_state_sync("t", work).count == 2


def test_a_value_in_an_excluded_field_of_a_private_state_is_refused(store: StateStore) -> None:
    @node(private_state=Renamed)
    def work(state: Turn, *, renamed: Renamed) -> None:
        renamed.scratch = 3

    graph = Graph(Turn, state_store=store).flow(START >> work, work >> END)
    with pytest.raises(StateStoreError, match=r"at \.scratch: 3 \(an int\) comes back as 0"):
        graph.invoke({}, thread_id="t")
