"""The state schema: validation of input and updates, defaults, and the stored JSON form."""

from __future__ import annotations

import datetime as dt
from types import MappingProxyType
from typing import Annotated, Any, TypedDict

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from pydantic import BaseModel, ConfigDict, Field, Json

from nodestep import (
    END,
    START,
    BaseState,
    Graph,
    GraphConfigError,
    InMemoryStateStore,
    Replace,
    StateStoreError,
    StateUpdateError,
    add,
    merge_dict,
    node,
)
from nodestep._state.field_types import builds_new_values, keeps_instances
from nodestep._state.json import dump_json_object, load_json_object
from nodestep._state.schema import StateSchema

INT64 = st.integers(min_value=-(2**63), max_value=2**63 - 1)


class Point(BaseModel):
    x: int = 0
    label: str = ""


class Shape(BaseModel):
    name: str = ""
    points: list[Point] = Field(default_factory=list)
    tags: dict[str, int] = Field(default_factory=dict)


class Rich(BaseState):
    count: int = 0
    title: str = ""
    numbers: Annotated[list[int], add] = Field(default_factory=list)
    table: Annotated[dict[str, list[str]], merge_dict] = Field(default_factory=dict)
    shape: Shape = Field(default_factory=Shape)
    when: dt.datetime = dt.datetime(2024, 1, 1)
    maybe: int | None = None


class Poll(BaseState):
    votes: Annotated[list[str], add] = Field(default_factory=list)
    count: int = 0


SCHEMA = StateSchema.of(Rich)


# -- validation ---------------------------------------------------------------------------


def test_invalid_value_error_names_the_field_and_the_writer():
    with pytest.raises(StateUpdateError, match="Field 'count' got an invalid value") as info:
        SCHEMA.validate_update({"count": "many"}, "tally")
    assert info.value.field == "count"
    assert info.value.writer == "tally"
    message = str(info.value)
    assert message.startswith("Field 'count' got an invalid value from 'tally': ")
    assert message.endswith("Expected int.")


def test_invalid_nested_value_error_says_where_inside_the_field():
    with pytest.raises(StateUpdateError, match=r"\(at points\.0\.x\)") as info:
        SCHEMA.validate_update({"shape": {"points": [{"x": "nope"}]}}, "draw")
    assert info.value.field == "shape"


def test_update_to_an_unknown_field_names_it_the_writer_and_the_fields():
    with pytest.raises(StateUpdateError, match="'tally' wrote 'cuont'") as info:
        SCHEMA.validate_update({"cuont": 1}, "tally")
    assert info.value.field == "cuont"
    assert info.value.writer == "tally"
    assert "'tally' wrote 'cuont', which is not a field of Rich" in str(info.value)
    assert "Its fields are: count, title, numbers" in str(info.value)


def test_update_that_is_not_a_dict_is_refused_naming_the_writer():
    with pytest.raises(StateUpdateError, match="'tally' passed list as an update") as info:
        SCHEMA.validate_update([("count", 1)], "tally")  # type: ignore[arg-type]
    assert info.value.writer == "tally"


def test_update_that_is_a_mapping_but_no_dict_is_validated_as_a_dict():
    writes = SCHEMA.validate_update(MappingProxyType({"count": 2}), "tally")
    assert writes == [("count", 2, False)]


def test_update_that_is_another_model_is_refused():
    with pytest.raises(StateUpdateError, match="'input' passed a Point where a dict or a Rich"):
        SCHEMA.validate_update(Point(), "input")


def test_a_state_instance_as_update_replaces_every_field():
    writes = SCHEMA.validate_update(Rich(count=3), "input")
    assert [(name, replaced) for name, _, replaced in writes] == [
        (name, True) for name in Rich.model_fields
    ]
    assert dict((name, value) for name, value, _ in writes)["count"] == 3


def test_validation_returns_writes_in_update_order_and_marks_replace():
    writes = SCHEMA.validate_update({"title": "t", "numbers": Replace([1]), "count": 2}, "n")
    assert writes == [("title", "t", False), ("numbers", [1], True), ("count", 2, False)]


def test_validation_coerces_values_to_the_field_type():
    (write,) = SCHEMA.validate_update({"shape": {"name": "sq"}}, "n")
    assert isinstance(write[1], Shape)
    assert write[1].name == "sq"


def test_value_inside_replace_is_validated_too():
    with pytest.raises(StateUpdateError, match="Field 'numbers' got an invalid value from 'n'"):
        SCHEMA.validate_update({"numbers": Replace(["x"])}, "n")


