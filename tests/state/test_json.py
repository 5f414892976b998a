"""JSON helpers: dump_json_object, load_json_object and to_json_value."""

from __future__ import annotations

import datetime as dt

import pytest
from pydantic import BaseModel

from nodestep import StateStoreError
from nodestep._state.json import dump_json_object, load_json_object, to_json_value


class Item(BaseModel):
    name: str
    price: int


def test_dump_sorts_keys_by_default_at_every_level():
    assert dump_json_object({"b": 1, "a": {"z": 1, "y": 2}}) == '{"a":{"y":2,"z":1},"b":1}'


def test_dump_without_sorting_keeps_the_dict_order():
    text = dump_json_object({"b": 1, "a": {"z": 1, "y": 2}}, sort_keys=False)
    assert text == '{"b":1,"a":{"z":1,"y":2}}'


def test_dump_returns_compact_text():
    text = dump_json_object({"a": [1, 2], "b": None})
    assert isinstance(text, str)
    assert " " not in text


def test_dump_converts_models_and_datetimes():
    text = dump_json_object({"item": Item(name="tea", price=3), "at": dt.date(2024, 1, 2)})
    assert text == '{"at":"2024-01-02","item":{"name":"tea","price":3}}'


def test_dump_of_a_value_without_a_json_form_raises_store_error():
    with pytest.raises(StateStoreError, match="cannot be stored as JSON"):
        dump_json_object({"handle": object()})


def test_to_json_value_names_what_was_converted_but_not_the_value():
    class Secret:
        def __repr__(self) -> str:
            return "Secret(password=hunter2)"

    with pytest.raises(StateStoreError, match=r"^The answer cannot be stored as JSON") as info:
        to_json_value({"k": Secret()}, what="The answer")
    assert "hunter2" not in str(info.value)


def test_to_json_value_returns_plain_data():
    assert to_json_value({"item": Item(name="x", price=1), "t": (1, 2)}) == {
        "item": {"name": "x", "price": 1},
        "t": [1, 2],
    }


def test_load_reads_an_object_from_text_or_bytes():
    assert load_json_object('{"a": [1, 2]}') == {"a": [1, 2]}
    assert load_json_object(b'{"a": null}') == {"a": None}


def test_load_round_trips_dump():
    obj = {"b": [1, {"c": "é"}], "a": 1.5, "n": None, "t": True}
    assert load_json_object(dump_json_object(obj)) == obj


def test_load_of_invalid_json_raises_store_error():
    with pytest.raises(StateStoreError, match=r"^Not valid JSON"):
        load_json_object('{"a": ')


def test_load_of_json_that_is_not_an_object_raises_store_error_naming_the_type():
    with pytest.raises(
        StateStoreError,
        match=r"^Expected a JSON object, found a list: pass the text of one JSON object",
    ):
        load_json_object("[1, 2]")
    with pytest.raises(StateStoreError, match="found a str"):
        load_json_object('"text"')


def test_dump_of_an_int_beyond_64_bits_is_json_or_a_store_error():
    # JSON allows any integer; orjson does not. Either write it, or raise the documented
    # StateStoreError: never orjson's own TypeError.
    try:
        text = dump_json_object({"v": 2**70})
    except StateStoreError:
        return
    assert load_json_object(text) == {"v": 2**70}


@pytest.mark.parametrize("given", [None, 42, {"a": 1}, ["{}"]], ids=["none", "int", "dict", "list"])
def test_load_of_something_that_is_not_text_says_what_it_takes(given):
    with pytest.raises(StateStoreError) as caught:
        load_json_object(given)
    assert str(caught.value) == (
        f"load_json_object takes the text of one JSON object, a str or bytes, got {given!r} "
        f"(a {type(given).__name__}). Pass the text dump_json_object wrote; a dict is already "
        f"loaded."
    )


def test_load_of_an_empty_list_says_it_is_no_object():
    with pytest.raises(StateStoreError, match=r"^Expected a JSON object, found a list"):
        load_json_object("[]")
