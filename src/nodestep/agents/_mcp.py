"""MCP servers' tools as nodestep tools: ``MCPClient`` connects, ``MCPTool`` calls.

``MCPClient(command=[...])`` starts a server as a child process and talks to it over its
stdin and stdout; ``MCPClient(url=...)`` talks streamable HTTP. Both run on the official
``mcp`` SDK (``pip install 'nodestep[mcp]'``). The connection lives as long as the
client's ``async with`` block (or ``with``, in a script); ``await client.tools()`` lists
the server's tools as ``MCPTool``\\s, for ``tool_node``, ``model_node`` or
``create_react_agent``.

A tool's input schema is shown to the model and checks the model's arguments before any
call is sent (see ``_mcp_schema``). What the server answers becomes the tool message: its
structured content when there is some, else its text. Every way a call can fail - the
tool answers an error (``isError``), the server refuses the call, breaks the protocol,
takes longer than ``timeout`` or is gone - raises ``MCPToolError`` naming the server and
the tool (and, over HTTP, the HTTP error status the server answered: see ``_mcp_http``),
which the tool node hands the model as an error tool message.
"""

from __future__ import annotations

import importlib
import threading
from collections.abc import Callable, Coroutine, Mapping, Sequence
from contextlib import AsyncExitStack, ExitStack
from pathlib import Path
from typing import Any, TypeVar
from urllib.parse import urlsplit

import anyio
import anyio.from_thread
import anyio.to_thread
from pydantic import BaseModel, ConfigDict, create_model, model_validator

from nodestep._errors import GraphConfigError, MCPToolError
from nodestep._flow.nodes import NodeContext
from nodestep._numbers import is_finite_number, shown_number
from nodestep.agents._mcp_checks import (
    check_listing,
    check_options,
    check_texts,
    model_name,
    refuse_same_name,
)
from nodestep.agents._mcp_http import HttpAnswers, http_advice
from nodestep.agents._mcp_schema import ArgumentsSchema
from nodestep.agents._tools import Tool

__all__ = ["MCPClient", "MCPTool", "load_mcp"]

T = TypeVar("T")

_SHOWN = 2_000  # characters of an error answer the model is shown
_REQUEST_TIMEOUT = -32001  # the JSON-RPC code of the SDK's error for a request timed out
# What each failure was asked, as the JSON-RPC method of its request (see _mcp_http).
_METHODS = {"connect": "initialize", "list the tools": "tools/list", "call": "tools/call"}
# The SDK's messages for an HTTP error status without a JSON-RPC error in its body: the
# status, which the error names, says more.
_STAND_INS = {"Server returned an error response", "Not Found"}


def load_mcp(what: str) -> Any:
    """Return the ``mcp`` SDK's module ``what``, or say which extra installs it.

    Raises:
        GraphConfigError: the ``mcp`` package is not installed.
    """
    try:
        return importlib.import_module(what)
    except ImportError:
        raise GraphConfigError(
            "MCP needs the mcp package (the official MCP SDK), which is not installed. "
            "Install the extra: pip install 'nodestep[mcp]'"
        ) from None


def _content_text(blocks: Sequence[Any]) -> str:
    """Return the text of a result's content blocks; other kinds are described."""
    parts = []
    for block in blocks:
        kind = getattr(block, "type", "")
        if kind == "text":
            parts.append(block.text)
        elif kind in ("image", "audio"):
            parts.append(f"[{kind}: {block.mime_type}, {len(block.data) * 3 // 4:,} bytes]")
        elif kind == "resource_link":
            parts.append(f"[resource: {block.uri}]")
        elif kind == "resource":
            inner = block.resource
            parts.append(getattr(inner, "text", None) or f"[resource: {inner.uri}]")
        else:
            parts.append(f"[{kind or type(block).__name__} content]")
    return "\n".join(parts)


def _cause(error: BaseException) -> BaseException:
    """Return the first error inside task groups' exception groups: the one to report."""
    while isinstance(error, BaseExceptionGroup) and error.exceptions:
        error = error.exceptions[0]
    return error