def test_invalid_input_names_input_as_the_writer():
    @node
    def noop(state: Poll):
        return None

    graph = Graph(Poll).flow(START >> noop, noop >> END)
    with pytest.raises(StateUpdateError, match="from 'input'") as info:
        graph.invoke({"count": "x"})
    assert (info.value.field, info.value.writer) == ("count", "input")


def test_invalid_node_update_names_the_node_as_the_writer():
    @node
    def tally(state: Poll):
        return {"count": [1]}

    graph = Graph(Poll).flow(START >> tally, tally >> END)
    with pytest.raises(StateUpdateError, match="Field 'count' got an invalid value from 'tally'"):
        graph.invoke({})


def test_a_field_without_a_default_is_reported_with_its_fix():
    class NoDefault(BaseState):
        name: str

    @node
    def noop(state: NoDefault):
        return None

    with pytest.raises(GraphConfigError, match="Field 'name' of NoDefault has no default"):
        Graph(NoDefault).flow(START >> noop, noop >> END).invoke({})


def test_the_state_type_must_be_a_pydantic_model():
    with pytest.raises(GraphConfigError, match="The state type must be a pydantic model"):
        StateSchema(dict)  # type: ignore[arg-type]


def test_defaults_are_fresh_for_each_call():
    first, second = SCHEMA.defaults(), SCHEMA.defaults()
    first["numbers"].append(1)
    assert second["numbers"] == []


def test_state_str_reads_as_the_field_values():
    assert str(Poll(votes=["yes", "no"], count=2)) == "votes=['yes', 'no'] count=2"


def test_result_state_str_reads_as_the_field_values():
    @node
    def tally(state: Poll):
        return {"count": len(state.votes)}

    graph = Graph(Poll).flow(START >> tally, tally >> END)
    result = graph.invoke({"votes": ["yes", "no"]})
    assert str(result.state) == "votes=['yes', 'no'] count=2"
    assert type(result.state) is Poll


# -- JSON form ----------------------------------------------------------------------------

points = st.builds(Point, x=INT64, label=st.text(max_size=8))
shapes = st.builds(
    Shape,
    name=st.text(max_size=8),
    points=st.lists(points, max_size=3),
    tags=st.dictionaries(st.text(max_size=5), INT64, max_size=3),
)
datetimes = st.datetimes(timezones=st.none() | st.just(dt.UTC))
rich_values = st.fixed_dictionaries(
    {
        "count": INT64,
        "title": st.text(max_size=20),
        "numbers": st.lists(INT64, max_size=5),
        "table": st.dictionaries(
            st.text(max_size=5), st.lists(st.text(max_size=5), max_size=3), max_size=3
        ),
        "shape": shapes,
        "when": datetimes,
        "maybe": st.none() | INT64,
    }
)


@settings(max_examples=60, deadline=None)
@given(rich_values)
def test_values_survive_a_json_text_round_trip(values: dict[str, Any]):
    text = dump_json_object(SCHEMA.values_to_json(values), sort_keys=False)
    back = SCHEMA.values_from_json(load_json_object(text))
    assert back == values
    assert type(back["shape"]) is Shape
    assert type(back["when"]) is dt.datetime


@settings(max_examples=30, deadline=None)
@given(rich_values)
def test_writes_survive_a_json_round_trip_with_their_replace_marks(values: dict[str, Any]):
    update = dict(values)
    update["numbers"] = Replace(values["numbers"])
    writes = SCHEMA.validate_update(update, "n")
    data, replaced = SCHEMA.writes_to_json(writes)
    assert replaced == ["numbers"]
    text = dump_json_object(data, sort_keys=False)
    assert SCHEMA.writes_from_json(load_json_object(text), replaced) == writes


def test_json_form_of_a_datetime_and_a_nested_model_is_plain_data():
    data = SCHEMA.values_to_json(
        {**SCHEMA.defaults(), "when": dt.datetime(2024, 5, 6, 7, 8, 9), "shape": Shape(name="s")}
    )
    assert data["when"] == "2024-05-06T07:08:09"
    assert data["shape"] == {"name": "s", "points": [], "tags": {}}


def test_stored_values_missing_a_field_read_back_with_its_default():
    data = {"count": 4}
    values = SCHEMA.values_from_json(data)
    assert values["count"] == 4
    assert values["numbers"] == []


