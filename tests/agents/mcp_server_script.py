"""A real MCP server for the MCP tool tests, built on the official ``mcp`` SDK.

Run it as a process: ``python mcp_server_script.py stdio`` serves over stdin/stdout;
``python mcp_server_script.py http PORT`` serves streamable HTTP on 127.0.0.1:PORT at
``/mcp``. Add ``--bad-schema`` to also list a tool whose input schema has a type JSON
Schema does not know (``datetime``), ``--remote-ref`` for one whose schema points at a URL,
and ``--odd-names`` for tools named ``a.b`` and ``a_b`` (one name to a model) and ``""``.

Its tools: ``add`` (two integers, a structured result), ``echo`` (text), ``fail`` (an
MCP tool error, ``isError``), ``slow`` (sleeps, for timeouts), ``die`` (the process exits
in the middle of the call), ``pid`` (the server's process id) and ``header`` (a header
of the HTTP request that carried the call). Over HTTP, a call of the unlisted tool
``http_NNN`` is answered with the HTTP status NNN and a body that is no JSON-RPC, as a
proxy in front of a server answers.
"""

from __future__ import annotations

import os
import re
import sys
from collections.abc import Awaitable, Callable
from typing import Any

import anyio
import mcp_types as types
from mcp.server.lowlevel import Server
from mcp.server.stdio import stdio_server

_OBJECT = "object"

TOOLS = [
    types.Tool(
        name="add",
        description="Add two integers.",
        input_schema={
            "type": _OBJECT,
            "properties": {
                "a": {"type": "integer", "description": "The first."},
                "b": {"type": "integer", "description": "The second."},
            },
            "required": ["a", "b"],
            "additionalProperties": False,
        },
    ),
    types.Tool(
        name="echo",
        description="Say the text back.",
        input_schema={
            "type": _OBJECT,
            "properties": {"text": {"$ref": "#/$defs/Text"}},
            "required": ["text"],
            "$defs": {"Text": {"type": "string", "minLength": 1}},
        },
    ),
    types.Tool(name="fail", description="Always fails.", input_schema={"type": _OBJECT}),
    types.Tool(
        name="slow",
        description="Sleep, then answer.",
        input_schema={"type": _OBJECT, "properties": {"seconds": {"type": "number"}}},
    ),
    types.Tool(
        name="die", description="The server exits mid-call.", input_schema={"type": _OBJECT}
    ),
    types.Tool(name="pid", description="The server's process id.", input_schema={"type": _OBJECT}),
    types.Tool(
        name="header",
        description="An HTTP header of the call's request.",
        input_schema={"type": _OBJECT, "properties": {"name": {"type": "string"}}},
    ),
]

BAD = types.Tool(
    name="matrix",
    description="Takes a time of a type JSON Schema does not have.",
    input_schema={"type": _OBJECT, "properties": {"when": {"type": "datetime"}}},
)
ODD_NAMES = [
    types.Tool(name="a.b", description="A dotted name.", input_schema={"type": _OBJECT}),
    types.Tool(
        name="a_b", description="The dotted name's model form.", input_schema={"type": _OBJECT}
    ),
    types.Tool(name="", description="No name at all.", input_schema={"type": _OBJECT}),
]
REMOTE = types.Tool(
    name="remote",
    description="Points at a schema elsewhere.",
    input_schema={"type": _OBJECT, "properties": {"x": {"$ref": "https://example.com/x.json"}}},
)


def _text(text: str) -> list[types.ContentBlock]:
    return [types.TextContent(type="text", text=text)]


async def _call(name: str, args: dict[str, Any]) -> types.CallToolResult:
    if name == "add":
        total = args["a"] + args["b"]
        return types.CallToolResult(content=_text(str(total)), structured_content={"sum": total})
    if name == "echo":
        return types.CallToolResult(content=_text(args["text"]))
    if name == "fail":
        return types.CallToolResult(content=_text("the disk is full"), is_error=True)
    if name == "slow":
        await anyio.sleep(float(args.get("seconds", 10)))
        return types.CallToolResult(content=_text("awake"))
    if name == "die":
        os._exit(3)
    if name == "pid":
        return types.CallToolResult(content=_text(str(os.getpid())))
    raise ValueError(f"no tool {name}")


def make_server(flags: set[str]) -> Server[Any]:
    """Return the server, with the extra tools ``flags`` ask for."""
    listed = [*TOOLS]
    if "--bad-schema" in flags:
        listed.append(BAD)
    if "--remote-ref" in flags:
        listed.append(REMOTE)
    if "--odd-names" in flags:
        listed.extend(ODD_NAMES)

    async def list_tools(ctx: Any, params: Any) -> types.ListToolsResult:
        return types.ListToolsResult(tools=listed)

    async def call_tool(ctx: Any, params: types.CallToolRequestParams) -> types.CallToolResult:
        args = dict(params.arguments or {})
        if params.name == "header":
            found = None if ctx.request is None else ctx.request.headers.get(args["name"])
            return types.CallToolResult(content=_text(str(found)))
        return await _call(params.name, args)

    return Server("test-tools", on_list_tools=list_tools, on_call_tool=call_tool)


async def _stdio(server: Server[Any]) -> None:
    async with stdio_server() as (read, write):
        await server.run(read, write, server.create_initialization_options())


_Asgi = Callable[[Any, Any, Any], Awaitable[None]]
_HTTP_TOOL = re.compile(rb'"method":\s*"tools/call".*"name":\s*"http_(\d{3})"')


def _http_errors(app: _Asgi) -> _Asgi:
    """Wrap ``app``: a POST that calls the tool ``http_NNN`` is answered HTTP NNN."""

    async def wrapped(scope: Any, receive: Any, send: Any) -> None:
        if scope["type"] != "http" or scope["method"] != "POST":
            await app(scope, receive, send)
            return
        parts = []
        more = True
        while more:
            message = await receive()
            parts.append(message.get("body", b""))
            more = message.get("more_body", False)
        body = b"".join(parts)
        asked = _HTTP_TOOL.search(body)
        if asked is not None:
            start = {"status": int(asked[1]), "headers": [(b"content-type", b"text/plain")]}
            await send({"type": "http.response.start", **start})
            await send({"type": "http.response.body", "body": b"refused by the proxy"})
            return
        sent = False

        async def again() -> Any:  # the body read above, then what comes after it
            nonlocal sent
            if sent:
                return await receive()
            sent = True
            return {"type": "http.request", "body": body, "more_body": False}

        await app(scope, again, send)

    return wrapped


def main(argv: list[str]) -> None:
    flags = {arg for arg in argv if arg.startswith("--")}
    plain = [arg for arg in argv if not arg.startswith("--")]
    server = make_server(flags)
    if plain[0] == "stdio":
        anyio.run(_stdio, server)
        return
    import uvicorn

    app = _http_errors(server.streamable_http_app())
    uvicorn.run(app, host="127.0.0.1", port=int(plain[1]), log_level="warning")


if __name__ == "__main__":
    main(sys.argv[1:])
