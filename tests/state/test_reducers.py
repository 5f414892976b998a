"""Reducers: replace, add, merge_dict, Replace, and any two-argument callable."""

from __future__ import annotations

import operator
from typing import Annotated, Any, ClassVar

import pytest
from pydantic import BaseModel, Field, ValidationInfo, model_validator

from nodestep import (
    END,
    START,
    BaseState,
    Command,
    Graph,
    GraphConfigError,
    InvalidUpdateError,
    Replace,
    StateUpdateError,
    add,
    merge_dict,
    node,
    replace,
)
from nodestep._state.channels import LastValueChannel, ReducerChannel
from nodestep._state.field_spec import REDUCER_CONTEXT
from nodestep._state.reducers import checks_field_type, is_reducer_candidate
from nodestep._state.schema import StateSchema


def test_replace_returns_the_update():
    assert replace([1, 2], [3]) == [3]
    assert replace(None, "x") == "x"


def test_add_appends_the_update_to_the_current_list():
    assert add([1, 2], [3, 4]) == [1, 2, 3, 4]


def test_add_treats_a_missing_current_value_as_empty():
    assert add(None, [1, 2]) == [1, 2]


@pytest.mark.parametrize(
    ("update", "kind"),
    [
        ("ab", "str"),
        ((1, 2), "tuple"),
        ({1, 2}, "set"),
        ({"a": 1}, "dict"),
        (iter([1]), "list_iterator"),
    ],
)
def test_add_refuses_an_update_that_is_not_a_list(update, kind):
    with pytest.raises(TypeError, match=f"add appends a list, got a {kind} as the update"):
        add([1], update)


def test_add_refuses_a_current_value_that_is_not_a_list():
    with pytest.raises(TypeError, match="add appends to a list, but the current value is a tuple"):
        add((1,), [2])


def test_add_returns_a_new_list_and_changes_neither_argument():
    current, update = [1], [2]
    result = add(current, update)
    result.append(99)
    assert current == [1]
    assert update == [2]


def test_merge_dict_merges_top_level_keys_with_the_update_winning():
    assert merge_dict({"a": 1, "b": 2}, {"b": 3, "c": 4}) == {"a": 1, "b": 3, "c": 4}


def test_merge_dict_is_shallow():
    assert merge_dict({"a": {"x": 1}}, {"a": {"y": 2}}) == {"a": {"y": 2}}


def test_merge_dict_treats_a_missing_current_value_as_empty_and_copies_it():
    update = {"a": 1}
    result = merge_dict(None, update)
    assert result == {"a": 1}
    assert result is not update


def test_merge_dict_cannot_remove_a_key():
    assert merge_dict({"a": 1}, {}) == {"a": 1}


def test_merge_dict_changes_neither_argument():
    current, update = {"a": 1}, {"b": 2}
    merge_dict(current, update)
    assert current == {"a": 1}
    assert update == {"b": 2}


def test_replace_wrapper_compares_by_value_and_shows_it():
    assert Replace([1]) == Replace([1])
    assert Replace([1]) != Replace([2])
    assert Replace(1) != 1
    assert repr(Replace([1])) == "Replace([1])"
    assert Replace("v").value == "v"


def test_replace_wrapper_hashes_as_it_compares():
    assert isinstance(hash(Replace(1)), int)
    assert hash(Replace("v")) == hash(Replace("v"))
    assert hash(Replace((1, 2))) == hash(Replace((1, 2)))
    assert len({Replace("v"), Replace("v"), Replace("w")}) == 2


def test_replace_of_an_unhashable_value_is_unhashable_like_a_tuple_of_one():
    with pytest.raises(TypeError, match="unhashable type: 'list'"):
        hash(Replace([1]))
    with pytest.raises(TypeError, match="unhashable type: 'list'"):
        hash(([1],))


def test_pydantic_metadata_is_not_taken_for_a_reducer():
    info = Field(ge=0)
    assert not is_reducer_candidate(info)
    assert not is_reducer_candidate(int)
    assert is_reducer_candidate(add)
    assert is_reducer_candidate(operator.add)


