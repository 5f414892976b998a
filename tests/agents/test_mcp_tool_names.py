"""The names of an MCP server's tools as a model sees them, and the options that shape them.

Every name a model sees is letters, digits, ``_`` and ``-``, 64 at most, as ``@tool``
requires: a ``prefix`` that would break that, an ``only`` that is not a list of names, two
tools a model would call by one name, or a tool without a name are refused with a
``GraphConfigError`` that names the value and the fix, before any tool is made.
"""

from __future__ import annotations

from typing import Any

import pytest
from mcp_process import tools_command

from nodestep import GraphConfigError
from nodestep.agents import MCPClient

pytestmark = [pytest.mark.anyio, pytest.mark.slow]


async def test_bad_only_and_prefix_are_refused_naming_the_value() -> None:
    bad: list[tuple[dict[str, Any], str]] = [
        ({"only": "add"}, r"takes a list of the server's tool names.*got str 'add'"),
        ({"only": ["add", 3]}, r"takes tool names as strings, got int 3"),
        ({"only": ["add", "echo", "add"]}, r"names 'add' more than once"),
        ({"prefix": "weather."}, r"letters, digits, '_' and '-'.*got str 'weather\.'"),
        ({"prefix": "p" * 64}, r"shorter than 64 characters"),
        ({"prefix": None}, r"got NoneType None"),
    ]
    async with MCPClient(command=tools_command()) as client:
        for options, message in bad:
            with pytest.raises(GraphConfigError, match=message):
                await client.tools(**options)
        tools = await client.tools(only=["echo", "add"], prefix="calc-")
    assert [(t.name, t.server_name) for t in tools] == [("calc-echo", "echo"), ("calc-add", "add")]


async def test_two_tools_of_one_model_name_are_refused_naming_both() -> None:
    async with MCPClient(command=tools_command("--odd-names")) as client:
        with pytest.raises(GraphConfigError) as caught:
            await client.tools(only=["a.b", "a_b"])
        assert "lists the tools 'a.b' and 'a_b', which a model would both call 'a_b'" in str(
            caught.value
        )
        assert [t.name for t in await client.tools(only=["a.b"], prefix="x_")] == ["x_a_b"]


async def test_a_tool_without_a_name_is_refused_or_skipped() -> None:
    async with MCPClient(command=tools_command("--odd-names")) as client:
        with pytest.raises(GraphConfigError, match="lists a tool with an empty name") as caught:
            await client.tools(only=["add", ""])
        assert "skip_unmappable=True" in str(caught.value)
        tools = await client.tools(only=["add", "a.b"], skip_unmappable=True)
        assert [t.name for t in tools] == ["add", "a_b"]
        kept = await client.tools(only=["", "a_b"], skip_unmappable=True, prefix="s_")
        assert [(t.name, t.server_name) for t in kept] == [("s_a_b", "a_b")]


async def test_a_tool_only_names_that_cannot_be_used_is_skipped_not_called_missing() -> None:
    # skip_unmappable leaves such a tool out even when only= names it; the server lists it,
    # so it is never reported as a tool the server does not have.
    async with MCPClient(command=tools_command("--bad-schema")) as client:
        tools = await client.tools(only=["matrix", "add"], skip_unmappable=True)
        assert [t.name for t in tools] == ["add"]
        with pytest.raises(GraphConfigError, match="has no tool 'nope'; its tools are 'add'"):
            await client.tools(only=["matrix", "nope"], skip_unmappable=True)
