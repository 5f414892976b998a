"""A graph or an agent as one tool of an MCP server: ``mcp_server`` and ``serve_mcp``.

``mcp_server(graph)`` makes a server (the ``mcp`` SDK's, ``pip install 'nodestep[mcp]'``)
with one tool that runs the graph. Its input schema is the state's, each field an
argument (a patch of the state, as ``invoke`` takes), unless ``input_schema=`` gives
one. A graph whose state is a ``MessagesState`` (an agent), or an ``Agent`` of a specs
folder, takes one ``message`` instead, and answers with its reply. ``serve_mcp(graph)``
runs that server over stdio, or streamable HTTP with ``transport="http"``.

Each call runs on a thread of its own (``threads="per_call"``), or, with
``threads="argument"``, on the thread the caller names in a ``thread_id`` argument, so a
conversation goes on over calls; the answer always says which thread ran. A run that
pauses on an interrupt answers so, with what it asks (not as an error): in
``"argument"`` mode the caller answers with the same ``thread_id`` and ``resume``.
"""

from __future__ import annotations

import copy
from collections.abc import Awaitable, Callable, Iterable, Mapping
from typing import Any, Literal

import anyio
import orjson
from pydantic import ValidationError

from nodestep._engine.interrupts import Interrupt, Resume
from nodestep._engine.results import GraphResult
from nodestep._errors import GraphConfigError, NodestepError
from nodestep._graph.graph import Graph
from nodestep._ids import new_id
from nodestep._state.json import to_json_value
from nodestep.agents._conversation import MessagesState
from nodestep.agents._mcp import load_mcp
from nodestep.agents._messages import AssistantMessage, UserMessage
from nodestep.agents._specs.agent import Agent
from nodestep.agents._tools import argument_problem
from nodestep.store import InMemoryStateStore, StateStore

__all__ = ["mcp_server", "serve_mcp"]

Threads = Literal["per_call", "argument"]
_THREADS = ("per_call", "argument")
_EXTRA = {
    "thread_id": {
        "type": "string",
        "description": "The thread to run on, from an earlier answer, to go on with it; "
        "leave it out to start a new thread.",
    },
    "resume": {
        "description": "The answer to the question a paused run asked (with its thread_id)."
    },
}


def _graph_of(target: Any) -> Graph[Any]:
    if isinstance(target, Agent):
        return target.graph
    if isinstance(target, Graph):
        return target
    raise GraphConfigError(
        f"mcp_server serves a Graph or an Agent, got {type(target).__name__}: {target!r}."
    )


def _state_schema(graph: Graph[Any], agent: bool) -> dict[str, Any]:
    if agent or issubclass(graph.state, MessagesState):
        return {
            "type": "object",
            "properties": {"message": {"type": "string", "description": "What to ask."}},
            "required": ["message"],
        }
    schema: dict[str, Any] = graph.state.model_json_schema(mode="validation")
    schema.pop("title", None)
    return schema


def _tool_schema(
    graph: Graph[Any], agent: bool, given: Mapping[str, Any] | None, threads: Threads
) -> dict[str, Any]:
    schema = copy.deepcopy(dict(given)) if given else _state_schema(graph, agent)
    if threads == "argument":
        schema = {**schema, "properties": {**schema.get("properties", {}), **_EXTRA}}
        schema.pop("required", None)  # a call that resumes, or goes on, repeats nothing
    return schema


def _description(graph: Graph[Any], agent: bool) -> str:
    if agent or issubclass(graph.state, MessagesState):
        return f"Ask agent {graph.name!r}: send it a message, get its reply."
    own = vars(graph.state).get("__doc__")  # not a base class's, which describes another
    return own.strip() if isinstance(own, str) and own.strip() else f"Run graph {graph.name!r}."


class _GraphTool:
    """Runs the graph for one tool call and makes the call's result."""

    def __init__(
        self,
        graph: Graph[Any],
        threads: Threads,
        store: StateStore | None,
    ) -> None:
        self.graph, self.threads, self.store = graph, threads, store
        self.chat = issubclass(graph.state, MessagesState)

    async def run(self, arguments: dict[str, Any]) -> Any:
        args = dict(arguments)
        thread_id = args.pop("thread_id", None) if self.threads == "argument" else None
        resume = args.pop("resume", None) if self.threads == "argument" else None
        options: dict[str, Any] = {}
        if self.store is not None:
            options = {"state_store": self.store, "thread_id": thread_id or new_id()}
        if resume is not None:
            if thread_id is None:
                return _answer("resume answers a paused run: pass its thread_id too.", True)
            options["resume"] = Resume(resume)
        problem = _message_problem(self.graph.name, args, resume) if self.chat else ""
        if problem:
            return _answer(problem, True)
        try:
            result = await self.graph.ainvoke(self._input(args, resume), **options)
        except (NodestepError, ValidationError, ValueError) as error:
            return _answer(self._failure(error), True)
        return self._result(result)

    def _input(self, args: dict[str, Any], resume: Any) -> dict[str, Any] | None:
        if self.chat:
            message = args.get("message")
            if resume is not None and message is None:
                return None
            return {"messages": [UserMessage(content=str(message or ""))]}
        return None if resume is not None and not args else args

    def _failure(self, error: Exception) -> str:
        if isinstance(error, ValidationError):
            what = argument_problem(error)
        else:
            what = f"{type(error).__name__}: {error}"
        return f"The run of graph {self.graph.name!r} failed: {what}"

    def _result(self, result: GraphResult[Any]) -> Any:
        data: dict[str, Any] = {"thread_id": result.thread_id, "status": result.status}
        if result.status == "interrupted":
            return _paused(result.thread_id, result.interrupts.values(), self.threads)
        if self.chat:
            reply = next(
                (m for m in reversed(result.state.messages) if isinstance(m, AssistantMessage)),
                None,
            )
            data["reply"] = "" if reply is None else reply.content
            return _answer(data["reply"], False, data)
        data["state"] = to_json_value(result.data, what="the final state")
        return _answer(orjson.dumps(data["state"]).decode(), False, data)


