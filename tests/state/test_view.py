"""The lazy per-task copy of the state: mutable fields are deep-copied on first read."""

from __future__ import annotations

import collections
import copy
import math
from datetime import UTC, datetime, timedelta, timezone
from typing import Annotated, Any

import anyio
import orjson
import pytest
from hypothesis import given
from hypothesis import strategies as st
from pydantic import BaseModel, ConfigDict, Field

from nodestep import END, START, BaseState, Command, Graph, add, node
from nodestep._state.field_types import has_exact_form, shallow_container
from nodestep._state.schema import StateSchema
from nodestep._state.view import touched_fields


class Counted:
    """A mutable value that counts how often it is deep-copied."""

    copies = 0

    def __init__(self, items: list[int] | None = None) -> None:
        self.items = list(items or [])

    def __deepcopy__(self, memo: dict[int, Any]) -> Counted:
        type(self).copies += 1
        return Counted(self.items)

    def __eq__(self, other: object) -> bool:
        return isinstance(other, Counted) and other.items == self.items

    __hash__ = None  # type: ignore[assignment]


class Frozen(BaseModel):
    model_config = ConfigDict(frozen=True)
    name: str = ""


class Heavy(BaseState):
    model_config = ConfigDict(arbitrary_types_allowed=True)

    count: int = 0
    big: Any = Field(default_factory=Counted)
    frozen: Frozen = Field(default_factory=Frozen)
    log: Annotated[list[str], add] = Field(default_factory=list)


class Plain(BaseState):
    count: int = 0
    items: list[int] = Field(default_factory=list)
    log: Annotated[list[str], add] = Field(default_factory=list)
    table: dict[str, int] = Field(default_factory=dict)


PLAIN = StateSchema.of(Plain)


def _originals() -> dict[str, Any]:
    return {"count": 1, "items": [1, 2], "log": ["a"], "table": {"k": 1}}


def test_changing_a_copy_in_place_leaves_the_originals_unchanged():
    originals = _originals()
    view: Any = PLAIN.view(originals)
    view.items.append(3)
    view.table["j"] = 2
    view.log.append("b")
    assert originals == _originals()
    assert view.items == [1, 2, 3]


def test_two_copies_over_the_same_originals_are_independent():
    originals = _originals()
    first: Any = PLAIN.view(originals)
    second: Any = PLAIN.view(originals)
    first.items.append(3)
    assert second.items == [1, 2]


def test_a_mutable_field_is_copied_once_on_first_read():
    Counted.copies = 0
    schema = StateSchema.of(Heavy)
    view: Any = schema.view({"count": 0, "big": Counted([1]), "frozen": Frozen(), "log": []})
    first = view.big
    second = view.big
    assert first is second
    assert Counted.copies == 1


def test_unread_fields_are_not_copied():
    Counted.copies = 0
    schema = StateSchema.of(Heavy)
    view: Any = schema.view({"count": 0, "big": Counted([1]), "frozen": Frozen(), "log": []})
    assert view.count == 0
    view.log.append("x")
    assert Counted.copies == 0


def test_immutable_fields_are_shared_not_copied():
    schema = StateSchema.of(Heavy)
    frozen = Frozen(name="f")
    view: Any = schema.view({"count": 0, "big": Counted(), "frozen": frozen, "log": []})
    assert view.frozen is frozen


def test_touched_fields_lists_only_changed_fields():
    originals = _originals()
    view: Any = PLAIN.view(originals)
    _ = view.table  # read (so copied) but left equal
    view.items.append(3)
    view.count = 5
    assert touched_fields(view, originals) == [("count", 5), ("items", [1, 2, 3])]


def test_the_copy_behaves_as_the_declared_class():
    originals = _originals()
    view: Any = PLAIN.view(originals)
    instance = Plain(**_originals())
    assert isinstance(view, Plain)
    assert type(view).__name__ == "Plain"
    assert str(view) == str(instance)
    assert view == instance
    assert dict(view) == dict(instance)
    assert view.model_dump() == instance.model_dump()


@node
def read_count_only(state: Heavy):
    return {"count": state.count + 1}


