"""A reducer's result is checked against its field's type, as a plain write is.

A reducer's result is stored as the field's value; one of another type would sit in the
state until a load, or code far from the reducer, failed on it.
"""

from __future__ import annotations

import operator
from typing import Annotated, Any

import pytest
from pydantic import Field, ValidationError

from nodestep import (
    END,
    START,
    BaseState,
    Command,
    Graph,
    InMemoryStateStore,
    InvalidUpdateError,
    add,
    merge_dict,
    node,
)
from nodestep._state.channels import ReducerChannel
from nodestep._state.schema import StateSchema


def joined(current: list[int], update: list[int]) -> Any:
    return ",".join(str(n) for n in [*current, *update])  # a str, not a list[int]


def as_tuple(current: list[int], update: list[int]) -> Any:
    return (*current, *update)


def counted(current: list[int], update: list[int]) -> Any:
    return {"count": len(current) + len(update)}


class Numbers(BaseState):
    nums: Annotated[list[int], joined] = Field(default_factory=list)
    pairs: Annotated[list[int], as_tuple] = Field(default_factory=list)
    counts: Annotated[list[int], counted] = Field(default_factory=list)
    total: Annotated[int, operator.add] = 0


def _writing(update: dict[str, Any], store: InMemoryStateStore | None = None) -> Graph:
    @node
    def work(state: Numbers) -> dict[str, Any]:
        return update

    return Graph(Numbers, state_store=store).flow(START >> work, work >> END)


def test_a_reducer_that_returns_another_type_is_refused_naming_field_reducer_and_fix() -> None:
    with pytest.raises(InvalidUpdateError) as caught:
        _writing({"nums": [1, 2]}).invoke({})
    error = caught.value
    assert str(error) == (
        "The reducer joined of field 'nums' returned a str after merging the writes of "
        "'work' in step 0, which the field refuses: Input should be a valid list. A "
        "reducer's result is stored as the field's value, so it must fit the field's type "
        "list[int] and its constraints: make joined return a list[int]."
    )
    assert (error.field, error.writers, error.step) == ("nums", ("work",), 0)
    assert isinstance(error.__cause__, ValidationError)


def test_a_reducer_that_returns_a_dict_for_a_list_field_is_refused() -> None:
    with pytest.raises(InvalidUpdateError) as caught:
        _writing({"counts": [1]}).invoke({})
    assert str(caught.value).startswith(
        "The reducer counted of field 'counts' returned a dict after merging the writes of "
        "'work' in step 0, which the field refuses: Input should be a valid list."
    )


def test_a_wrong_result_from_the_input_names_the_input() -> None:
    with pytest.raises(InvalidUpdateError) as caught:
        _writing({}).invoke({"nums": [1]})
    assert "merging the writes of the input or update_state, which" in str(caught.value)


def test_a_refused_result_leaves_no_record_of_it_in_history() -> None:
    store = InMemoryStateStore()
    graph = _writing({"nums": [1, 2]}, store)
    with pytest.raises(InvalidUpdateError):
        graph.invoke({"total": 3}, thread_id="t")
    kinds = [e.type for e in graph.history_sync("t")]
    assert "superstep_completed" not in kinds
    assert kinds[-1] == "run_failed"
    assert graph.get_state_sync("t").value == Numbers(total=3)  # as before the step
    stored = [e.data for e in graph.history_sync("t")]
    assert "1,2" not in repr(stored)


def test_a_result_the_field_converts_is_stored_converted_like_a_write() -> None:
    store = InMemoryStateStore()
    graph = _writing({"pairs": [2]}, store)
    state = graph.invoke({"pairs": [1]}, thread_id="t").state
    assert state.pairs == [1, 2] and type(state.pairs) is list
    assert graph.get_state_sync("t").value.pairs == [1, 2]


def test_results_of_merges_in_one_step_are_checked_once_merged() -> None:
    @node(goto=["left", "right"])
    def fan(state: Numbers) -> Command:
        return Command(goto=["left", "right"])

    @node
    def left(state: Numbers) -> dict[str, Any]:
        return {"nums": [1]}

    @node
    def right(state: Numbers) -> dict[str, Any]:
        return {"nums": [2]}

    graph = Graph(Numbers).flow(START >> fan, left >> END, right >> END)
    with pytest.raises(InvalidUpdateError) as caught:
        graph.invoke({})
    assert "merging the writes of 'left', 'right' in step 1" in str(caught.value)
    assert caught.value.writers == ("left", "right")


def test_reducers_whose_results_always_fit_pay_for_no_check() -> None:
    from nodestep._state.reducers import keeps_field_type

    class Trusted(BaseState):
        items: Annotated[list[str], add] = Field(default_factory=list)
        maybe: Annotated[list[str] | None, operator.add] = None
        table: Annotated[dict[str, int], merge_dict] = Field(default_factory=dict)
        bounded: Annotated[list[str], add, Field(max_length=3)] = Field(default_factory=list)
        mixed: Annotated[list[int] | list[str], add] = Field(default_factory=list)
        total: Annotated[int, operator.add] = 0

    channels = StateSchema.of(Trusted).channels
    checks = {name: getattr(channels[name], "check", None) for name in channels}
    assert [name for name, check in checks.items() if check is None] == ["items", "maybe", "table"]
    assert all(isinstance(channels[name], ReducerChannel) for name in channels)
    assert not keeps_field_type(add, list[int] | list[str])  # a list of one type and another
    assert not keeps_field_type(max, int)


def test_an_int_result_of_an_int_field_is_kept_as_it_is() -> None:
    graph = _writing({"total": 2})
    assert graph.invoke({"total": 1}).state.total == 3


def forgot_to_return(current: list[int], update: list[int]) -> Any:
    current.extend(update)  # changes the current value, returns None


class Forgetful(BaseState):
    nums: Annotated[list[int], forgot_to_return] = Field(default_factory=list)


def test_a_reducer_that_returns_none_says_so() -> None:
    @node
    def work(state: Forgetful) -> dict[str, Any]:
        return {"nums": [1]}

    graph = Graph(Forgetful).flow(START >> work, work >> END)
    with pytest.raises(InvalidUpdateError) as caught:
        graph.invoke({})
    assert str(caught.value).startswith(
        "The reducer forgot_to_return of field 'nums' returned None after merging the writes "
        "of 'work' in step 0, which the field refuses: Input should be a valid list."
    )
