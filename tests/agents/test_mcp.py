"""MCP tools against real MCP server processes: over stdio, and streamable HTTP on 127.0.0.1.

The server (``mcp_server_script.py``) is written with the official mcp SDK and started
by each test as a child process, so listing, calling, errors, timeouts and a server that
dies mid-call all go through the real protocol.
"""

from __future__ import annotations

import json
import os
import socket
import sys
from collections.abc import Iterator
from typing import Any

import anyio
import pytest
from mcp_process import TOOLS_SCRIPT, http_server, tools_command
from pydantic import ValidationError

from nodestep import (
    GraphConfigError,
    ScriptedModel,
    ScriptedReply,
    create_react_agent,
)
from nodestep.agents import MCPClient, MCPSchemaError, MCPTool, MCPToolError, ToolCall, ToolMessage

pytestmark = [pytest.mark.anyio, pytest.mark.slow]


@pytest.fixture(scope="module")
def http_url() -> Iterator[str]:
    """One HTTP server process for the module's tests."""
    with http_server(TOOLS_SCRIPT) as url:
        yield url


def _agent_calling(tools: list[Any], name: str, args: dict[str, Any]) -> Any:
    model = ScriptedModel(
        [ScriptedReply(tool_calls=[ToolCall(id="c1", name=name, args=args)]), "done"]
    )
    return create_react_agent(model, tools)


def _tool_message(result: Any) -> ToolMessage:
    found = [m for m in result.state.messages if isinstance(m, ToolMessage)]
    assert len(found) == 1
    return found[0]


async def test_a_stdio_servers_tools_are_listed_with_their_schemas_for_the_model():
    async with MCPClient(command=tools_command()) as client:
        tools = await client.tools()
    assert client.name == "test-tools"  # the name the server gives
    assert [t.name for t in tools] == ["add", "echo", "fail", "slow", "die", "pid", "header"]
    assert all(isinstance(t, MCPTool) for t in tools)
    assert tools[0].spec == {
        "name": "add",
        "description": "Add two integers.",
        "parameters": {
            "type": "object",
            "properties": {
                "a": {"type": "integer", "description": "The first."},
                "b": {"type": "integer", "description": "The second."},
            },
            "required": ["a", "b"],
            "additionalProperties": False,
        },
    }
    # a schema without properties gets an empty one, which some providers require
    assert tools[2].spec["parameters"] == {"type": "object", "properties": {}}


async def test_an_agent_calls_an_mcp_tool_and_its_structured_result_is_the_tool_message():
    async with MCPClient(command=tools_command()) as client:
        tools = await client.tools(only=["add"])
        result = await _agent_calling(tools, "add", {"a": 2, "b": 3}).ainvoke(
            {"messages": [{"role": "user", "content": "2 + 3?"}]}
        )
    message = _tool_message(result)
    assert message.status == "ok" and json.loads(message.content) == {"sum": 5}


async def test_text_content_is_the_result_when_there_is_no_structured_content():
    async with MCPClient(command=tools_command()) as client:
        (echo,) = await client.tools(only=["echo"])
        assert await echo.ainvoke({"text": "hello"}) == "hello"


async def test_arguments_that_do_not_fit_the_schema_are_refused_before_the_call():
    async with MCPClient(command=tools_command()) as client:
        add, echo = await client.tools(only=["add", "echo"])
        with pytest.raises(ValidationError) as caught:
            await add.ainvoke({"a": "two", "c": 1})
        problems = {(e["loc"], e["msg"]) for e in caught.value.errors()}
        assert (("a",), "'two' is not of type 'integer'") in problems
        assert ((), "'b' is a required property") in problems
        with pytest.raises(ValidationError, match="should be non-empty"):
            await echo.ainvoke({"text": ""})  # minLength, through a local $ref
        # the model is told what was wrong, and the run goes on
        result = await _agent_calling([add], "add", {"a": 1}).ainvoke({"messages": []})
    message = _tool_message(result)
    assert message.status == "error"
    assert message.content.startswith("Error: the arguments of add are not valid: ")
    assert "'b' is a required property" in message.content


