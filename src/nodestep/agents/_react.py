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

from collections.abc import Sequence
from typing import Any, TypeVar

from pydantic import BaseModel

from nodestep._errors import GraphConfigError
from nodestep._flow.edges import END, START
from nodestep._flow.resilience import RetryPolicy
from nodestep._flow.routing import when
from nodestep._graph.graph import Graph
from nodestep.agents._conversation import MessagesState
from nodestep.agents._input_model import InputCheckedGraph, check_input_model
from nodestep.agents._messages import AssistantMessage
from nodestep.agents._model_node import Conversation, model_node
from nodestep.agents._models import ChatModel
from nodestep.agents._structured import (
    answer_instruction,
    asks_again,
    check_response_format,
    structured_node,
    with_response_field,
)
from nodestep.agents._tool_node import ErrorHandler, tool_node
from nodestep.agents._tools import Tool
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
) -> Graph[S]:
    """Build a ReAct agent: the model answers, or calls tools and sees their results.

    The graph has two nodes: ``agent`` (a ``model_node``) and ``tools`` (a ``tool_node``);
    with no tools, only ``agent``: a chat. Each round of tool calls takes two supersteps,
    so ``max_steps`` bounds the rounds: a run that needs more raises
    ``RunLimitExceededError``.

    With ``response_format=``, the model is told to give its final answer as JSON of that
    model, and a ``structure`` node validates the answer into the state's
    ``structured_response`` (the state class gets that field if it has none). An answer
    that does not fit goes back to the model with the validation errors; the
    ``response_attempts``-th that does not fit fails the run with a ``ModelError``.

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
        tool_choice: ``"auto"``, ``"required"``, ``"none"`` or a tool's name, for the
            model (see ``model_node``); ``None`` leaves it to the model.
        response_format: A pydantic model the final answer is validated into, or ``None``.
        response_attempts: How many answers may miss ``response_format`` in one turn.
        input_model: A pydantic model that validates the input of each run before it
            starts (its fields must be fields of the state); ``None`` takes the state's.

    Returns:
        The graph.

    Raises:
        GraphConfigError: a state class that is not a ``MessagesState``, a
            ``response_format`` or ``input_model`` that is not a pydantic model class, an
            input model field the state lacks, a ``tool_choice`` that names no tool, or the
            errors of ``model_node`` and ``tool_node``.
    """
    if not isinstance(state, type) or not issubclass(state, MessagesState):
        raise GraphConfigError(
            f"create_react_agent takes a state class derived from MessagesState, got "
            f"{state!r}; subclass MessagesState to add fields."
        )
    if response_format is not None:
        response_format = check_response_format(response_format, response_attempts)
        instruction = answer_instruction(response_format)
        system = f"{system}\n\n{instruction}" if system else instruction
        state = with_response_field(state, response_format)
    agent = model_node(  # named "agent", the default
        model,
        tools=tools,
        system=system,
        stream=stream,
        retry=retry,
        conversation=conversation,
        tool_choice=tool_choice,
    )
    options: dict[str, Any] = {
        "name": name,
        "max_steps": max_steps,
        "timeout": timeout,
        "state_store": state_store,
    }
    graph: Graph[S] = (
        Graph(state, **options)
        if input_model is None
        else InputCheckedGraph(state, input_model=check_input_model(input_model, state), **options)
    )
    answered: Any = END
    routes: list[Any] = []
    if response_format is not None:
        structure = structured_node(response_format, response_attempts)
        answered = structure
        routes.append(structure >> when(asks_again, agent, otherwise=END))
    if not tools:  # a chat: the model only answers
        return graph.flow(START >> agent, agent >> answered, *routes)
    run_tools = tool_node(tools, name="tools", handle_errors=handle_errors)
    return graph.flow(
        START >> agent,
        agent >> when(has_tool_calls, run_tools, otherwise=answered),
        run_tools >> agent,
        *routes,
    )
