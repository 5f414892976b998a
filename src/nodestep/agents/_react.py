"""A prebuilt ReAct agent: a model node and a tool node in a loop, as an ordinary ``Graph``.

::

    START >> agent
    agent >> when(has_tool_calls, tools, otherwise=END)
    tools >> agent

With no tools the agent is a chat: ``START >> agent >> END``. With ``response_format=`` a
``structure`` node follows the answer (see ``_structured``).

Because it is a plain ``Graph``, threads, stores, streaming, interrupts (tool approval),
forks and time travel work on it as on any graph.
"""

from __future__ import annotations

from collections.abc import Collection, Sequence
from typing import Any, TypeVar

from pydantic import BaseModel

from nodestep._errors import GraphConfigError
from nodestep._flow.edges import END, START
from nodestep._flow.middleware import Middleware, check_middleware
from nodestep._flow.nodes import Node
from nodestep._flow.resilience import RetryPolicy
from nodestep._flow.routing import when
from nodestep._graph.graph import Graph
from nodestep.agents._conversation import MessagesState
from nodestep.agents._input_model import InputCheckedGraph, check_input_model
from nodestep.agents._messages import AssistantMessage
from nodestep.agents._model_node import Conversation, check_system, model_node
from nodestep.agents._models import ChatModel
from nodestep.agents._structured import (
    asks_again,
    check_response_format,
    structured_node,
    with_instruction,
    with_response_field,
)
from nodestep.agents._tool_node import ErrorHandler, tool_node
from nodestep.agents._tools import Tool, check_tool_list
from nodestep.agents._workspace.handle import Workspace
from nodestep.store import StateStore

__all__ = ["create_react_agent", "has_tool_calls"]

S = TypeVar("S", bound=MessagesState)


def has_tool_calls(state: Any) -> bool:
    """Tell whether the last message is an assistant message that calls tools."""
    messages = state.messages
    last = messages[-1] if messages else None
    return isinstance(last, AssistantMessage) and bool(last.tool_calls)


def create_react_agent(
    model: ChatModel,
    tools: Sequence[Tool],
    *,
    system: str | None = None,
    state: type[S] = MessagesState,  # type: ignore[assignment]
    name: str = "react_agent",
    max_steps: int = 25,
    timeout: float | None = None,
    state_store: StateStore | None = None,
    handle_errors: bool | ErrorHandler = True,
    stream: bool = True,
    retry: RetryPolicy | None = None,
    conversation: Conversation = "state",
    tool_choice: str | None = None,
    response_format: type[BaseModel] | None = None,
    response_attempts: int = 3,
    input_model: type[BaseModel] | None = None,
    middleware: Sequence[Middleware] | None = None,
    workspace: Workspace | None = None,
) -> Graph[S]:
    """Build a ReAct agent: the model answers, or calls tools and sees their results.

    Nodes: ``agent`` (a ``model_node``), ``tools`` (a ``tool_node``; none without tools:
    a chat) and, with ``response_format``, ``structure`` (see the module). A round of tool
    calls takes two supersteps, so ``max_steps`` bounds the rounds.

    Args:
        model: The chat model.
        tools: The tools the model may call; ``[]`` for a chat.
        system: The system prompt, sent on every call, never stored.
        state: ``MessagesState`` or a subclass of it.
        name, max_steps, timeout, state_store: As for ``Graph``.
        handle_errors, workspace: As for ``tool_node`` (see ``workspace_tools()``).
        stream, retry, conversation, tool_choice: As for ``model_node``.
        response_format: A pydantic model the final answer is validated into (the state's
            ``structured_response``); ``response_attempts`` answers may miss it per turn.
        input_model: A pydantic model that validates each run's input before it starts.
        middleware: ``Middleware`` for its runs, nodes, model and tool calls; adds their tools.

    Raises:
        GraphConfigError: a state not derived from ``MessagesState``, a
            ``response_format`` or ``input_model`` that is no pydantic model class, or the
            errors of ``model_node`` and ``tool_node``.
    """
    check_system(system)
    state = _agent_state(state, response_format, response_attempts)
    hooks, tools = _with_tools(middleware, tools, name)
    agent = model_node(  # named "agent", the default
        model,
        tools=tools,
        system=with_instruction(system, response_format),
        stream=stream,
        retry=retry,
        conversation=conversation,
        tool_choice=tool_choice,
    )
    graph: Graph[S] = _graph(state, input_model, hooks, name, max_steps, timeout, state_store)
    run_tools = _tool_node(tools, handle_errors, workspace)
    return _wired(graph, agent, run_tools, response_format, response_attempts)


