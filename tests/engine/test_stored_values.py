"""Stored values: their JSON form round-trips through every store, a value stored under
another schema fails the load clearly, and a run never shares the caller's objects."""

from __future__ import annotations

from typing import Annotated, Any

import pytest
from pydantic import BaseModel, ConfigDict, Field, Json, ValidationError, computed_field

from nodestep import (
    END,
    START,
    BaseState,
    Command,
    Graph,
    InvalidUpdateError,
    Send,
    StateStoreError,
    StateUpdateError,
    add,
    node,
)
from nodestep.store import StateStore
from store_helpers import reopened

pytestmark = pytest.mark.anyio


# -- models that need their own stored form -------------------------------------------------


class Person(BaseModel):
    """Validated by alias only, so a dump by field name would not validate back."""

    first_name: str = Field(alias="firstName")


class Envelope(BaseModel):
    payload: Json[list[int]]


class Priced(BaseModel):
    model_config = ConfigDict(extra="forbid")
    net: int

    @computed_field  # type: ignore[prop-decorator]
    @property
    def gross(self) -> int:
        return self.net * 2


class Shelf(BaseState):
    person: Person | None = None
    envelope: Envelope | None = None
    priced: Priced | None = None
    raw: Json[list[int]] = Field(default_factory=list)
    people: Annotated[list[Person], add] = Field(default_factory=list)


@node
def stock(state: Shelf) -> dict[str, Any]:
    return {
        "person": {"firstName": "Ada"},
        "envelope": {"payload": "[1, 2]"},
        "priced": Priced(net=3),
        "raw": "[4]",
        "people": [Person(firstName="Bo")],
    }


async def test_models_with_aliases_json_and_computed_fields_round_trip_through_the_store(
    store: StateStore,
):
    graph = Graph(Shelf, state_store=store).flow(START >> stock, stock >> END)
    result = await graph.ainvoke({}, thread_id="shelf")
    # A new graph over the store (reopened, for the file store): nothing answers from memory.
    fresh = Graph(Shelf, state_store=reopened(store)).flow(START >> stock, stock >> END)
    loaded = await fresh.load("shelf")
    assert loaded == dict(result.state)
    assert loaded["person"] == Person(firstName="Ada")
    assert loaded["envelope"].payload == [1, 2]
    assert loaded["priced"].gross == 6
    assert loaded["raw"] == [4]
    assert loaded["people"] == [Person(firstName="Bo")]


async def test_stored_form_of_a_model_uses_aliases_and_leaves_out_computed_fields(
    store: StateStore,
):
    graph = Graph(Shelf, state_store=store).flow(START >> stock, stock >> END)
    await graph.ainvoke({}, thread_id="shelf")
    history = await graph.history("shelf")
    update = next(e for e in history if e.type == "superstep_completed").data["tasks"]["stock"]
    assert update["update"]["person"] == {"firstName": "Ada"}
    assert update["update"]["envelope"] == {"payload": "[1,2]"}
    assert update["update"]["priced"] == {"net": 3}
    assert update["update"]["raw"] == "[4]"


# -- values stored under another schema -----------------------------------------------------


class Before(BaseState):
    score: int = 0


class After(BaseState):
    score: list[int] = Field(default_factory=list)


@node
def score(state: Any) -> dict[str, Any]:
    return {}


async def test_a_stored_value_that_no_longer_fits_raises_store_error_naming_thread_event_field(
    store: StateStore,
):
    await (
        Graph(Before, state_store=store)
        .flow(START >> score, score >> END)
        .ainvoke({"score": 3}, thread_id="old")
    )
    first = (await store.read("old", "main"))[0]
    graph = Graph(After, state_store=reopened(store)).flow(START >> score, score >> END)
    for load in (graph.load, graph.get_state):
        with pytest.raises(
            StateStoreError,
            match=rf"Thread 'old' \(branch 'main'\) cannot be loaded: its event 1 \(id "
            rf"'{first['id']}', a 'checkpoint' record\) holds a value that no longer fits the "
            rf"state class\. The stored value of field 'score' does not fit its type "
            rf"list\[int\]: .*change the field's type back .*or migrate the stored history",
        ) as info:
            await load("old")
        assert isinstance(info.value.__cause__, ValidationError)


