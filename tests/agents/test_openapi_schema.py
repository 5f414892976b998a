"""The JSON schemas of an OpenAPI document, read as pydantic types for tool arguments."""

from __future__ import annotations

from typing import Any

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from pydantic import TypeAdapter, ValidationError

from nodestep import GraphConfigError
from nodestep.agents._openapi_schema import SchemaReader, field_name

DOC: dict[str, Any] = {
    "components": {
        "schemas": {
            "Tree": {
                "type": "object",
                "required": ["label"],
                "properties": {
                    "label": {"type": "string"},
                    "children": {"type": "array", "items": {"$ref": "#/components/schemas/Tree"}},
                },
            },
            "Alias": {"$ref": "#/components/schemas/Tree"},
            "Loop": {"$ref": "#/components/schemas/Loop"},
        }
    }
}


def _adapter(schema: Any) -> TypeAdapter[Any]:
    return TypeAdapter(SchemaReader(DOC).annotation(schema, "test"))


@pytest.mark.parametrize(
    ("schema", "good", "bad"),
    [
        ({"type": "integer"}, ["3", 4], ["three", 1.5]),
        ({"type": "number"}, [1.5, 2], ["x"]),
        ({"type": "boolean"}, [True, "false"], ["maybe"]),
        ({"type": "string", "enum": ["a", "b"]}, ["a"], ["c"]),
        ({"type": "array", "items": {"type": "integer"}}, [[1, 2], []], [["x"], 3]),
        ({"type": ["integer", "null"]}, [None, 2], ["x"]),
        ({"type": "string", "nullable": True}, [None, "x"], [[1]]),
        ({"anyOf": [{"type": "integer"}, {"type": "boolean"}]}, [1, True], [[1]]),
        ({"type": "object"}, [{"any": 1}], [[1]]),
        ({"$ref": "#/components/schemas/Alias"}, [{"label": "x", "children": []}], [{}]),
    ],
)
def test_a_schema_accepts_what_it_describes_and_refuses_the_rest(schema, good, bad):
    adapter = _adapter(schema)
    for value in good:
        adapter.validate_python(value)
    for value in bad:
        with pytest.raises(ValidationError):
            adapter.validate_python(value)


def test_a_recursive_schema_is_read_with_its_inner_level_left_open():
    tree = _adapter({"$ref": "#/components/schemas/Tree"})
    value = tree.validate_python({"label": "a", "children": [{"label": "b", "deep": 1}]})
    assert value.label == "a"


def test_a_ref_cycle_or_a_ref_outside_the_document_is_a_config_error():
    reader = SchemaReader(DOC)
    with pytest.raises(GraphConfigError, match="cannot be followed"):
        reader.resolve({"$ref": "#/components/schemas/Loop"}, "test")
    with pytest.raises(GraphConfigError, match="cannot be followed"):
        reader.resolve({"$ref": "https://example.com/schema.json"}, "test")


@given(st.text(min_size=1, max_size=20))
@settings(max_examples=100)
def test_every_parameter_name_gives_a_python_identifier(name: str):
    out = field_name(name)
    assert out.isidentifier() and not out.startswith("_")