def test_stored_update_naming_an_unknown_field_is_a_store_error():
    with pytest.raises(StateStoreError, match="writes 'gone', which is not a field of Rich"):
        SCHEMA.writes_from_json({"gone": 1}, None)


class Handle:
    """An object with no JSON form, like a client or a file handle."""


class Loose(BaseState):
    handle: Any = None
    anything: Any = None
    ratio: float = 0.0


LOOSE = StateSchema.of(Loose)


def test_value_without_a_json_form_raises_store_error_naming_the_field():
    with pytest.raises(StateStoreError, match="Field 'handle' cannot be stored as JSON"):
        LOOSE.fields["handle"].to_json(Handle())


def test_nan_float_raises_store_error_naming_the_field():
    with pytest.raises(StateStoreError, match="Field 'ratio' holds a float that JSON cannot store"):
        LOOSE.fields["ratio"].to_json(float("nan"))


def test_value_that_comes_back_different_raises_store_error():
    with pytest.raises(
        StateStoreError, match="Field 'anything' does not survive a JSON round trip"
    ):
        LOOSE.fields["anything"].to_json((1, 2))


@node
def keep_handle(state: Loose):
    return {"handle": Handle()}


LOOSE_GRAPH = Graph(Loose).flow(START >> keep_handle, keep_handle >> END)


def test_value_without_a_json_form_is_fine_in_a_run_without_a_store():
    result = LOOSE_GRAPH.invoke({})
    assert isinstance(result.state.handle, Handle)


def test_value_without_a_json_form_raises_store_error_when_written_to_a_store():
    with pytest.raises(StateStoreError, match="Field 'handle' cannot be stored as JSON"):
        LOOSE_GRAPH.invoke({}, thread_id="t1", state_store=InMemoryStateStore())


def test_state_allowing_arbitrary_types_compiles_into_a_schema():
    # A field of a user class is valid pydantic with arbitrary_types_allowed; such values
    # live fine in a run without a store, like any other value without a JSON form.
    class Custom(BaseState):
        model_config = ConfigDict(arbitrary_types_allowed=True)

        handle: Handle | None = None

    schema = StateSchema.of(Custom)
    (write,) = schema.validate_update({"handle": Handle()}, "n")
    assert isinstance(write[1], Handle)


class Big(BaseState):
    value: int = 0


def test_int_beyond_64_bits_is_stored_or_refused_with_a_store_error():
    # JSON has no integer limit but orjson does: either keep the value or say it cannot be
    # stored, never let orjson's own TypeError escape.
    @node
    def grow(state: Big):
        return {"value": 2**70}

    graph = Graph(Big).flow(START >> grow, grow >> END)
    try:
        result = graph.invoke({}, thread_id="t1", state_store=InMemoryStateStore())
    except StateStoreError:
        return
    assert result.state.value == 2**70


def test_json_native_field_values_that_change_in_json_are_still_refused():
    class Loose(BaseState):
        items: list[Any] = Field(default_factory=list)

    spec = StateSchema.of(Loose).fields["items"]
    assert spec.json_native
    assert spec.to_json([{"a": 1}, "x", None]) == [{"a": 1}, "x", None]
    with pytest.raises(StateStoreError, match="does not survive a JSON round trip"):
        spec.to_json([(1, 2)])  # a tuple comes back as a list
    with pytest.raises(StateStoreError, match="does not survive a JSON round trip"):
        spec.to_json([float("nan")])


@pytest.mark.parametrize(
    ("annotation", "reducer", "shown"),
    [
        (Annotated[int, add], "add", "int"),
        (Annotated[str, add], "add", "str"),
        (Annotated[tuple[int, ...], add], "add", "tuple[int, ...]"),
        (Annotated[list[int] | str, add], "add", "list[int] | str"),
        (Annotated[list[int], merge_dict], "merge_dict", "list[int]"),
        (Annotated[int, merge_dict], "merge_dict", "int"),
    ],
)
def test_a_container_reducer_on_a_field_of_another_type_fails_when_compiled(
    annotation: Any, reducer: str, shown: str
) -> None:
    # The default is never validated: the reducer check comes first.
    bad = type("Bad", (BaseState,), {"__annotations__": {"field": annotation}, "field": None})
    expected = f"Field 'field' of Bad uses the {reducer} reducer, which"
    with pytest.raises(GraphConfigError, match=expected) as caught:
        Graph(bad)
    assert f"but its type is {shown}" in str(caught.value)
    assert "operator.add adds numbers" in str(caught.value)