async def test_an_mcp_tool_error_is_an_error_tool_message_naming_the_server_and_tool():
    async with MCPClient(command=tools_command()) as client:
        tools = await client.tools(only=["fail"])
        with pytest.raises(MCPToolError) as caught:
            await tools[0].ainvoke({})
        assert (caught.value.server, caught.value.tool) == ("test-tools", "fail")
        result = await _agent_calling(tools, "fail", {}).ainvoke({"messages": []})
    message = _tool_message(result)
    assert message.status == "error"
    assert message.content == (
        "Error: fail raised MCPToolError: MCP server 'test-tools': tool 'fail' answered an "
        "error: the disk is full"
    )


async def test_a_call_past_its_timeout_is_given_up_and_the_connection_still_works():
    async with MCPClient(command=tools_command(), timeout=0.3) as client:
        slow, echo = await client.tools(only=["slow", "echo"])
        with pytest.raises(MCPToolError, match=r"did not answer within 0\.3 s") as caught:
            await slow.ainvoke({"seconds": 30})
        assert caught.value.timed_out and caught.value.tool == "slow"
        slow.timeout = 5  # a tool's own timeout wins over the client's
        assert await slow.ainvoke({"seconds": 0.4}) == "awake"
        assert await echo.ainvoke({"text": "still here"}) == "still here"


async def test_a_server_that_dies_mid_call_gives_an_error_naming_server_and_tool():
    async with MCPClient(command=tools_command()) as client:
        die, echo = await client.tools(only=["die", "echo"])
        with pytest.raises(MCPToolError, match="the server stopped or hung up") as caught:
            await die.ainvoke({})
        assert (caught.value.server, caught.value.tool) == ("test-tools", "die")
        with pytest.raises(MCPToolError, match="tool 'echo'"):
            await echo.ainvoke({"text": "anyone?"})
    # and leaving the block after that is clean


async def test_a_tool_the_server_does_not_have_is_an_error_naming_it():
    async with MCPClient(command=tools_command(), name="calc") as client:
        with pytest.raises(
            MCPToolError, match="MCP server 'calc' failed when asked to call tool 'nope'"
        ):
            await client.call("nope", {})
        with pytest.raises(GraphConfigError, match="has no tool 'nope'; its tools are 'add'"):
            await client.tools(only=["add", "nope"])


async def test_a_schema_that_cannot_be_used_is_refused_naming_server_tool_and_part():
    async with MCPClient(command=tools_command("--bad-schema", "--remote-ref")) as client:
        with pytest.raises(MCPSchemaError) as caught:
            await client.tools()
        error = caught.value
        assert (error.server, error.tool, error.where) == (
            "test-tools",
            "matrix",
            "/properties/when/type",
        )
        assert "'datetime' is not valid under any of the given schemas" in str(error)
        assert "skip_unmappable=True" in str(error)
        with pytest.raises(MCPSchemaError, match="points outside the schema") as remote:
            await client.tools(only=["remote"])
        assert remote.value.where == "/properties/x/$ref"
        names = [t.name for t in await client.tools(skip_unmappable=True)]
    assert names == ["add", "echo", "fail", "slow", "die", "pid", "header"]


async def test_tools_over_streamable_http(http_url: str):
    async with MCPClient(url=http_url, timeout=10) as client:
        tools = await client.tools(only=["add", "fail"], prefix="calc_")
        assert [t.name for t in tools] == ["calc_add", "calc_fail"]
        result = await _agent_calling(tools, "calc_add", {"a": 40, "b": 2}).ainvoke(
            {"messages": []}
        )
        assert json.loads(_tool_message(result).content) == {"sum": 42}
        with pytest.raises(MCPToolError, match="answered an error: the disk is full"):
            await tools[1].ainvoke({})


async def test_headers_are_sent_to_an_http_server(http_url: str):
    async with MCPClient(url=http_url, headers={"X-Team": "blue"}) as client:
        (header,) = await client.tools(only=["header"])
        assert await header.ainvoke({"name": "x-team"}) == "blue"


