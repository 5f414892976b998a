"""An MCP server over HTTP that answers an HTTP error: the error names the URL and the status.

Real HTTP servers on 127.0.0.1: a plain one that answers every request with one status
(the handshake fails), and the test MCP server, whose unlisted tool ``http_NNN`` is answered
HTTP NNN (a call fails after the handshake worked).
"""

from __future__ import annotations

from collections.abc import Iterator
from http.server import BaseHTTPRequestHandler

import pytest
from local_http import local_http_server
from mcp_process import TOOLS_SCRIPT, http_server, tools_command

from nodestep.agents import MCPClient, MCPToolError

pytestmark = [pytest.mark.anyio, pytest.mark.slow]


@pytest.fixture(scope="module")
def http_url() -> Iterator[str]:
    """One HTTP server process for the module's tests."""
    with http_server(TOOLS_SCRIPT) as url:
        yield url


def _answering(status: int) -> type[BaseHTTPRequestHandler]:
    class Handler(BaseHTTPRequestHandler):
        def do_POST(self) -> None:
            self.rfile.read(int(self.headers.get("content-length", 0)))
            body = b'{"detail": "no"}'  # JSON, but no JSON-RPC error
            self.send_response(status)
            self.send_header("content-type", "application/json")
            self.send_header("content-length", str(len(body)))
            self.end_headers()
            self.wfile.write(body)

        def log_message(self, *args: object) -> None:
            pass

    return Handler


@pytest.mark.parametrize(
    ("status", "said"),
    [
        (
            401,
            "HTTP 401 Unauthorized when asked to connect. Send the credentials it asks for: "
            "MCPClient(headers={'Authorization': ...}).",
        ),
        (
            404,
            "HTTP 404 Not Found when asked to connect. Check the URL: it must be the "
            "server's MCP endpoint, often ending in /mcp.",
        ),
        (
            500,
            "HTTP 500 Internal Server Error when asked to connect. The server failed: look "
            "at its log, then try again.",
        ),
    ],
)
async def test_a_handshake_answered_with_an_http_error_names_the_url_and_the_status(
    status: int, said: str
) -> None:
    with local_http_server(_answering(status)) as root:
        url = f"{root}/mcp"
        with pytest.raises(MCPToolError) as caught:
            async with MCPClient(url=url, connect_timeout=10):
                pass
    assert str(caught.value) == f"MCP server '{url}' answered {said}"
    assert (caught.value.status, caught.value.server) == (status, url)


async def test_the_url_named_leaves_out_a_password_and_a_query() -> None:
    with local_http_server(_answering(401)) as root:
        host = root.removeprefix("http://")
        with pytest.raises(MCPToolError) as caught:
            async with MCPClient(url=f"http://ada:pw@{host}/mcp?key=s3cret", name="docs"):
                pass
    assert str(caught.value).startswith(
        f"MCP server 'docs' at http://{host}/mcp answered HTTP 401 Unauthorized when asked "
        f"to connect."
    )
    assert "s3cret" not in str(caught.value) and "pw" not in str(caught.value)


async def test_a_named_server_is_named_with_its_url(http_url: str) -> None:
    async with MCPClient(url=http_url, name="tools", timeout=10) as client:
        with pytest.raises(MCPToolError) as caught:
            await client.call("http_403", {})
    assert str(caught.value) == (
        f"MCP server 'tools' at {http_url} answered HTTP 403 Forbidden when asked to call "
        f"tool 'http_403'. It refused these credentials: check the headers given to "
        f"MCPClient(headers=...)."
    )
    assert (caught.value.status, caught.value.tool) == (403, "http_403")


async def test_a_call_answered_with_an_http_error_names_the_status_and_the_next_call_works(
    http_url: str,
) -> None:
    async with MCPClient(url=http_url, timeout=10) as client:
        with pytest.raises(MCPToolError) as caught:
            await client.call("http_502", {})
        assert str(caught.value) == (
            f"MCP server 'test-tools' at {http_url} answered HTTP 502 Bad Gateway when "
            f"asked to call tool 'http_502'. The server failed: look at its log, then try "
            f"again."
        )
        assert await client.call("add", {"a": 1, "b": 2}) == {"sum": 3}
        # A failure of another kind is not told the status of an earlier request.
        with pytest.raises(MCPToolError) as other:
            await client.call("nope", {})
        assert other.value.status is None and "HTTP" not in str(other.value)


async def test_a_server_over_stdio_has_no_http_status() -> None:
    async with MCPClient(command=tools_command(), timeout=10) as client:
        with pytest.raises(MCPToolError) as caught:
            await client.call("nope", {})
    assert caught.value.status is None
