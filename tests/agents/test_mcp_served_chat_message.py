"""A served chat agent takes ``message`` as text: anything else is an error result.

The tool's input schema says ``message`` is a required string, but an MCP client need not
check it: the server does, rather than asking the model an empty text for a missing
message, or the Python repr of a number or a list.
"""

from __future__ import annotations

from typing import Any

import pytest
from mcp import Client

from nodestep import ScriptedModel, create_react_agent
from nodestep.agents import mcp_server

pytestmark = pytest.mark.anyio


@pytest.mark.parametrize(
    ("arguments", "problem"),
    [
        ({}, "needs message, the text to ask (a string); the call gave none"),
        ({"message": None}, "needs message, the text to ask (a string); the call gave none"),
        ({"message": 3}, "takes message as text (a string); the call gave int 3"),
        (
            {"message": ["a", "b"]},
            "takes message as text (a string); the call gave list ['a', 'b']",
        ),
    ],
)
async def test_a_message_that_is_not_text_is_an_error_and_the_model_is_not_asked(
    arguments: dict[str, Any], problem: str
) -> None:
    model = ScriptedModel(["hi"])
    agent = create_react_agent(model, [], name="chat")
    async with Client(mcp_server(agent)) as client:
        result = await client.call_tool("chat", arguments)
    assert result.is_error
    assert f"Agent 'chat' {problem}" in result.content[0].text
    assert model.calls == []


async def test_a_text_message_is_asked_as_it_is() -> None:
    model = ScriptedModel(["hi"])
    agent = create_react_agent(model, [], name="chat")
    async with Client(mcp_server(agent)) as client:
        result = await client.call_tool("chat", {"message": "Tea or coffee?"})
    assert not result.is_error
    assert result.structured_content["reply"] == "hi"
    assert [m.content for m in model.calls[0]] == ["Tea or coffee?"]
