"""A state read as LangGraph's dict state is: the usual error, naming the nodestep way."""

from __future__ import annotations

import pytest
from pydantic import PrivateAttr

from nodestep import BaseState


class Ticket(BaseState):
    title: str = ""
    priority: int = 0


class WithGetField(BaseState):
    get: int = 3


class WithPrivate(BaseState):
    title: str = ""
    _seen: int = PrivateAttr(default=7)


def test_reading_a_field_by_key_is_a_type_error_naming_the_attribute() -> None:
    with pytest.raises(TypeError) as caught:
        Ticket()["title"]  # type: ignore[index]
    assert str(caught.value) == (
        "'Ticket' object is not subscriptable: a state is read by attribute, state.title"
    )


@pytest.mark.parametrize(
    ("key", "way"), [("two words", "getattr(state, 'two words')"), (0, "state.<field>")]
)
def test_a_key_that_is_no_identifier_names_getattr_or_the_attribute_form(
    key: object, way: str
) -> None:
    with pytest.raises(TypeError, match=r"not subscriptable: a state is read by attribute, "):
        Ticket()[key]  # type: ignore[index]
    with pytest.raises(TypeError) as caught:
        Ticket()[key]  # type: ignore[index]
    assert str(caught.value).endswith(way)


def test_assigning_a_key_is_a_type_error_naming_the_update_a_node_returns() -> None:
    state = Ticket()
    with pytest.raises(TypeError) as caught:
        state["priority"] = 2  # type: ignore[index]
    assert str(caught.value) == (
        "'Ticket' object does not support item assignment: a node returns its updates, "
        "return {'priority': ...}"
    )
    assert state.priority == 0


def test_get_is_an_attribute_error_naming_the_attribute_and_getattr() -> None:
    state = Ticket()
    with pytest.raises(AttributeError) as caught:
        state.get("title")  # type: ignore[attr-defined]
    assert str(caught.value) == (
        "'Ticket' object has no attribute 'get': a state is read by attribute, "
        "state.<field>, or getattr(state, name, default) for a name held in a variable"
    )
    assert (caught.value.name, caught.value.obj) == ("get", state)
    assert not hasattr(state, "get")


def test_a_field_named_get_is_read_as_any_field() -> None:
    assert WithGetField().get == 3


def test_other_missing_attributes_and_private_attributes_behave_as_pydantic_has_them() -> None:
    with pytest.raises(AttributeError) as caught:
        Ticket().titel  # type: ignore[attr-defined]  # noqa: B018
    assert str(caught.value) == "'Ticket' object has no attribute 'titel'"
    state = WithPrivate()
    assert state._seen == 7
    with pytest.raises(AttributeError, match=r"^'WithPrivate' object has no attribute '_other'$"):
        state._other  # type: ignore[attr-defined]  # noqa: B018