class MCPClient:
    """A connection to one MCP server, whose tools become nodestep tools.

    Use it as a context manager: ``async with MCPClient(...) as client`` in async code,
    ``with MCPClient(...) as client`` in a script (the connection then lives on a thread
    of its own, and the tools work from any run). Leaving the block closes the connection
    and stops a server it started.

    Args:
        command: Start the server as a child process and talk over its stdin and stdout:
            the program and its arguments, e.g. ``["python", "server.py"]``.
        url: Or talk streamable HTTP to the server at this URL, e.g.
            ``"http://127.0.0.1:8000/mcp"``.
        name: The server's name in errors and tool messages; defaults to the name the
            server gives, else the program or the URL.
        env: Environment variables for the child process, over the default ones.
        cwd: The child process's working directory.
        headers: HTTP headers sent with each request to ``url`` (e.g. an
            ``Authorization``).
        timeout: Seconds one tool call may take; a call that takes longer is given up
            and raises ``MCPToolError``. A tool can set its own (``MCPTool.timeout``).
        connect_timeout: Seconds the connection and each listing may take.

    Raises:
        GraphConfigError: neither or both of ``command`` and ``url``, a ``command`` that
            is not a list of strings, a ``url`` that is not http(s), a bad timeout, an
            ``env`` or ``headers`` that is not a dict of strings, a ``name`` that is not a
            non-blank str, or the mcp package is not installed.
    """

    def __init__(
        self,
        *,
        command: Sequence[str] | None = None,
        url: str | None = None,
        name: str | None = None,
        env: Mapping[str, str] | None = None,
        cwd: str | Path | None = None,
        headers: Mapping[str, str] | None = None,
        timeout: float = 30.0,
        connect_timeout: float = 30.0,
    ) -> None:
        self._mcp = load_mcp("mcp")
        if (command is None) == (url is None):
            raise GraphConfigError(
                "MCPClient connects to one server: pass command=[program, *args] to start "
                "it over stdio, or url='http://host:port/mcp' for streamable HTTP."
            )
        check_options(timeout, connect_timeout)
        check_texts(env, headers, name)
        self.timeout, self.connect_timeout = float(timeout), float(connect_timeout)
        self._target: Any = self._target_of(command, url, env, cwd)
        self._headers = dict(headers or {})
        self.name = name or (Path(command[0]).name if command else str(url))
        self._named = name is not None
        self._client: Any = None
        self._stack: AsyncExitStack | None = None
        self._sync: ExitStack | None = None
        self._portal: Any = None
        self._thread: int | None = None
        self._answers: HttpAnswers | None = None  # over HTTP: the statuses it answered

    def _target_of(
        self,
        command: Sequence[str] | None,
        url: str | None,
        env: Mapping[str, str] | None,
        cwd: str | Path | None,
    ) -> Any:
        if url is not None:
            if not isinstance(url, str) or not url.startswith(("http://", "https://")):
                raise GraphConfigError(
                    f"MCPClient got url={url!r}; pass the server's http:// or https:// URL, "
                    f"e.g. 'http://127.0.0.1:8000/mcp', or command=[...] for a local server."
                )
            return url
        if (
            isinstance(command, str)
            or not command
            or not all(isinstance(part, str) and part for part in command)
        ):
            raise GraphConfigError(
                f"MCPClient got command={command!r}; pass the program and its arguments as "
                f"a list of strings, e.g. [sys.executable, 'server.py']."
            )
        return self._mcp.StdioServerParameters(
            command=command[0], args=list(command[1:]), env=dict(env or {}) or None, cwd=cwd
        )

    async def __aenter__(self) -> MCPClient:
        if self._stack is not None:
            raise GraphConfigError(f"MCPClient {self.name!r} is already open; open it once.")
        stack = AsyncExitStack()
        try:
            client = self._mcp.Client(
                await self._transport(stack), read_timeout_seconds=self.connect_timeout
            )
            # No fail_after here: the client's task groups start inside; its read
            # timeout bounds the handshake instead.
            await stack.enter_async_context(client)
        except BaseException as error:
            await stack.aclose()
            if isinstance(error, Exception):
                raise self._failed("connect", None, error) from error
            raise
        self._client, self._stack, self._thread = client, stack, threading.get_ident()
        info = client.server_info
        if not self._named and info is not None and info.name:
            self.name = info.name
        return self

    async def _transport(self, stack: AsyncExitStack) -> Any:
        """Return what the SDK's ``Client`` connects through; over HTTP, an HTTP client
        with the headers, which notes the statuses the server answers (see
        ``_mcp_http``), is opened on ``stack``, so that it closes with the connection."""
        if not isinstance(self._target, str):
            return self._target  # a child process's parameters
        httpx = load_mcp("httpx2")  # the HTTP client the mcp SDK is built on
        # No read limit: a server may hold its event stream open, and each call has its
        # own timeout.
        limits = httpx.Timeout(self.connect_timeout, read=None)
        self._answers = HttpAnswers()
        http = await stack.enter_async_context(
            httpx.AsyncClient(
                headers=self._headers, timeout=limits, event_hooks=self._answers.hooks()
            )
        )
        transport = load_mcp("mcp.client.streamable_http")
        return transport.streamable_http_client(self._target, http_client=http)

    async def __aexit__(self, *exc: object) -> None:
        # The thread too: a closed client lives on none, so a later call is told it is not
        # open, not that it runs on the wrong loop.
        stack, self._stack, self._client, self._thread = self._stack, None, None, None
        if stack is not None:
            await stack.aclose()

    def __enter__(self) -> MCPClient:
        sync = ExitStack()
        self._portal = sync.enter_context(anyio.from_thread.start_blocking_portal())
        try:
            sync.enter_context(self._portal.wrap_async_context_manager(self))
        except BaseException:
            sync.close()
            self._portal = None
            raise
        self._sync = sync
        return self

    def __exit__(self, *exc: object) -> None:
        sync, self._sync = self._sync, None
        try:
            if sync is not None:
                sync.close()
        finally:
            self._portal = None

    async def tools(
        self,
        *,
        only: Sequence[str] | None = None,
        prefix: str = "",
        skip_unmappable: bool = False,
    ) -> list[Tool]:
        """List the server's tools as ``MCPTool``\\s.

        Args:
            only: The server's names of the tools to use, in this order; ``None`` takes
                every tool the server lists.
            prefix: Put before each tool's name (e.g. ``"files_"``), so two servers'
                tools of one name stay apart. A name a model cannot take (a ``.`` or a
                ``/``) has those characters replaced by ``_``.
            skip_unmappable: Leave out a tool whose input schema cannot be used, instead
                of raising ``MCPSchemaError``.

        Returns:
            The tools.

        Raises:
            MCPSchemaError: a tool's input schema cannot be used (naming the server,
                the tool and the schema part).
            MCPToolError: the server did not list its tools.
            GraphConfigError: a name in ``only`` the server does not list (or ``only``
                not a list of names), a ``prefix`` that is not letters, digits, ``_`` and
                ``-``, two tools of one name, a tool without a name (left out with
                ``skip_unmappable``), or the client is not open.
        """
        check_listing(only, prefix)
        listed = await self._run(self._list)
        made: dict[str, MCPTool] = {}
        skipped: set[str] = set()
        for raw in listed:
            if only is not None and raw.name not in only:
                continue
            try:
                tool = MCPTool(self, raw, prefix=prefix)
            except GraphConfigError:
                if skip_unmappable:
                    skipped.add(raw.name)
                    continue
                raise
            refuse_same_name(self.name, made.values(), tool)
            made[raw.name] = tool
        if only is None:
            return list(made.values())
        # A tool left out as unmappable is listed all the same: not missing.
        missing = [name for name in only if name not in made and name not in skipped]
        if missing:
            listed_names = ", ".join(repr(t.name) for t in listed) or "none"
            raise GraphConfigError(
                f"MCP server {self.name!r} has no tool {', '.join(map(repr, missing))}; its "
                f"tools are {listed_names}."
            )
        return [made[name] for name in only if name in made]

    def tools_sync(
        self,
        *,
        only: Sequence[str] | None = None,
        prefix: str = "",
        skip_unmappable: bool = False,
    ) -> list[Tool]:
        """Run ``tools`` from sync code, on a client opened with ``with``; same arguments."""
        portal = self._open_portal("tools_sync()")
        return portal.call(  # type: ignore[no-any-return]
            lambda: self.tools(only=only, prefix=prefix, skip_unmappable=skip_unmappable)
        )

    async def _list(self) -> list[Any]:
        client = self._open()
        found: list[Any] = []
        cursor = None
        try:
            with anyio.fail_after(self.connect_timeout):
                while True:
                    page = await client.list_tools(cursor=cursor)
                    found.extend(page.tools)
                    cursor = page.next_cursor
                    if not cursor:
                        return found
        except Exception as error:
            raise self._failed("list the tools", None, error) from error

    async def call(self, tool: str, arguments: dict[str, Any], timeout: float | None = None) -> Any:
        """Call the server's tool ``tool`` and return what it answered.

        Args:
            tool: The tool's name, as the server lists it.
            arguments: Its arguments (unchecked: ``MCPTool.ainvoke`` checks them).
            timeout: Seconds the call may take; defaults to the client's ``timeout``.

        Returns:
            The structured content when the server sent some, else the text of its
            content blocks (an image or a resource is described in brackets).

        Raises:
            MCPToolError: the tool answered an error, or the call failed or timed out.
            GraphConfigError: the client is not open.
        """
        limit = self.timeout if timeout is None else timeout
        return await self._run(lambda: self._call(tool, arguments, limit))

    async def _call(self, tool: str, arguments: dict[str, Any], limit: float) -> Any:
        client = self._open()
        try:
            with anyio.fail_after(limit):
                # The call's own limit, not the client's read timeout (connect_timeout),
                # which the SDK would otherwise apply to every request, cutting a call
                # short of a longer `timeout`.
                result = await client.call_tool(tool, arguments, read_timeout_seconds=limit)
        except Exception as error:
            raise self._failed("call", tool, error, limit) from error
        text = _content_text(result.content)
        if result.is_error:
            shown = text[:_SHOWN] or "no message"
            raise MCPToolError(
                f"MCP server {self.name!r}: tool {tool!r} answered an error: {shown}",
                server=self.name,
                tool=tool,
            )
        if result.structured_content is not None:
            return result.structured_content
        return text

    def _open(self) -> Any:
        if self._client is None:
            raise GraphConfigError(
                f"MCPClient {self.name!r} is not open: use its tools inside "
                f"'async with MCPClient(...) as client' (or 'with', in sync code)."
            )
        return self._client

    def _open_portal(self, what: str) -> Any:
        if self._portal is None:
            raise GraphConfigError(
                f"MCPClient {self.name!r}: {what} works on a client opened with 'with "
                f"MCPClient(...) as client'; in async code use 'async with' and await the "
                f"async form."
            )
        return self._portal

    async def _run(self, work: Callable[[], Coroutine[Any, Any, T]]) -> T:
        """Run ``work`` where the connection lives: here, or on the sync client's thread."""
        portal = self._portal
        if portal is not None and threading.get_ident() != self._thread:
            return await anyio.to_thread.run_sync(portal.call, work, abandon_on_cancel=True)
        if portal is None and self._thread is not None and threading.get_ident() != self._thread:
            raise GraphConfigError(
                f"MCPClient {self.name!r} was opened with 'async with' on another thread's "
                f"event loop, and its connection works on that loop only: run the graph "
                f"there (await graph.ainvoke(...)), or open the client with 'with' in sync "
                f"code."
            )
        return await work()

    def _failed(
        self, what: str, tool: str | None, error: BaseException, limit: float | None = None
    ) -> MCPToolError:
        """Return the ``MCPToolError`` for a failure of the connection, a listing or a call."""
        error = _cause(error)
        of = f"tool {tool!r}" if tool else "it"
        doing = f"call {of}" if tool else what
        # The SDK's own request timeout is an error of its protocol, not a TimeoutError.
        if isinstance(error, TimeoutError) or getattr(error, "code", None) == _REQUEST_TIMEOUT:
            seconds = limit if limit is not None else self.connect_timeout
            fix = (
                "the timeout (MCPClient(timeout=...) or the tool's .timeout)"
                if tool
                else "MCPClient(connect_timeout=...)"
            )
            return MCPToolError(
                f"MCP server {self.name!r} did not answer within {seconds:g} s when asked to "
                f"{doing}; the call was given up. Raise {fix} if it needs longer.",
                server=self.name,
                tool=tool or "",
                timed_out=True,
            )
        reason = str(error) or type(error).__name__
        status = self._answers.status(_METHODS[what], tool or "") if self._answers else None
        if status is not None:
            return self._http_failed(what, tool, doing, reason, status)
        if "connection closed" in reason.lower():
            reason = f"{reason} (the server stopped or hung up)"
        return MCPToolError(
            f"MCP server {self.name!r} failed when asked to {doing}: {reason}",
            server=self.name,
            tool=tool or "",
        )

    def _http_failed(
        self, what: str, tool: str | None, doing: str, reason: str, status: int
    ) -> MCPToolError:
        """Return the ``MCPToolError`` for a request the server answered with an HTTP
        error ``status``, naming its URL (without a user, a password or a query, which
        may hold a key: the model reads a call's error)."""
        url = urlsplit(self._target)
        shown_url = f"{url.scheme}://{url.netloc.rpartition('@')[2]}{url.path}"
        at = "" if self.name == self._target else f" at {shown_url}"
        said = "" if reason in _STAND_INS else f" ({reason})"
        shown, fix = http_advice(status, connecting=what == "connect")
        return MCPToolError(
            f"MCP server {self.name!r}{at} answered {shown} when asked to {doing}{said}. {fix}",
            server=self.name,
            tool=tool or "",
            status=status,
        )

    def __repr__(self) -> str:
        state = "open" if self._client is not None else "closed"
        return f"MCPClient({self.name!r}, {state})"