def test_a_run_does_not_copy_fields_no_node_reads():
    graph = Graph(Heavy).flow(
        START >> read_count_only,
        read_count_only >> read_count_only_again,
        read_count_only_again >> END,
    )
    Counted.copies = 0
    result = graph.invoke({"big": Counted(list(range(5)))})
    assert result.state.count == 2
    assert Counted.copies == 1  # the input's own copy, kept apart from the caller's object


@node
def read_count_only_again(state: Heavy):
    return {"count": state.count + 1}


def test_a_node_changing_its_copy_in_place_does_not_affect_another_task():
    seen: dict[str, Any] = {}
    mutated: list[anyio.Event] = []  # made by fan, on the run's event loop

    @node(goto=["mutator", "reader"])
    def fan(state: Plain):
        mutated.append(anyio.Event())
        return Command(goto=["mutator", "reader"])

    @node
    async def mutator(state: Plain):
        state.items.append(99)
        state.table["mutated"] = 1
        mutated[0].set()
        return state

    @node
    async def reader(state: Plain):
        await mutated[0].wait()  # reads after the mutator changed its own copy
        seen["items"] = list(state.items)
        seen["table"] = dict(state.table)
        return None

    graph = Graph(Plain).flow(START >> fan, mutator >> END, reader >> END)
    result = graph.invoke({"items": [1], "table": {"k": 1}})
    assert seen == {"items": [1], "table": {"k": 1}}
    assert result.state.items == [1, 99]
    assert result.state.table == {"k": 1, "mutated": 1}


class FrozenHolder(BaseModel):
    model_config = ConfigDict(frozen=True)
    items: list[int] = Field(default_factory=list)


class WithFrozen(BaseState):
    holder: FrozenHolder = Field(default_factory=FrozenHolder)


def test_changing_a_list_inside_a_frozen_model_field_affects_no_other_task():
    # A frozen pydantic model is only shallowly immutable: its list can still change, so it
    # must be copied like any mutable field.
    seen: dict[str, Any] = {}
    mutated: list[anyio.Event] = []  # made by fan, on the run's event loop

    @node(goto=["mutator", "reader"])
    def fan(state: WithFrozen):
        mutated.append(anyio.Event())
        return Command(goto=["mutator", "reader"])

    @node
    async def mutator(state: WithFrozen):
        state.holder.items.append(99)
        mutated[0].set()
        return state

    @node
    async def reader(state: WithFrozen):
        await mutated[0].wait()  # reads after the mutator changed its own copy
        seen["items"] = list(state.holder.items)
        return None

    graph = Graph(WithFrozen).flow(START >> fan, mutator >> END, reader >> END)
    graph.invoke({"holder": {"items": [1]}})
    assert seen["items"] == [1]


def test_changing_a_list_inside_a_frozen_model_field_leaves_the_originals_unchanged():
    schema = StateSchema.of(WithFrozen)
    originals = {"holder": FrozenHolder(items=[1])}
    view: Any = schema.view(originals)
    view.holder.items.append(2)
    assert originals["holder"].items == [1]


class Pickled(BaseState):
    votes: list[str] = Field(default_factory=list)
    count: int = 0


def test_a_nodes_state_pickles_as_the_declared_class_with_its_current_values():
    import pickle

    seen: list[Any] = []

    @node
    def keep(state: Pickled) -> Pickled:
        state.votes.append("b")
        seen.append(pickle.loads(pickle.dumps(state)))
        return state

    result = Graph(Pickled).flow(START >> keep, keep >> END).invoke({"votes": ["a"]})
    (copy,) = seen
    assert type(copy) is Pickled
    assert copy == Pickled(votes=["a", "b"], count=0)
    assert result.state.votes == ["a", "b"]


# -- changes that compare equal but are stored differently ---------------------------------


class Loose(BaseState):
    anything: Any = 1
    ratio: float = 0.0
    when: datetime = datetime(2024, 1, 1, tzinfo=UTC)
    amounts: list[Any] = Field(default_factory=lambda: [1])
    names: list[str] = Field(default_factory=lambda: ["a"])