class _AgentTool:
    """Steps an ``Agent`` (a specs folder's) for one tool call: its reply is the answer."""

    def __init__(self, agent: Agent, threads: Threads) -> None:
        self.agent, self.threads = agent, threads

    async def run(self, arguments: dict[str, Any]) -> Any:
        by_argument = self.threads == "argument"
        thread_id = arguments.get("thread_id") if by_argument else None
        resume = arguments.get("resume") if by_argument else None
        if resume is not None and thread_id is None:
            return _answer("resume answers a paused run: pass its thread_id too.", True)
        message = arguments.get("message")
        problem = _message_problem(self.agent.graph.name, arguments, resume)
        if problem:
            return _answer(problem, True)
        try:
            if resume is not None:
                step = await self.agent.step(execution_id=thread_id, resume=resume)
            else:
                step = await self.agent.step(str(message or ""), execution_id=thread_id or new_id())
        except NodestepError as error:
            return _answer(f"The agent failed: {type(error).__name__}: {error}", True)
        if step.status == "paused":
            return _paused(step.execution_id, step.interrupts, self.threads)
        if step.status == "failed":
            return _answer(f"The agent failed: {step.error}", True)
        data = {"thread_id": step.execution_id, "status": "completed", "reply": step.output}
        return _answer(step.output, False, data)


def _message_problem(name: str, arguments: Mapping[str, Any], resume: Any) -> str:
    """Return why a chat call's ``message`` cannot be asked, or ``""``.

    Why: the input schema says ``message`` is a string, but a client need not check it;
    unchecked, ``None`` or a missing one would be asked as an empty text, and a number or
    a list as its Python repr.
    """
    message = arguments.get("message")
    if message is None and resume is None:
        return (
            f"Agent {name!r} needs message, the text to ask (a string); the call gave "
            f"none. Call again with message='...'."
        )
    if message is not None and not isinstance(message, str):
        return (
            f"Agent {name!r} takes message as text (a string); the call gave "
            f"{type(message).__name__} {message!r:.80}. Call again with the text to ask."
        )
    return ""


def _paused(thread_id: str, interrupts: Iterable[Interrupt], threads: Threads) -> Any:
    """Return the answer of a run that paused: what each node asks, and how to go on."""
    asks = [
        {"key": i.key, "node": i.node, "id": i.id, "payload": to_json_value(i.payload)}
        for i in interrupts
    ]
    how = (
        "Call again with this thread_id and resume=<your answer>."
        if threads == "argument"
        else "This server runs each call on a new thread, so it cannot be resumed."
    )
    text = f"The run paused on thread {thread_id!r} and asks: "
    text += "; ".join(f"{a['node']}: {orjson.dumps(a['payload']).decode()}" for a in asks)
    data = {"thread_id": thread_id, "status": "interrupted", "interrupts": asks}
    return _answer(f"{text}. {how}", False, data)


def _answer(text: str, error: bool, structured: dict[str, Any] | None = None) -> Any:
    types = load_mcp("mcp_types")
    return types.CallToolResult(
        content=[types.TextContent(type="text", text=text)],
        structured_content=structured,
        is_error=error,
    )


def _graph_runner(graph: Graph[Any], threads: Threads, store: StateStore | None) -> _GraphTool:
    store = store or graph.state_store
    if store is None and threads == "argument":
        store = InMemoryStateStore()
    return _GraphTool(graph, threads, store)


def _check(threads: Any, tool_name: Any, input_schema: Any) -> None:
    if threads not in _THREADS:
        raise GraphConfigError(
            f"mcp_server got threads={threads!r}; pass 'per_call' (each call a new thread) "
            f"or 'argument' (the caller passes thread_id to go on with one)."
        )
    if tool_name is not None and (not isinstance(tool_name, str) or not tool_name):
        raise GraphConfigError(
            f"mcp_server got tool_name={tool_name!r}; pass a name, e.g. 'price'."
        )
    if input_schema is not None and (
        not isinstance(input_schema, Mapping) or input_schema.get("type") != "object"
    ):
        raise GraphConfigError(
            f"mcp_server got input_schema={input_schema!r}; pass a JSON Schema of an object "
            f"({{'type': 'object', 'properties': {{...}}}}): a tool's arguments are one."
        )