class Reduced(BaseState):
    plain: int = 0
    explicit_replace: Annotated[int, replace] = 0
    items: Annotated[list[str], add] = Field(default_factory=list)
    table: Annotated[dict[str, int], merge_dict] = Field(default_factory=dict)
    total: Annotated[int, operator.add] = 0
    bounded: Annotated[int, Field(ge=0), max] = 0


def test_fields_get_the_channel_of_their_reducer():
    channels = StateSchema.of(Reduced).channels
    assert type(channels["plain"]) is LastValueChannel
    assert type(channels["explicit_replace"]) is LastValueChannel
    assert type(channels["items"]) is ReducerChannel
    assert channels["items"].reducer is add
    assert channels["table"].reducer is merge_dict
    assert channels["total"].reducer is operator.add
    assert channels["bounded"].reducer is max


def _two_writers_graph(state_cls, update_a, update_b):
    @node(goto=["left", "right"])
    def fan(state):
        return Command(goto=["left", "right"])

    @node
    def left(state):
        return update_a

    @node
    def right(state):
        return update_b

    return Graph(state_cls).flow(START >> fan, left >> END, right >> END)


def test_operator_add_works_as_a_reducer_in_a_run():
    graph = _two_writers_graph(Reduced, {"total": 2}, {"total": 5})
    assert graph.invoke({"total": 1}).state.total == 8


def test_any_two_argument_callable_works_as_a_reducer_in_a_run():
    graph = _two_writers_graph(Reduced, {"bounded": 7}, {"bounded": 3})
    assert graph.invoke({}).state.bounded == 7


def test_add_field_gathers_writes_of_one_superstep_in_node_name_order():
    graph = _two_writers_graph(Reduced, {"items": ["from left"]}, {"items": ["from right"]})
    assert graph.invoke({"items": ["input"]}).state.items == ["input", "from left", "from right"]


def test_merge_dict_field_merges_writes_of_one_superstep():
    graph = _two_writers_graph(Reduced, {"table": {"a": 1, "z": 0}}, {"table": {"b": 2, "z": 9}})
    assert graph.invoke({}).state.table == {"a": 1, "b": 2, "z": 9}


def test_input_to_a_reducer_field_goes_through_the_reducer():
    @node
    def noop(state):
        return None

    graph = Graph(Reduced).flow(START >> noop, noop >> END)
    assert graph.invoke({"items": ["a"], "total": 3}).state.items == ["a"]


def test_replace_in_an_update_bypasses_the_reducer():
    @node
    def reset(state):
        return {"items": Replace(["only"]), "table": Replace({"k": 1})}

    graph = Graph(Reduced).flow(START >> reset, reset >> END)
    result = graph.invoke({"items": ["old"], "table": {"old": 0}})
    assert result.state.items == ["only"]
    assert result.state.table == {"k": 1}


def test_a_field_with_two_reducers_is_refused():
    class TwoReducers(BaseState):
        items: Annotated[list[int], add, operator.add] = Field(default_factory=list)

    with pytest.raises(GraphConfigError, match="Field 'items' of TwoReducers has 2 reducers"):
        Graph(TwoReducers)


def test_a_reducer_that_cannot_take_two_arguments_is_refused():
    def one_arg(x):
        return x

    class BadReducer(BaseState):
        items: Annotated[list[int], one_arg] = Field(default_factory=list)

    with pytest.raises(
        GraphConfigError, match=r"reducer of field 'items' of BadReducer cannot be called with two"
    ):
        Graph(BadReducer)


def _failing_reducer(current: int, update: int) -> int:
    raise ZeroDivisionError("no room left")


class Strict(BaseState):
    total: Annotated[int, _failing_reducer] = 0
    items: Annotated[list[int], add] = Field(default_factory=list)