LOOSE = StateSchema.of(Loose)


def _loose() -> dict[str, Any]:
    return LOOSE.defaults()


@pytest.mark.parametrize(
    ("field", "new"),
    [
        ("anything", 1.0),
        ("anything", True),
        ("ratio", -0.0),
        ("when", datetime(2024, 1, 1, 2, tzinfo=timezone(timedelta(hours=2)))),
        ("amounts", [1.0]),
        ("amounts", [True]),
    ],
)
def test_an_equal_value_with_another_stored_form_counts_as_changed(field, new):
    originals = _loose()
    view: Any = LOOSE.view(originals)
    assert new == originals[field]
    setattr(view, field, new)
    assert touched_fields(view, originals) == [(field, new)]


def test_an_equal_value_with_the_same_stored_form_is_not_a_change():
    originals = _loose()
    view: Any = LOOSE.view(originals)
    view.anything = 1
    view.ratio = 0.0
    view.when = datetime(2024, 1, 1, tzinfo=UTC)
    _ = view.amounts, view.names  # read, so copied, and left equal
    assert touched_fields(view, originals) == []


def test_fields_whose_equal_values_are_stored_alike_skip_the_stored_form_check():
    assert LOOSE.view_cls._nodestep_exact == frozenset({"names"})  # type: ignore[attr-defined]


@pytest.mark.parametrize(
    ("annotation", "exact"),
    [
        (list[str], True),
        (dict[str, int], True),
        (int | None, True),
        (Frozen, True),
        (float, False),
        (datetime, False),
        (Any, False),
        (list, False),
        (int | bool, False),
    ],
)
def test_has_exact_form_tells_types_whose_equal_values_are_stored_alike(annotation, exact):
    assert has_exact_form(annotation) is exact


_json_values = st.recursive(
    st.none()
    | st.booleans()
    | st.integers(-(2**53), 2**53)
    | st.floats(allow_nan=False, allow_infinity=False)
    | st.text(max_size=5),
    lambda inner: (
        st.lists(inner, max_size=3) | st.dictionaries(st.text(max_size=3), inner, max_size=3)
    ),
    max_leaves=8,
)


def _retyped(value: Any) -> Any:
    """An equal value with another stored form where there is one: 1 -> 1.0, 0.0 -> -0.0."""
    if type(value) is bool:
        return int(value)
    if type(value) is int:
        return float(value)
    if type(value) is float:
        return -value if value == 0 else value
    if isinstance(value, list):
        return [_retyped(v) for v in value]
    if isinstance(value, dict):
        return {k: _retyped(v) for k, v in value.items()}
    return value


@given(old=_json_values, data=st.data())
def test_an_in_place_change_is_seen_exactly_when_the_stored_form_changes(old, data):
    new = data.draw(st.sampled_from([copy.deepcopy(old), _retyped(old)]) | _json_values)
    originals = {**_loose(), "anything": old}
    view: Any = LOOSE.view(originals)
    view.anything = new
    changed = touched_fields(view, originals)
    stored_differently = orjson.dumps(new) != orjson.dumps(old)
    assert changed == ([("anything", new)] if stored_differently else [])


def test_a_node_setting_an_equal_value_of_another_type_in_place_is_kept():
    @node
    def retype(state: Loose) -> Loose:
        state.anything = 1.0
        state.ratio = -0.0
        return state

    state = Graph(Loose).flow(START >> retype, retype >> END).invoke({}).state
    assert type(state.anything) is float
    assert math.copysign(1.0, state.ratio) == -1.0


class Records(BaseState):
    table: dict[str, Frozen | None] = Field(default_factory=dict)
    names: list[Frozen] = Field(default_factory=list)
    nested: dict[str, list[int]] = Field(default_factory=dict)


RECORDS = StateSchema.of(Records)


def _records() -> dict[str, Any]:
    return {"table": {"a": Frozen(name="a")}, "names": [Frozen(name="n")], "nested": {"k": [1]}}