def mcp_server(
    graph: Graph[Any] | Agent,
    *,
    name: str | None = None,
    tool_name: str | None = None,
    description: str | None = None,
    input_schema: Mapping[str, Any] | None = None,
    threads: Threads = "per_call",
    state_store: StateStore | None = None,
) -> Any:
    """Make an MCP server whose one tool runs ``graph``.

    Args:
        graph: The graph, or an ``Agent`` of a specs folder: a call is one
            ``Agent.step`` with the ``message``, and answers its output.
        name: The server's name; defaults to the graph's.
        tool_name: The tool's name; defaults to the graph's.
        description: What the tool does, for the caller's model; defaults to the state
            class's docstring.
        input_schema: The tool's input schema (an object schema) instead of the
            state's; the arguments are the run's input.
        threads: ``"per_call"`` runs each call on a new thread; ``"argument"`` adds the
            arguments ``thread_id`` (go on with that thread) and ``resume`` (answer its
            interrupt).
        state_store: Where threads are kept; defaults to the graph's store, and with
            ``threads="argument"`` and no store, to an in-memory one (lost when the
            server stops). An ``Agent`` keeps its own (``Agent(state_store=...)``).

    Returns:
        The server: the ``mcp`` SDK's ``mcp.server.lowlevel.Server``, to run over any of
        its transports (``serve_mcp`` runs it over stdio or HTTP).

    Raises:
        GraphConfigError: ``graph`` is neither a ``Graph`` nor an ``Agent``, a bad
            ``threads``, ``tool_name`` or ``input_schema``, ``state_store`` with an
            ``Agent``, or the mcp package is not installed.
    """
    served = _graph_of(graph)
    _check(threads, tool_name, input_schema)
    if isinstance(graph, Agent) and state_store is not None:
        raise GraphConfigError(
            "mcp_server got state_store= with an Agent, which keeps its conversations in "
            "its own store: pass state_store= to Agent(...) instead."
        )
    types = load_mcp("mcp_types")
    agent = isinstance(graph, Agent)
    runner = _AgentTool(graph, threads) if isinstance(graph, Agent) else None
    run = (runner or _graph_runner(served, threads, state_store)).run
    listed = types.Tool(
        name=tool_name or served.name,
        description=description or _description(served, agent),
        input_schema=_tool_schema(served, agent, input_schema, threads),
    )
    return _server(name or served.name, listed, run)


def _server(name: str, listed: Any, run: Callable[[dict[str, Any]], Awaitable[Any]]) -> Any:
    """Return the SDK's server of the one tool ``listed``, whose calls ``run`` answers."""
    types = load_mcp("mcp_types")

    async def list_tools(ctx: Any, params: Any) -> Any:
        return types.ListToolsResult(tools=[listed])

    async def call_tool(ctx: Any, params: Any) -> Any:
        if params.name != listed.name:
            return _answer(f"There is no tool {params.name!r}; the tool is {listed.name!r}.", True)
        return await run(dict(params.arguments or {}))

    lowlevel = load_mcp("mcp.server.lowlevel")
    return lowlevel.Server(name, on_list_tools=list_tools, on_call_tool=call_tool)


def serve_mcp(
    graph: Graph[Any] | Agent,
    *,
    transport: Literal["stdio", "http"] = "stdio",
    host: str = "127.0.0.1",
    port: int = 8000,
    path: str = "/mcp",
    **options: Any,
) -> None:
    """Serve ``graph`` as an MCP tool until the process is stopped (or stdin closes).

    Args:
        graph: The graph or ``Agent``.
        transport: ``"stdio"`` (the caller started this process) or ``"http"``
            (streamable HTTP on ``host``:``port`` at ``path``).
        host: Where to listen, with ``"http"``.
        port: The port, with ``"http"``.
        path: The endpoint's path, with ``"http"``.
        **options: What ``mcp_server`` takes: ``name``, ``tool_name``, ``description``,
            ``input_schema``, ``threads``, ``state_store``.

    Raises:
        GraphConfigError: an unknown ``transport``, or what ``mcp_server`` raises.
    """
    if transport not in ("stdio", "http"):
        raise GraphConfigError(f"serve_mcp got transport={transport!r}; pass 'stdio' or 'http'.")
    server = mcp_server(graph, **options)
    if transport == "http":
        uvicorn = load_mcp("uvicorn")
        app = server.streamable_http_app(streamable_http_path=path, host=host)
        uvicorn.run(app, host=host, port=port, log_level="warning")
        return
    stdio = load_mcp("mcp.server.stdio")

    async def run() -> None:
        async with stdio.stdio_server() as (read, write):
            await server.run(read, write, server.create_initialization_options())

    anyio.run(run)
