"""@tool: the schema from the signature, validated arguments, and refused definitions."""

from __future__ import annotations

import anyio
import pytest
from pydantic import ValidationError

from nodestep import GraphConfigError, tool
from nodestep.agents import Tool


@tool
def search(query: str, limit: int = 3) -> list[str]:
    """Search the manual.

    Args:
        query: What to look for.
        limit: How many hits to return.
    """
    return [query] * limit


@tool(name="get-time", description="Tell the time.", approve=True)
async def clock(zone: str) -> str:
    return f"noon in {zone}"


def test_the_schema_comes_from_the_signature_and_the_docstring():
    assert search.spec == {
        "name": "search",
        "description": "Search the manual.",
        "parameters": {
            "type": "object",
            "properties": {
                "query": {"type": "string", "title": "Query", "description": "What to look for."},
                "limit": {
                    "type": "integer",
                    "title": "Limit",
                    "default": 3,
                    "description": "How many hits to return.",
                },
            },
            "required": ["query"],
            "additionalProperties": False,
        },
    }


def test_options_name_describe_and_mark_a_tool_for_approval():
    assert isinstance(clock, Tool)
    assert (clock.name, clock.description, clock.approve) == ("get-time", "Tell the time.", True)
    assert not search.approve


def test_arguments_are_validated_and_converted_before_the_call():
    assert anyio.run(search.ainvoke, {"query": "tea", "limit": "2"}) == ["tea", "tea"]
    assert anyio.run(clock.ainvoke, {"zone": "UTC"}) == "noon in UTC"
    with pytest.raises(ValidationError):
        anyio.run(search.ainvoke, {"limit": 2})
    with pytest.raises(ValidationError):
        anyio.run(search.ainvoke, {"query": "tea", "colour": "red"})


def test_a_tool_is_still_callable_as_the_function():
    assert search("x", limit=1) == ["x"]


def test_bad_tool_definitions_are_refused_when_made():
    def undocumented(x: int) -> int:
        return x

    with pytest.raises(GraphConfigError, match="has no description"):
        tool(undocumented)
    with pytest.raises(GraphConfigError, match="is not allowed"):
        tool(name="two words", description="d")(undocumented)

    def spread(*args: int) -> int:
        """Add."""
        return sum(args)

    with pytest.raises(GraphConfigError, match="use plain named parameters"):
        tool(spread)
    with pytest.raises(TypeError, match="@tool takes a function"):
        tool(42)  # type: ignore[call-overload]