class _Arguments(BaseModel):
    """The base of an MCP tool's ``args_model``: any object, checked by the tool's schema."""

    model_config = ConfigDict(extra="allow")


class MCPTool(Tool):
    """One tool of an MCP server, made by ``MCPClient.tools``.

    Attributes:
        server_name: The tool's name on the server (``name`` is the model's, which may
            have a prefix, or ``_`` for characters a model cannot take).
        client: The client that calls it.
        timeout: Seconds a call may take; ``None`` uses the client's ``timeout``.
    """

    def __init__(self, client: MCPClient, listed: Any, *, prefix: str = "") -> None:
        # Tool.__init__ reads a Python signature; here the arguments come from the
        # server's listing, so the same attributes are set from it.
        if not listed.name:
            # A model cannot call a tool without a name: unmappable, as a bad schema is.
            raise GraphConfigError(
                f"MCP server {client.name!r} lists a tool with an empty name "
                f"(described {(listed.description or '')[:80]!r}), which a model cannot "
                f"call; leave it out with skip_unmappable=True or only=[...]."
            )
        self.server_name: str = listed.name
        self.name = model_name(listed.name, prefix)
        self.client = client
        self._timeout: float | None = None
        self.description = (listed.description or listed.title or listed.name).strip()
        self.approve, self.is_async, self.fn = False, True, self.ainvoke
        self._arguments = ArgumentsSchema(client.name, listed.name, listed.input_schema)
        self._schema = self._arguments.shown
        check, title = self._arguments.check, f"{self.name}_args"

        def checked(cls: type[BaseModel], data: Any) -> Any:
            return check(data, title)

        self.args_model = create_model(
            title,
            __base__=_Arguments,
            __validators__={"check": model_validator(mode="before")(checked)},  # type: ignore[dict-item]
        )

    @property
    def timeout(self) -> float | None:
        """Seconds a call may take; ``None`` uses the client's ``timeout``."""
        return self._timeout

    @timeout.setter
    def timeout(self, seconds: float | None) -> None:
        # Checked when set: a bad value would otherwise surface at the first call, as
        # a failure of the server.
        if seconds is not None and not (is_finite_number(seconds) and seconds > 0):
            raise GraphConfigError(
                f"MCP tool {self.name!r} got timeout={shown_number(seconds)}; pass a number "
                f"of seconds above 0, e.g. 120, or None for the client's timeout."
            )
        self._timeout = None if seconds is None else float(seconds)

    def validate(self, args: dict[str, Any]) -> dict[str, Any]:
        """Return ``args`` if they fit the tool's input schema.

        Raises:
            pydantic.ValidationError: they do not; each problem at its path.
        """
        return self._arguments.check(args, f"{self.name}_args")

    async def ainvoke(
        self,
        args: dict[str, Any],
        *,
        inline: bool = False,
        ctx: NodeContext | None = None,
        state: Any = None,
        call_id: str = "",
        workspace: Any = None,
    ) -> Any:
        """Check ``args`` and call the tool on its server.

        Args:
            args: The arguments, as the model wrote them.
            inline: Unused: a call never blocks the event loop.
            ctx: Unused: an MCP tool needs nothing from the run.
            state: Unused, as ``ctx``.
            call_id: Unused, as ``ctx``.
            workspace: Unused, as ``ctx``.

        Returns:
            The structured content of the answer, or its text.

        Raises:
            pydantic.ValidationError: the arguments do not fit the input schema; nothing
                is sent.
            MCPToolError: the tool answered an error, or the call failed or timed out.
            GraphConfigError: the client is not open.
        """
        checked = self.validate(args)
        return await self.client.call(self.server_name, checked, self.timeout)

    def __call__(self, *args: Any, **kwargs: Any) -> Any:
        raise TypeError(
            f"MCP tool {self.name!r} calls a server: await tool.ainvoke(args) or run it in "
            f"a tool_node, rather than calling it."
        )

    def __repr__(self) -> str:
        return f"MCPTool({self.name!r}, server={self.client.name!r})"