def test_a_failing_reducer_raises_invalid_update_naming_field_and_node_with_the_cause():
    @node
    def bump(state: Strict) -> dict:
        return {"total": 1}

    graph = Graph(Strict).flow(START >> bump, bump >> END)
    with pytest.raises(
        InvalidUpdateError,
        match=r"The reducer _failing_reducer of field 'total' failed on the write from 'bump' "
        r"in step 0: ZeroDivisionError: no room left\. Write a value the reducer takes",
    ) as info:
        graph.invoke({})
    error = info.value
    assert (error.field, error.writer, error.writers, error.step) == ("total", "bump", ("bump",), 0)
    assert isinstance(error.__cause__, ZeroDivisionError)


def test_a_failing_reducer_on_the_input_names_the_input():
    graph = _two_writers_graph(Strict, {}, {})
    with pytest.raises(
        InvalidUpdateError, match="failed on the write from the input or update_state"
    ) as info:
        graph.invoke({"total": 3})
    assert isinstance(info.value.__cause__, ZeroDivisionError)


@pytest.mark.parametrize("update", ["ab", (1, 2), {1, 2}, {"a": 1}, None])
def test_add_field_refuses_a_write_that_is_not_a_list_naming_field_and_node(update):
    graph = _two_writers_graph(Strict, {"items": update}, {})
    with pytest.raises(
        StateUpdateError,
        match=rf"Field 'items' got a {type(update).__name__} from 'left', but its reducer add "
        r"appends lists only",
    ) as info:
        graph.invoke({})
    assert (info.value.field, info.value.writer) == ("items", "left")


def test_add_field_takes_replace_of_any_value_its_type_accepts():
    graph = _two_writers_graph(Strict, {"items": Replace((7, 8))}, {})
    assert graph.invoke({"items": [1]}).state.items == [7, 8]


def _sets_only_ints(annotation: object) -> str | None:
    return None if annotation == set[int] else "its values are sets of ints; use set[int]"


@checks_field_type(_sets_only_ints)
def union_of_sets(current: set[int] | None, update: set[int]) -> set[int]:
    return (current or set()) | update


def test_a_reducer_with_a_field_type_check_refuses_a_field_it_does_not_fit():
    class Fits(BaseState):
        seen: Annotated[set[int], union_of_sets] = Field(default_factory=set)

    class Misfit(BaseState):
        seen: Annotated[list[int], union_of_sets] = Field(default_factory=list)

    StateSchema(Fits)
    with pytest.raises(GraphConfigError) as caught:
        StateSchema(Misfit)
    assert str(caught.value) == (
        "Field 'seen' of Misfit uses the union_of_sets reducer, but its values are sets of "
        "ints; use set[int]."
    )


class _Instruction(BaseModel):
    """A value that only the reducer ``takes_instructions`` may take."""

    state_write_hint: ClassVar[str] = "An _Instruction works with takes_instructions only."

    @model_validator(mode="wrap")
    @classmethod
    def _check(cls, data: Any, handler: Any, info: ValidationInfo) -> Any:
        seen.append(None if info.context is None else info.context.get(REDUCER_CONTEXT, "-"))
        return handler(data)


seen: list[Any] = []


def takes_instructions(current: list[Any] | None, update: list[Any]) -> list[Any]:
    return [*(current or []), *update]


def test_a_write_is_validated_with_the_reducer_that_merges_it_in_its_context():
    class Held(BaseState):
        merged: Annotated[list[_Instruction], takes_instructions] = Field(default_factory=list)
        plain: list[_Instruction] = Field(default_factory=list)
        other: list[int] = Field(default_factory=list)

    schema = StateSchema(Held)
    one = _Instruction()
    seen.clear()
    schema.validate_update({"merged": [one], "plain": [one]}, "n")
    schema.validate_update({"merged": Replace([one])}, "n")
    assert seen == [takes_instructions, None, None]
    seen.clear()
    schema.values_from_json({"merged": [{}]})  # a stored value: no write, no context
    assert seen == [None]
    with pytest.raises(StateUpdateError) as caught:
        schema.validate_update({"other": [one]}, "n")
    assert str(caught.value).endswith("An _Instruction works with takes_instructions only.")
