"""A prebuilt ReAct agent: a model node and a tool node in a loop, as an ordinary ``Graph``.

::

    START >> agent
    agent >> when(has_tool_calls, tools, otherwise=END)
    tools >> agent

Because it is a plain ``Graph``, threads, stores, streaming, interrupts (tool approval),
forks and time travel work on it as on any graph.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any, TypeVar

from nodestep._errors import GraphConfigError
from nodestep._flow.edges import END, START
from nodestep._flow.resilience import RetryPolicy
from nodestep._flow.routing import when
from nodestep._graph.graph import Graph
from nodestep.agents._conversation import MessagesState
from nodestep.agents._messages import AssistantMessage
from nodestep.agents._model_node import Conversation, model_node
from nodestep.agents._models import ChatModel
from nodestep.agents._tool_node import ErrorHandler, tool_node
from nodestep.agents._tools import Tool
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
    workspace: Workspace | None = None,
) -> Graph[S]:
    """Build a ReAct agent: the model answers, or calls tools and sees their results.

    The graph has two nodes: ``agent`` (a ``model_node``) and ``tools`` (a ``tool_node``).
    Each round of tool calls takes two supersteps, so ``max_steps`` bounds the rounds:
    a run that needs more raises ``RunLimitExceededError``.

    Args:
        model: The chat model.
        tools: The tools the model may call.
        system: The system prompt, sent on every call and never stored.
        state: The state class: ``MessagesState`` or a subclass of it.
        name: The graph's name.
        max_steps: The most supersteps one run may take.
        timeout: Seconds one run may spend in supersteps, or ``None``.
        state_store: Where threads are kept (needed for approval interrupts).
        handle_errors: See ``tool_node``.
        stream: See ``model_node``.
        retry: The model node's ``RetryPolicy`` (see ``model_node``).
        conversation: Where the model node keeps the conversation (see ``model_node``).
        workspace: The workspace of the tools (see ``tool_node``), e.g. with
            ``workspace_tools()`` and ``state=WorkspaceState``.

    Returns:
        The graph.

    Raises:
        GraphConfigError: no tools, a state class that is not a ``MessagesState``, or the
            errors of ``model_node`` and ``tool_node``.
    """
    if not isinstance(state, type) or not issubclass(state, MessagesState):
        raise GraphConfigError(
            f"create_react_agent takes a state class derived from MessagesState, got "
            f"{state!r}; subclass MessagesState to add fields."
        )
    agent = model_node(  # named "agent", the default
        model, tools=tools, system=system, stream=stream, retry=retry, conversation=conversation
    )
    run_tools = tool_node(tools, name="tools", handle_errors=handle_errors, workspace=workspace)
    graph = Graph(state, name=name, max_steps=max_steps, timeout=timeout, state_store=state_store)
    return graph.flow(
        START >> agent,
        agent >> when(has_tool_calls, run_tools, otherwise=END),
        run_tools >> agent,
    )