def _graph(
    state: Any,
    input_model: type[BaseModel] | None,
    middleware: tuple[Middleware, ...],
    name: str,
    max_steps: int,
    timeout: float | None,
    state_store: StateStore | None,
) -> Any:
    """Return the agent's empty graph; one that checks its input with an input model.

    Raises:
        GraphConfigError: ``input_model`` is refused (see ``check_input_model``).
    """
    options: dict[str, Any] = {
        "name": name,
        "max_steps": max_steps,
        "timeout": timeout,
        "state_store": state_store,
        "middleware": middleware,
    }
    if input_model is None:
        return Graph(state, **options)
    return InputCheckedGraph(state, input_model=check_input_model(input_model, state), **options)


def _agent_state(state: Any, response_format: Any, attempts: int) -> Any:
    """Return the agent's state class: ``state``, with ``structured_response`` if asked.

    Raises:
        GraphConfigError: ``state`` is not a ``MessagesState`` class, or the
            ``response_format``/``attempts`` are refused (see ``check_response_format``).
    """
    if not isinstance(state, type) or not issubclass(state, MessagesState):
        raise GraphConfigError(
            f"create_react_agent takes a state class derived from MessagesState, got "
            f"{state!r}; subclass MessagesState to add fields."
        )
    if response_format is None:
        return state
    return with_response_field(state, check_response_format(response_format, attempts))


def _wired(
    graph: Graph[S],
    agent: Node,
    run_tools: Node | None,
    response_format: type[BaseModel] | None,
    attempts: int,
) -> Graph[S]:
    """Return ``graph`` with the agent's flow (see the module's drawing)."""
    answered: Any = END
    routes: list[Any] = []
    if response_format is not None:
        structure = structured_node(response_format, attempts)
        answered = structure
        routes.append(structure >> when(asks_again, agent, otherwise=END))
    if run_tools is None:  # a chat: the model only answers
        return graph.flow(START >> agent, agent >> answered, *routes)
    return graph.flow(
        START >> agent,
        agent >> when(has_tool_calls, run_tools, otherwise=answered),
        run_tools >> agent,
        *routes,
    )


def _with_tools(
    middleware: Sequence[Middleware] | None, tools: Sequence[Tool], name: str
) -> tuple[tuple[Middleware, ...], list[Tool]]:
    """Return the checked middleware, and ``tools`` with the tools the middleware offer."""
    hooks = check_middleware(middleware, f"create_react_agent '{name}'")
    check_tool_list(tools, "create_react_agent")
    every = [*tools, *(t for item in hooks for t in item.tools())]
    known = {getattr(t, "name", None) for t in every}
    for item in hooks:
        unknown = sorted(set(_tool_names(item)) - known)
        if unknown:
            names = ", ".join(repr(n) for n in sorted(n for n in known if isinstance(n, str)))
            raise GraphConfigError(
                f"{item!r} of create_react_agent '{name}' names the tool(s) "
                f"{', '.join(repr(n) for n in unknown)}, which the agent does not have: "
                f"the tools are {names or 'none'}. Name one of them."
            )
    return hooks, every


def _tool_names(item: Middleware) -> Collection[str]:
    """Return the tool names ``item.tool_names()`` gives: any collection of strings."""
    names = item.tool_names()
    if isinstance(names, str) or not all(isinstance(n, str) for n in names):
        raise GraphConfigError(
            f"{item!r}.tool_names() returned {names!r}; return a collection of tool names, "
            f"e.g. frozenset({{'send_email'}})."
        )
    return names


def _tool_node(
    tools: Sequence[Tool], handle_errors: bool | ErrorHandler, workspace: Workspace | None
) -> Node | None:
    """Return the agent's ``tools`` node; ``None`` for a chat (no tools)."""
    if not tools:
        return None
    return tool_node(tools, name="tools", handle_errors=handle_errors, workspace=workspace)
