"""Repairing dangling tool calls: calls without a result, before the model sees them.

A conversation can hold an assistant message whose tool calls have no tool messages: the
run stopped between the model's request and the results (a crash, a cancelled stream, an
approval that was never answered) and the thread then got new input. A provider refuses
such a conversation (every call must be answered before the next message), so each model
call would fail, and the thread could never go on. Before the model node sends the
conversation, it gives each dangling call a tool message with ``status="error"`` that says
the call did not run, right after the results its message did get.

Only the copy sent to the model is repaired: the stored conversation is the record of
what happened, and ``add_messages`` appends, so a result written now would land after the
new input rather than after its call.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

from nodestep.agents._messages import ToolCall, ToolMessage

__all__ = ["not_run", "repair_tool_calls"]


def not_run(call: ToolCall) -> ToolMessage:
    """Return the tool message that stands for a result ``call`` never got."""
    return ToolMessage(
        content=(
            f"Error: this call of {call.name} did not run: the run stopped before its "
            f"result (a failure, a cancelled run, or an approval that was never given). "
            f"Call it again if it is still needed."
        ),
        tool_call_id=call.id,
        name=call.name,
        status="error",
    )


def repair_tool_calls(messages: Sequence[Any]) -> Sequence[Any]:
    """Return ``messages`` with a ``not_run`` tool message for each dangling tool call.

    The messages themselves are returned, not a copy, when no call dangles (the common
    case, which costs one pass over them and allocates nothing). Calls of one assistant
    message are answered by the tool messages that follow it; each call that none of them
    answers gets its ``not_run`` message after them, in the calls' order.

    Args:
        messages: The conversation, oldest first.

    Returns:
        The conversation to send.
    """
    pending: list[ToolCall] = []
    out: list[Any] | None = None
    for index, message in enumerate(messages):
        role = message.role
        if role == "tool":
            if pending:
                answered = message.tool_call_id
                pending = [call for call in pending if call.id != answered]
        elif pending:
            if out is None:
                out = list(messages[:index])
            out.extend(not_run(call) for call in pending)
            pending = []
        if role == "assistant" and message.tool_calls:
            pending = list(message.tool_calls)
        if out is not None:
            out.append(message)
    if pending:
        if out is None:
            out = list(messages)
        out.extend(not_run(call) for call in pending)
    return messages if out is None else out