async def test_leaving_the_block_stops_the_server_and_closes_the_tools():
    async with MCPClient(command=tools_command()) as client:
        (pid,) = await client.tools(only=["pid"])
        server_pid = int(await pid.ainvoke({}))
    with pytest.raises(GraphConfigError, match="is not open"):
        await pid.ainvoke({})
    with anyio.fail_after(10):
        while _alive(server_pid):
            await anyio.sleep(0.02)


def _alive(pid: int) -> bool:
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    with open(f"/proc/{pid}/stat") as stat:  # a zombie is gone, only not reaped yet
        return stat.read().split(")")[-1].split()[0] != "Z"


def test_a_script_uses_the_sync_client_and_a_sync_run():
    with MCPClient(command=tools_command()) as client:
        tools = client.tools_sync(only=["add"])
        result = _agent_calling(tools, "add", {"a": 1, "b": 1}).invoke({"messages": []})
    assert json.loads(_tool_message(result).content) == {"sum": 2}
    with pytest.raises(GraphConfigError, match="works on a client opened with 'with"):
        client.tools_sync()


def test_a_tool_of_a_sync_client_used_after_its_block_says_the_client_is_not_open():
    with MCPClient(command=tools_command()) as client:
        tools = client.tools_sync(only=["add"])
    agent = _agent_calling(tools, "add", {"a": 1, "b": 1})
    with pytest.raises(GraphConfigError) as caught:
        agent.invoke({"messages": []})  # the run's loop is not the closed client's thread
    assert "is not open: use its tools inside" in str(caught.value)


async def test_a_client_opened_twice_or_not_at_all_says_so():
    client = MCPClient(command=tools_command())
    with pytest.raises(GraphConfigError, match="is not open"):
        await client.tools()
    async with client:
        with pytest.raises(GraphConfigError, match="already open"):
            await client.__aenter__()


async def test_a_server_that_cannot_start_is_an_error_naming_it():
    command = [sys.executable, "-c", "import sys; sys.exit(2)"]
    with pytest.raises(MCPToolError, match=r"MCP server 'python.*' failed when asked to connect"):
        async with MCPClient(command=command, connect_timeout=10):
            pass


@pytest.mark.parametrize(
    ("options", "message"),
    [
        ({}, "pass command=\\[program, \\*args\\]"),
        ({"command": ["x"], "url": "http://h/mcp"}, "connects to one server"),
        ({"command": "python server.py"}, "as a list of strings"),
        ({"command": []}, "as a list of strings"),
        ({"url": "ftp://h/mcp"}, "http:// or https:// URL"),
        ({"url": "http://h/mcp", "timeout": 0}, "timeout=0"),
        ({"url": "http://h/mcp", "connect_timeout": float("inf")}, "connect_timeout=inf"),
    ],
)
def test_bad_client_settings_are_refused_naming_the_value(options: dict[str, Any], message: str):
    with pytest.raises(GraphConfigError, match=message):
        MCPClient(**options)


def test_without_the_mcp_package_the_error_names_the_extra(monkeypatch: pytest.MonkeyPatch):
    monkeypatch.setitem(sys.modules, "mcp", None)  # import mcp now raises ImportError
    with pytest.raises(GraphConfigError, match=r"pip install 'nodestep\[mcp\]'"):
        MCPClient(url="http://127.0.0.1:1/mcp")


def test_an_mcp_tool_is_not_called_directly():
    async def listed() -> list[Any]:
        async with MCPClient(command=tools_command()) as client:
            return await client.tools(only=["add"])

    (add,) = anyio.run(listed)
    with pytest.raises(TypeError, match=r"await tool\.ainvoke"):
        add(a=1, b=2)
    assert repr(add) == "MCPTool('add', server='test-tools')"


async def test_an_http_server_that_is_not_there_is_an_error_naming_the_url():
    with socket.socket() as probe:  # a port nobody listens on
        probe.bind(("127.0.0.1", 0))
        url = f"http://127.0.0.1:{probe.getsockname()[1]}/mcp"
    with pytest.raises(MCPToolError) as caught:
        async with MCPClient(url=url, connect_timeout=5):
            pass
    message = str(caught.value)
    assert message.startswith(f"MCP server '{url}' failed when asked to connect: ")
    # the reason (the wording is the event loop's), not the task group that carried it
    assert "attempts" in message.lower() and "TaskGroup" not in message
