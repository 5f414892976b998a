"""An MCP call gets the time its ``timeout`` gives it, and every timeout is reported as one.

``connect_timeout`` bounds the handshake and the listings; a call is bounded by its own
``timeout`` (the client's, or the tool's ``.timeout``) alone, even when that is longer.
The SDK's own "request timed out" error is a timeout too: ``timed_out`` is set and the
message names the limit and the setting to raise.
"""

from __future__ import annotations

import sys
from types import SimpleNamespace

import pytest
from mcp.shared.exceptions import MCPError
from mcp_process import tools_command

from nodestep import GraphConfigError
from nodestep.agents import MCPClient, MCPTool


@pytest.mark.slow
@pytest.mark.anyio
async def test_a_call_may_take_longer_than_connect_timeout_when_its_timeout_allows() -> None:
    async with MCPClient(command=tools_command(), timeout=60, connect_timeout=2) as client:
        (slow,) = await client.tools(only=["slow"])
        # Old code cut this call at connect_timeout: "Request 'tools/call' timed out".
        assert await slow.ainvoke({"seconds": 3}) == "awake"


def test_the_sdks_request_timeout_is_reported_as_a_timeout_naming_the_setting() -> None:
    client = MCPClient(command=[sys.executable, "server.py"], connect_timeout=1.5, name="calc")
    sdk_timeout = MCPError(code=-32001, message="Request 'initialize' timed out")
    error = client._failed("connect", None, sdk_timeout)
    assert error.timed_out
    assert str(error) == (
        "MCP server 'calc' did not answer within 1.5 s when asked to connect; the call was "
        "given up. Raise MCPClient(connect_timeout=...) if it needs longer."
    )
    sdk_timeout = MCPError(code=-32001, message="Request 'tools/call' timed out")
    error = client._failed("call", "add", sdk_timeout, 4.0)
    assert error.timed_out and error.tool == "add"
    assert "did not answer within 4 s when asked to call tool 'add'" in str(error)
    assert "Raise the timeout (MCPClient(timeout=...) or the tool's .timeout)" in str(error)


@pytest.mark.parametrize(
    "seconds",
    [0, -1, "30", float("nan"), True, 10**400],
    ids=["zero", "negative", "text", "nan", "bool", "huge"],
)
def test_a_tools_timeout_is_checked_when_set(seconds: object) -> None:
    client = MCPClient(command=[sys.executable, "server.py"], name="calc")
    listed = SimpleNamespace(
        name="add", title=None, description="Add.", input_schema={"type": "object"}
    )
    tool = MCPTool(client, listed)
    with pytest.raises(GraphConfigError, match=r"MCP tool 'add' got timeout=.*seconds above 0"):
        tool.timeout = seconds  # type: ignore[assignment]
    assert tool.timeout is None
    tool.timeout = 120
    assert tool.timeout == 120.0
    tool.timeout = None
    assert tool.timeout is None
