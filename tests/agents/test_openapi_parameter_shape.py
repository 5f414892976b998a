"""An OpenAPI parameter without a name, or in a place OpenAPI 3 does not have, is refused
when the tools are made, naming it and the fix: it would otherwise become an argument
named 'None', or be dropped without a word and the call sent without it."""

from __future__ import annotations

from typing import Any

import pytest

from nodestep import GraphConfigError
from nodestep.agents import openapi_tools

pytest.importorskip("httpx")


def _document(*parameters: dict[str, Any]) -> dict[str, Any]:
    operation = {"operationId": "find", "parameters": list(parameters)}
    return {"openapi": "3.0.3", "paths": {"/find": {"get": operation}}}


@pytest.mark.parametrize(
    ("parameter", "expected"),
    [
        ({"in": "query", "schema": {"type": "string"}}, "has a parameter whose 'name' is None"),
        ({"name": "", "in": "query"}, "has a parameter whose 'name' is ''"),
        ({"name": 5, "in": "query"}, "has a parameter whose 'name' is 5"),
        ({"name": "q", "in": "querystring"}, "the parameter 'q' in 'querystring'; a parameter"),
        ({"name": "q", "required": True}, "the parameter 'q' in None; a parameter's 'in' is"),
        ({"name": "q", "in": "formData"}, "'formData' are Swagger 2's; convert the document"),
    ],
)
def test_a_parameter_of_another_shape_is_refused_naming_it(
    parameter: dict[str, Any], expected: str
) -> None:
    with pytest.raises(GraphConfigError) as caught:
        openapi_tools(_document(parameter), base_url="http://127.0.0.1:9")
    message = str(caught.value)
    assert message.startswith("OpenAPI operation 'find' has ")
    assert expected in message
    assert message.endswith("Fix the document, or leave the operation out with operations=[...].")


def test_an_operation_left_out_is_not_read() -> None:
    document = _document({"in": "query"})
    document["paths"]["/other"] = {"get": {"operationId": "other"}}
    tools = openapi_tools(document, base_url="http://127.0.0.1:9", operations=["other"])
    assert [t.name for t in tools] == ["other"]


def test_an_optional_header_parameter_is_still_left_out_quietly() -> None:
    header = {"name": "X-Trace", "in": "header", "schema": {"type": "string"}}
    (tool,) = openapi_tools(_document(header), base_url="http://127.0.0.1:9")
    assert tool.spec["parameters"]["properties"] == {}
