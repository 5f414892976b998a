"""@tool: the schema from the signature, validated arguments, and refused definitions."""

from __future__ import annotations

import anyio
import pytest
from pydantic import ValidationError

from nodestep import GraphConfigError, NodeContext, tool
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


def test_an_empty_name_is_refused_not_replaced_by_the_function_name():
    def lookup(topic: str) -> str:
        """Look up a topic."""
        return topic

    with pytest.raises(GraphConfigError) as caught:
        tool(name="")(lookup)
    assert str(caught.value) == (
        "@tool(name=''): Tool name '' is not allowed: models take 1 to 64 letters, digits, "
        "'_' and '-'. Pass @tool(name=...) with such a name."
    )


def test_a_parameter_without_a_type_annotation_is_refused_naming_it():
    def lookup(topic, limit: int = 3) -> str:  # type: ignore[no-untyped-def]
        """Look up a topic."""
        return topic

    with pytest.raises(GraphConfigError) as caught:
        tool(lookup)
    assert str(caught.value).startswith("Tool 'lookup': parameter 'topic' has no type annotation.")
    assert "annotate it, e.g. topic: str" in str(caught.value)


def test_a_node_context_parameter_is_refused_saying_what_to_use_instead():
    def lookup(topic: str, ctx: NodeContext) -> str:
        """Look up a topic."""
        return topic

    with pytest.raises(GraphConfigError) as caught:
        tool(lookup)
    message = str(caught.value)
    assert message.startswith("Tool 'lookup': parameter 'ctx' asks for the NodeContext")
    assert "Annotate it ToolContext instead" in message and "in a closure" in message


class _Base:
    def lookup(self, topic: str) -> str:
        """Look up a topic in the base manual."""
        return topic


class _Child(_Base):
    def lookup(self, topic: str) -> str:
        return topic.upper()


def test_an_inherited_docstring_is_not_the_description():
    # inspect.getdoc would give the overridden method's docstring: another function's.
    with pytest.raises(GraphConfigError, match="'lookup' has no description"):
        tool(_Child().lookup)
    assert tool(_Base().lookup).description == "Look up a topic in the base manual."
    assert tool(description="Shout a topic.")(_Child().lookup)("tea") == "TEA"


def test_each_api_that_takes_tools_refuses_a_non_tool_and_a_repeated_name_in_its_words():
    from nodestep.agents import ScriptedModel, agent_node_types, model_node, tool_node

    @tool
    def lookup(order: int) -> str:
        """Find an order."""
        return str(order)

    with pytest.raises(GraphConfigError, match=r"tool_node takes @tool functions, got <built"):
        tool_node([print])
    with pytest.raises(GraphConfigError, match=r"tools takes functions made with @tool, got <b"):
        model_node(ScriptedModel(["hi"]), tools=[print])
    with pytest.raises(GraphConfigError, match=r"agent_node_types\(tools=\.\.\.\) takes @tool"):
        agent_node_types(tools=[print])
    for make in (
        lambda: tool_node([lookup, lookup]),
        lambda: model_node(ScriptedModel(["hi"]), tools=[lookup, lookup]),
        lambda: agent_node_types(tools=[lookup, lookup]),
    ):
        with pytest.raises(GraphConfigError, match=r"Two tools are named 'lookup'"):
            make()