def test_container_reducers_fit_lists_dicts_and_optional_ones() -> None:
    class Fits(BaseState):
        items: Annotated[list[str], add] = Field(default_factory=list)
        maybe: Annotated[list[int] | None, add] = None
        bare: Annotated[list, add] = Field(default_factory=list)
        table: Annotated[dict[str, int], merge_dict] = Field(default_factory=dict)

    assert set(Graph(Fits).schema.fields) == {"items", "maybe", "bare", "table"}


# -- the caller's objects -------------------------------------------------------------------


class Holding(BaseState):
    anything: Any = None
    shape: Shape = Field(default_factory=Shape)
    grid: list[list[int]] = Field(default_factory=list)


HOLDING = StateSchema.of(Holding)


def _nested_json() -> st.SearchStrategy[Any]:
    return st.recursive(
        st.integers() | st.text(max_size=3),
        lambda inner: st.lists(inner, max_size=3) | st.dictionaries(st.text(max_size=2), inner),
        max_leaves=6,
    ).map(lambda v: {"v": [v]})


@settings(max_examples=50)
@given(value=_nested_json())
@pytest.mark.parametrize("writer", ["input", "update_state"])
def test_values_from_the_caller_share_no_mutable_object_with_the_writes(writer, value):
    grid = [[1], [2]]
    shape = Shape(points=[Point(x=1)])
    writes = HOLDING.validate_update({"anything": value, "shape": shape, "grid": grid}, writer)
    written = {k: v for k, v, _ in writes}
    assert written == {"anything": value, "shape": shape, "grid": grid}
    value["v"].append("changed")
    shape.points.append(Point())
    grid[0].append(99)
    assert written["anything"] != value
    assert written["shape"].points == [Point(x=1)]
    assert written["grid"] == [[1], [2]]


def test_a_state_instance_as_input_shares_no_mutable_object_with_the_writes():
    given_state = Holding(anything={"k": [1]}, grid=[[1]])
    written = {k: v for k, v, _ in HOLDING.validate_update(given_state, "input")}
    given_state.anything["k"].append(2)
    given_state.grid[0].append(2)
    assert (written["anything"], written["grid"]) == ({"k": [1]}, [[1]])


@pytest.mark.parametrize(
    ("annotation", "builds"),
    [
        (list[str], True),
        (dict[str, list[int]], True),
        (int | None, True),
        (list, False),
        (Any, False),
        (Shape, False),
        (list[Shape], False),
    ],
)
def test_builds_new_values_tells_types_whose_validated_values_share_nothing(annotation, builds):
    assert builds_new_values(annotation) is builds


class Parcel(TypedDict):
    to: Point


class Note(TypedDict):
    text: str


@pytest.mark.parametrize(
    ("annotation", "keeps"),
    [
        (list[str], False),
        (dict[str, int], False),
        (Any, False),
        (Note, False),
        (Point, True),
        (list[Shape], True),
        (dict[str, Point] | None, True),
        (Annotated[list[Point], add], True),
        (Parcel, True),
    ],
)
def test_keeps_instances_tells_types_whose_values_may_hold_a_model_instance(annotation, keeps):
    assert keeps_instances(annotation) is keeps


def test_a_json_field_in_a_union_is_stored_as_json_text_and_reads_back():
    class Raw(BaseState):
        raw: Json[list[int]] | None = None

    schema = StateSchema.of(Raw)
    (value,) = [v for _, v, _ in schema.validate_update({"raw": "[1]"}, "n")]
    stored = schema.fields["raw"].to_json(value)
    assert (value, stored) == ([1], "[1]")
    assert schema.values_from_json({"raw": stored}) == {"raw": [1]}


def test_values_read_back_take_the_given_values_of_fields_the_json_leaves_out():
    held = [1, 2]
    values = SCHEMA.values_from_json({"count": 4}, {"numbers": held})
    assert list(values) == list(Rich.model_fields)  # the fields' order
    assert values["count"] == 4 and values["numbers"] is held
    assert values["title"] == Rich().title  # neither stored nor given: its default


def test_a_frozen_value_is_shared_not_copied():
    class Frozen(list[int]):
        __nodestep_frozen__ = True  # as a conversation's MessageList says

    spec = SCHEMA.fields["numbers"]
    held = Frozen([1, 2])
    assert spec.copied(held) is held
    plain = [1, 2]
    assert spec.copied(plain) is not plain  # a plain list is still copied