@pytest.mark.parametrize(
    ("annotation", "container"),
    [
        (dict[str, int], dict),
        (dict[str, Frozen | None], dict),
        (Annotated[dict[str, Frozen], add], dict),
        (list[str], list),
        (list[Frozen], list),
        (dict[str, list[int]], None),
        (dict[int, str], None),
        (dict[str, Any], None),
        (list[dict[str, int]], None),
        (dict, None),
        (list, None),
        (set[str], None),
        (Counted, None),
    ],
)
def test_shallow_container_names_containers_of_immutable_items_only(annotation, container):
    assert shallow_container(annotation) is container


def test_a_container_of_immutable_items_is_read_as_a_new_container_around_the_same_items():
    originals = _records()
    view: Any = RECORDS.view(originals)
    table, names = view.table, view.names
    assert table == originals["table"] and table is not originals["table"]
    assert names == originals["names"] and names is not originals["names"]
    assert table["a"] is originals["table"]["a"]  # frozen: shared, not copied
    assert names[0] is originals["names"][0]
    table["b"] = None
    names.append(Frozen(name="m"))
    assert originals == _records()
    assert touched_fields(view, originals) == [("table", table), ("names", names)]


def test_a_container_of_mutable_items_is_still_copied_deeply():
    originals = _records()
    view: Any = RECORDS.view(originals)
    view.nested["k"].append(2)
    assert originals["nested"] == {"k": [1]}
    assert touched_fields(view, originals) == [("nested", {"k": [1, 2]})]


def test_a_subclass_of_a_shallow_container_is_deep_copied_with_its_type():
    spec = RECORDS.fields["table"]
    value = collections.OrderedDict(a=Frozen(name="a"))
    copied = spec.copied(value)
    assert type(copied) is collections.OrderedDict
    assert copied == value and copied is not value


def test_the_callers_input_dict_of_immutable_items_is_not_the_state():
    @node
    def keep(state: Records):
        return {}

    given_table: dict[str, Frozen | None] = {"a": Frozen(name="a")}
    graph = Graph(Records).flow(START >> keep, keep >> END)
    state = graph.invoke({"table": given_table}).state
    given_table["b"] = Frozen(name="b")
    assert state.table == {"a": Frozen(name="a")}


class Immutables(BaseState):
    table: dict[str, int | None] = Field(default_factory=dict)


IMMUTABLES = StateSchema.of(Immutables)


@given(st.dictionaries(st.text(max_size=4), st.integers() | st.none(), max_size=6))
def test_reading_a_dict_of_immutable_items_equals_a_deep_copy(table):
    before = dict(table)
    view: Any = IMMUTABLES.view({"table": table})
    assert view.table == copy.deepcopy(table)
    view.table["new key"] = 1
    view.table.pop(next(iter(before), "new key"))
    assert table == before


class Anything(BaseState):
    things: dict[Any, Any] = Field(default_factory=dict)


@given(st.lists(st.sampled_from(["a", "b", ("t", 1), 7]), max_size=5), st.data())
def test_a_dict_of_mutable_items_is_copied_as_deepcopy_copies_it(keys, data):
    # FieldSpec.copied makes a plain dict's copy itself (deep_copy_dict): what the same
    # object held twice, a dict holding itself and keys of other types must come out as
    # deepcopy's own copy does.
    shared = Counted([1])
    value: dict[Any, Any] = {}
    for key in keys:
        value[key] = data.draw(st.sampled_from([shared, [shared], Counted([2]), None, "s"]))
    value["self"] = value
    Counted.copies = 0
    copied = StateSchema.of(Anything).fields["things"].copied(value, "input")
    made = Counted.copies
    Counted.copies = 0
    expected = copy.deepcopy(value)
    assert made == Counted.copies
    assert copied is not value and copied["self"] is copied
    assert list(copied) == list(expected)
    for key, item in copied.items():
        if key != "self":
            assert item == expected[key] and (item is value[key]) == (expected[key] is value[key])
    copies = [x for x in copied.values() if type(x) is Counted and x.items == [1]]
    held = [x[0] for x in copied.values() if type(x) is list]
    assert len({id(x) for x in copies + held}) <= 1
