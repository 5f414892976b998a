"""A node's in-place changes to its state are validated like any write, nested models included."""

from __future__ import annotations

from typing import Annotated, Any

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from pydantic import BaseModel, Field, PrivateAttr, ValidationError

from nodestep import (
    END,
    START,
    BaseState,
    Graph,
    InMemoryStateStore,
    StateUpdateError,
    add,
    merge_dict,
    node,
)


class Line(BaseModel):
    sku: str = ""
    qty: int = 1


class Address(BaseModel):
    city: str = ""
    zip: int = 0


class Order(BaseModel):
    lines: list[Line] = Field(default_factory=list)


class Shop(BaseState):
    ship_to: Address = Field(default_factory=Address)
    addresses: list[Address] = Field(default_factory=lambda: [Address()])
    order: Order = Field(default_factory=Order)
    history: Annotated[list[Address], add] = Field(default_factory=list)
    by_name: Annotated[dict[str, Address], merge_dict] = Field(default_factory=dict)


def _run(change: Any, store: Any = None, input: dict[str, Any] | None = None) -> Shop:
    @node(name="change")
    def change_it(state: Shop) -> Shop:
        change(state)
        return state

    graph = Graph(Shop, state_store=store).flow(START >> change_it, change_it >> END)
    kwargs = {"thread_id": "t"} if store is not None else {}
    return graph.invoke(input or {}, **kwargs).state


def _set_zip(state: Shop) -> None:
    state.ship_to.zip = "not a number"  # type: ignore[assignment]


def _set_item_zip(state: Shop) -> None:
    state.addresses[0].zip = "not a number"  # type: ignore[assignment]


def _set_line_qty(state: Shop) -> None:
    state.order.lines.append(Line())
    state.order.lines[0].qty = "many"  # type: ignore[assignment]


@pytest.mark.parametrize("with_store", [False, True])
@pytest.mark.parametrize(
    ("change", "field", "where"),
    [
        (_set_zip, "ship_to", "at zip"),
        (_set_item_zip, "addresses", "at 0.zip"),
        (_set_line_qty, "order", "at lines.0.qty"),
    ],
)
def test_an_in_place_change_of_a_nested_model_to_a_wrong_type_is_refused_naming_the_field(
    change: Any, field: str, where: str, with_store: bool
) -> None:
    with pytest.raises(StateUpdateError) as info:
        _run(change, InMemoryStateStore() if with_store else None)
    message = str(info.value)
    assert message.startswith(
        f"Field '{field}' was changed in place by 'change' to an invalid value: Input should be "
        f"a valid integer"
    )
    assert f"({where})" in message
    assert "validate_assignment=True" in message
    assert (info.value.field, info.value.writer) == (field, "change")


def test_a_dict_appended_to_a_nested_models_list_becomes_the_model() -> None:
    def append(state: Shop) -> None:
        state.order.lines.append({"sku": "a", "qty": "2"})  # type: ignore[arg-type]

    for store in (None, InMemoryStateStore()):
        state = _run(append, store)
        assert state.order.lines == [Line(sku="a", qty=2)]


def test_a_dict_appended_to_an_add_field_of_models_becomes_the_model() -> None:
    def append(state: Shop) -> None:
        state.history.append({"city": "Oslo", "zip": "150"})  # type: ignore[arg-type]

    state = _run(append, input={"history": [{"city": "Rome"}]})
    assert state.history == [Address(city="Rome"), Address(city="Oslo", zip=150)]


def test_an_item_appended_to_an_add_field_and_changed_is_refused_at_its_index() -> None:
    def append(state: Shop) -> None:
        state.history.append(Address(city="Oslo"))
        state.history[-1].zip = "x"  # type: ignore[assignment]

    with pytest.raises(StateUpdateError, match=r"'history' was changed in place .* \(at 1\.zip\)"):
        _run(append, input={"history": [{"city": "Rome"}]})


def test_an_in_place_change_of_a_merge_dict_field_of_models_is_checked() -> None:
    def change(state: Shop) -> None:
        state.by_name["home"].zip = "x"  # type: ignore[assignment]

    with pytest.raises(StateUpdateError, match=r"'by_name' .* \(at home\.zip\)"):
        _run(change, input={"by_name": {"home": {"city": "Rome"}}})


def test_a_coercible_in_place_value_is_converted_as_a_write_would_be() -> None:
    def change(state: Shop) -> None:
        state.ship_to.zip = "0150"  # type: ignore[assignment]

    assert _run(change).ship_to == Address(zip=150)


class Tagged(BaseModel):
    name: str = ""
    note: str = Field(default="", exclude=True)
    _seen: int = PrivateAttr(default=0)


class Holder(BaseState):
    tag: Tagged = Field(default_factory=Tagged)


def test_a_valid_in_place_change_keeps_the_nodes_object_with_what_a_dump_leaves_out() -> None:
    kept: list[Any] = []

    @node
    def rename(state: Holder) -> Holder:
        state.tag.name = "new"
        state.tag._seen = 3
        kept.append(state.tag)
        return state

    graph = Graph(Holder).flow(START >> rename, rename >> END)
    tag = graph.invoke({"tag": {"note": "excluded"}}).state.tag
    assert (tag is kept[0], tag._seen, tag.note) == (True, 3, "excluded")


# -- a property: an in-place change is accepted exactly when pydantic accepts the value --

_VALUES = st.one_of(
    st.integers(min_value=-(2**40), max_value=2**40),
    st.text(max_size=6),
    st.floats(allow_nan=False, allow_infinity=False, width=32),
    st.booleans(),
    st.binary(max_size=3),
    st.none(),
    st.lists(st.integers(), max_size=2),
)
_HOLDER: dict[str, Any] = {}


def _put(place: str, state: Shop) -> None:
    value = _HOLDER["value"]
    if place == "model":
        state.ship_to.zip = value
    elif place == "list item":
        state.addresses[0].zip = value
    else:
        state.order.lines.append(Line())
        state.order.lines[-1].qty = value


_PLACES = {"model": ("ship_to", "zip"), "list item": ("addresses", "zip"), "deep": ("order", "qty")}
_GRAPHS: dict[str, Graph] = {}


def _graph(place: str) -> Graph:
    if place not in _GRAPHS:

        @node(name="change")
        def change(state: Shop) -> Shop:
            _put(place, state)
            return state

        _GRAPHS[place] = Graph(Shop).flow(START >> change, change >> END)
    return _GRAPHS[place]


@settings(max_examples=60, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(st.sampled_from(sorted(_PLACES)), _VALUES)
def test_an_in_place_change_of_a_nested_field_is_accepted_exactly_when_pydantic_accepts_it(
    place: str, value: Any
) -> None:
    field, leaf = _PLACES[place]
    model = Line if leaf == "qty" else Address
    try:
        expected: Any = getattr(model.model_validate({leaf: value}), leaf)
    except ValidationError:
        expected = None
    _HOLDER["value"] = value
    try:
        state = _graph(place).invoke({}).state
    except StateUpdateError as error:
        assert expected is None, f"refused {value!r}, which pydantic takes"
        assert (error.field, error.writer) == (field, "change")
        return
    assert expected is not None, f"took {value!r}, which pydantic refuses"
    nested = {"model": state.ship_to, "list item": state.addresses[0]}.get(place)
    got = getattr(nested if nested is not None else state.order.lines[-1], leaf)
    assert (got, type(got)) == (expected, type(expected))
