"""An MCP tool's input schema: what a model is shown, what is refused, how arguments are checked."""

from __future__ import annotations

from typing import Any

import jsonschema
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from pydantic import ValidationError

from nodestep import GraphConfigError
from nodestep.agents import MCPSchemaError
from nodestep.agents._mcp_schema import ArgumentsSchema

ORDER: dict[str, Any] = {
    "$schema": "https://json-schema.org/draft/2020-12/schema",
    "title": "order",
    "type": "object",
    "properties": {
        "items": {"type": "array", "items": {"$ref": "#/$defs/Item"}, "minItems": 1},
        "note": {"type": ["string", "null"]},
    },
    "required": ["items"],
    "$defs": {
        "Item": {
            "type": "object",
            "properties": {"sku": {"type": "string"}, "qty": {"type": "integer", "minimum": 1}},
            "required": ["sku", "qty"],
        }
    },
}


def _schema(schema: Any) -> ArgumentsSchema:
    return ArgumentsSchema("shop", "order", schema)


def test_the_model_is_shown_the_schema_without_its_dialect_and_title():
    shown = _schema(ORDER).shown
    assert "$schema" not in shown and "title" not in shown
    assert shown["$defs"] == ORDER["$defs"] and shown["required"] == ["items"]
    assert "$schema" in ORDER  # the server's listing is left as it was


def test_arguments_that_fit_pass_unchanged():
    args = {"items": [{"sku": "tea", "qty": 2}], "note": None}
    assert _schema(ORDER).check(args, "order_args") == args


def test_each_problem_is_reported_at_the_path_of_the_value():
    with pytest.raises(ValidationError) as caught:
        _schema(ORDER).check({"items": [{"sku": "tea", "qty": 0}, {"qty": "2"}]}, "order_args")
    found = {(e["loc"], e["msg"]) for e in caught.value.errors()}
    assert found == {
        (("items", 0, "qty"), "0 is less than the minimum of 1"),
        (("items", 1), "'sku' is a required property"),
        (("items", 1, "qty"), "'2' is not of type 'integer'"),
    }
    assert caught.value.title == "order_args"


@pytest.mark.parametrize(
    ("schema", "where", "problem"),
    [
        ({"type": "array"}, "", 'a tool\'s arguments are an object ("type": "object")'),
        ("object", "", "a tool's arguments are an object"),
        (
            {"type": "object", "properties": {"n": {"type": "integer", "minimum": "one"}}},
            "/properties/n/minimum",
            "it is not valid JSON Schema ('one' is not of type 'number')",
        ),
        (
            {"type": "object", "properties": {"n": {"$ref": "other.json#/n"}}},
            "/properties/n/$ref",
            "$ref 'other.json#/n' points outside the schema",
        ),
        (
            {"type": "object", "properties": {"n": {"$ref": "#/$defs/Missing"}}},
            "/properties/n/$ref",
            "$ref '#/$defs/Missing' points at nothing",
        ),
    ],
)
def test_a_schema_that_cannot_be_used_is_refused_naming_server_tool_and_part(
    schema: Any, where: str, problem: str
):
    with pytest.raises(MCPSchemaError) as caught:
        _schema(schema)
    error = caught.value
    assert isinstance(error, GraphConfigError)
    assert (error.server, error.tool, error.where) == ("shop", "order", where)
    assert problem in str(error)
    assert str(error).startswith("MCP server 'shop': the input schema of tool 'order' cannot")


def test_a_schema_that_refers_to_itself_is_followed():
    tree = {
        "type": "object",
        "properties": {"root": {"$ref": "#/$defs/Node"}},
        "$defs": {
            "Node": {
                "type": "object",
                "properties": {"children": {"type": "array", "items": {"$ref": "#/$defs/Node"}}},
            }
        },
    }
    checked = _schema(tree)
    assert checked.check({"root": {"children": [{"children": []}]}}, "t") is not None
    with pytest.raises(ValidationError, match="is not of type 'array'"):
        checked.check({"root": {"children": [{"children": 3}]}}, "t")


def test_a_hostile_nesting_of_arguments_is_a_validation_error_not_a_crash():
    deep: Any = 0
    for _ in range(5000):
        deep = [deep]
    loose = _schema({"type": "object", "properties": {"x": {"$ref": "#/$defs/L"}}, "$defs": {
        "L": {"anyOf": [{"type": "integer"}, {"type": "array", "items": {"$ref": "#/$defs/L"}}]}
    }})  # fmt: skip
    with pytest.raises(ValidationError, match="nest too deeply"):
        loose.check({"x": deep}, "t")


_JSON = st.recursive(
    st.none() | st.booleans() | st.integers() | st.floats(allow_nan=False) | st.text(max_size=5),
    lambda inner: (
        st.lists(inner, max_size=3) | st.dictionaries(st.text(max_size=4), inner, max_size=3)
    ),
    max_leaves=10,
)


_ITEM = st.fixed_dictionaries({}, optional={"sku": _JSON, "qty": _JSON})
_ORDER_CHECK = ArgumentsSchema("shop", "order", ORDER)
_REFERENCE = jsonschema.Draft202012Validator(ORDER)


@settings(max_examples=200, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(
    st.fixed_dictionaries(
        {}, optional={"items": st.lists(_ITEM, max_size=2) | _JSON, "note": _JSON, "x": _JSON}
    )
)
def test_the_check_agrees_with_json_schema_on_any_arguments(args: dict[str, Any]):
    valid = _REFERENCE.is_valid(args)
    try:
        _ORDER_CHECK.check(args, "order_args")
    except ValidationError:
        assert not valid
    else:
        assert valid
