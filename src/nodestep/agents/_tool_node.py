"""The tool node: runs the tool calls of the model's last reply, concurrently.

Each call's result goes back to the model as a ``ToolMessage``, in the order of the calls.
A call that fails (bad arguments, an unknown tool, an exception in the tool) becomes a
tool message with ``status="error"`` that says what went wrong, so the model can try
again; ``handle_errors=False`` fails the run instead. A ``CredentialsError`` always fails
the run: the model cannot fix a missing credentials provider.

Calls of tools made with ``@tool(approve=True)`` wait for a person first: the node pauses
with one interrupt, ``id="approve"``, before it runs any call, so on resume no call runs
twice. See ``approvals`` for the answers it takes.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from typing import Any

import anyio
import orjson
from pydantic import BaseModel, ValidationError

from nodestep._errors import CredentialsError, GraphConfigError, ModelError
from nodestep._flow.nodes import Node, NodeContext, node
from nodestep.agents._approvals import Decision, ask_approval
from nodestep.agents._conversation import next_message_id
from nodestep.agents._messages import AssistantMessage, ToolCall, ToolMessage
from nodestep.agents._model_node import check_conversation, conversation_of
from nodestep.agents._tools import Tool, argument_problem

__all__ = ["tool_node"]

ErrorHandler = Callable[[Exception], str]


def _content(result: Any) -> str:
    if isinstance(result, str):
        return result
    if isinstance(result, BaseModel):
        return result.model_dump_json()
    return orjson.dumps(result, default=str).decode()


def _error_text(error: Exception, call: ToolCall) -> str:
    if isinstance(error, ValidationError):
        return (
            f"Error: the arguments of {call.name} are not valid: {argument_problem(error)}. "
            f"Call it again with arguments that fit its parameters."
        )
    if isinstance(error, ModelError):
        return f"Error: {error}"
    return f"Error: {call.name} raised {type(error).__name__}: {error}"


class _Runner:
    """Runs the calls of one reply and makes their tool messages."""

    def __init__(self, tools: dict[str, Tool], handle_errors: bool | ErrorHandler) -> None:
        self.tools = tools
        self.handle_errors = handle_errors

    async def run(
        self, call: ToolCall, decision: Decision, ctx: NodeContext, inline: bool = False
    ) -> ToolMessage:
        if decision.rejected:
            why = f": {decision.reason}" if decision.reason else ""
            text = f"The user rejected this call of {call.name}{why}. Do not call it again as is."
            return ToolMessage(content=text, tool_call_id=call.id, name=call.name, status="error")
        try:
            found = self.tools.get(call.name)
            if found is None:
                raise ModelError(
                    f"there is no tool {call.name!r}; the tools are "
                    f"{', '.join(sorted(self.tools))}. Call one of them."
                )
            result = await found.ainvoke(dict(call.args), inline=inline, ctx=ctx)
        except CredentialsError:
            raise  # the caller's to fix (pass credentials=), not the model's: fail the run
        except Exception as error:
            if self.handle_errors is False:
                raise
            handler = self.handle_errors
            text = handler(error) if callable(handler) else _error_text(error, call)
            return ToolMessage(content=text, tool_call_id=call.id, name=call.name, status="error")
        return ToolMessage(content=_content(result), tool_call_id=call.id, name=call.name)

    async def run_all(
        self, calls: Sequence[ToolCall], decisions: list[Decision], ctx: NodeContext
    ) -> list[Any]:
        if len(calls) == 1:  # alone, a plain def tool runs inline, as a lone def node does
            return [await self.run(calls[0], decisions[0], ctx, inline=True)]
        results: list[Any] = [None] * len(calls)

        refused: list[CredentialsError] = []

        async def one(index: int) -> None:
            try:
                results[index] = await self.run(calls[index], decisions[index], ctx)
            except CredentialsError as error:
                # Raised as itself, not in an exception group, as a lone call raises it.
                refused.append(error)

        async with anyio.create_task_group() as group:
            for index in range(len(calls)):
                group.start_soon(one, index)
        if refused:
            raise refused[0]
        return results


def tool_node(
    tools: Sequence[Tool],
    *,
    name: str = "tools",
    handle_errors: bool | ErrorHandler = True,
) -> Node:
    """Make a node that runs the tool calls of the last message of the conversation.

    The node reads the state's ``messages``; when the last one is an assistant message
    with tool calls, it runs them concurrently (a plain ``def`` tool in a worker thread,
    unless it is the only call: then on the event loop's thread) and returns
    ``{"messages": [tool messages...]}``, one per call, in the calls' order.
    Otherwise it returns no update. The node declares the roles of its tools (an OpenAPI
    tool's ``role=``), so pass ``credentials=`` to the run when a tool has one.

    Args:
        tools: The tools (made with ``@tool``).
        name: The node's name.
        handle_errors: ``True`` sends a failed call back to the model as an error tool
            message; a function makes that message's text from the exception; ``False``
            lets the exception fail the run.

    Returns:
        The node.

    Raises:
        GraphConfigError: ``tools`` is empty, holds something that is not a ``Tool``, or
            two tools of one name; and from ``Graph.flow()``, a state without a
            ``messages`` field merged by ``add_messages``.
    """
    by_name: dict[str, Tool] = {}
    for item in tools:
        if not isinstance(item, Tool):
            raise GraphConfigError(f"tool_node takes @tool functions, got {item!r}; use @tool.")
        if item.name in by_name:
            raise GraphConfigError(f"Two tools are named {item.name!r}; give one another name.")
        by_name[item.name] = item
    if not by_name:
        raise GraphConfigError("tool_node needs at least one tool; pass tools=[...].")
    runner = _Runner(by_name, handle_errors)

    async def run_tools(state: Any, ctx: NodeContext) -> dict[str, Any] | None:
        messages = conversation_of(state, ctx.node)
        last = messages[-1] if messages else None
        if not isinstance(last, AssistantMessage) or not last.tool_calls:
            return None
        calls, decisions = ask_approval(last, by_name)
        results = await runner.run_all(calls, decisions, ctx)
        for index, message in enumerate(results):
            message_id = next_message_id(messages, ctx.node, index + 1)
            results[index] = message.model_copy(update={"id": message_id})
        if calls != last.tool_calls:  # edited by the approver: the reply shows what ran
            results.insert(0, last.model_copy(update={"tool_calls": tuple(calls)}))
        return {"messages": results}

    run_tools.__doc__ = f"Run the calls of tools {', '.join(by_name)}."
    # The node acts in its tools' roles, so a tool can ask the node's context for them.
    roles = sorted({role for item in by_name.values() for role in item.roles})
    return check_conversation(node(run_tools, name=name, roles=roles))