# -- the caller's objects -------------------------------------------------------------------


class Basket(BaseState):
    items: list[int] = Field(default_factory=list)
    meta: Any = None


@node
def keep(state: Basket) -> None:
    return None


def test_changing_the_input_model_after_the_call_leaves_the_result_unchanged():
    given = Basket(items=[1], meta={"k": [1]})
    result = Graph(Basket).flow(START >> keep, keep >> END).invoke(given)
    given.items.append(99)
    given.meta["k"].append(99)
    assert (result.state.items, result.state.meta) == ([1], {"k": [1]})


def test_changing_the_input_dict_values_after_the_call_leaves_the_result_unchanged():
    meta: dict[str, list[int]] = {"k": [1]}
    result = Graph(Basket).flow(START >> keep, keep >> END).invoke({"meta": meta})
    meta["k"].append(99)
    assert result.state.meta == {"k": [1]}


async def test_changing_update_state_values_after_the_call_leaves_the_thread_unchanged(
    store: StateStore,
):
    graph = Graph(Basket, state_store=store).flow(START >> keep, keep >> END)
    meta: dict[str, list[int]] = {"k": [1]}
    await graph.update_state("t", {"meta": meta}, create=True)
    meta["k"].append(99)
    assert (await graph.get_state("t")).value.meta == {"k": [1]}


# -- one node's tasks writing a plain field ------------------------------------------------


class Tally(BaseState):
    pick: int = 0
    seen: Annotated[list[int], add] = Field(default_factory=list)


def _edge_and_send(send_value: int) -> Graph:
    @node
    def worker(state: Tally) -> dict[str, Any]:
        return {"pick": state.pick or 7, "seen": [state.pick]}

    @node(goto=[worker])
    def start(state: Tally) -> Command:
        return Command(goto=[worker, Send(worker, {"pick": send_value})])

    return Graph(Tally).flow(START >> start, worker >> END)


def test_a_node_run_by_an_edge_and_a_send_writing_different_values_conflicts():
    with pytest.raises(
        InvalidUpdateError,
        match=r"Field 'pick' got writes from 'worker' in step 1; 2 tasks of one node wrote "
        r"different values to a plain field",
    ) as info:
        _edge_and_send(5).invoke({})
    assert (info.value.field, info.value.writers, info.value.step) == ("pick", ("worker",), 1)


def test_a_node_run_by_an_edge_and_a_send_writing_the_same_value_merges():
    state = _edge_and_send(7).invoke({}).state
    assert (state.pick, state.seen) == (7, [0, 7])


# -- merged values and errors ---------------------------------------------------------------


class Recent(BaseState):
    last: Annotated[list[int], add, Field(max_length=3)] = Field(default_factory=list)
    count: int = 0


def test_constraints_hold_for_the_merged_value_of_parallel_writes():
    @node
    def a(state: Recent) -> dict[str, Any]:
        return {"last": [1, 2]}

    @node
    def b(state: Recent) -> dict[str, Any]:
        return {"last": [3, 4]}

    @node(goto=[a, b])
    def fan(state: Recent) -> Command:
        return Command(goto=[a, b])

    graph = Graph(Recent).flow(START >> fan, a >> END, b >> END)
    with pytest.raises(
        InvalidUpdateError,
        match=r"Field 'last' breaks its constraints after merging the writes of 'a', 'b' in "
        r"step 1: List should have at most 3 items",
    ):
        graph.invoke({})


def test_constraints_hold_for_a_write_merged_with_the_input():
    @node
    def more(state: Recent) -> dict[str, Any]:
        return {"last": [3, 4]}

    graph = Graph(Recent).flow(START >> more, more >> END)
    with pytest.raises(InvalidUpdateError, match="merging the writes of 'more' in step 0"):
        graph.invoke({"last": [1, 2]})


def test_an_invalid_value_error_keeps_the_pydantic_error_as_its_cause():
    @node
    def bad(state: Recent) -> dict[str, Any]:
        return {"count": "many"}

    graph = Graph(Recent).flow(START >> bad, bad >> END)
    with pytest.raises(StateUpdateError, match="Field 'count' got an invalid value") as info:
        graph.invoke({})
    assert isinstance(info.value.__cause__, ValidationError)
