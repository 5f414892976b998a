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

A model node is called on the same conversation again and again, one or two messages
longer each time, so a ``ToolCallRepair`` keeps the last conversation it found nothing
to repair in, and the calls left open at its end: a conversation that starts with it (a
list comparison, which costs a pointer comparison per message that is the same object)
is scanned from there only. Each call then costs what the new messages cost, not a
Python pass over the whole conversation.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

from nodestep.agents._conversation import MessageList
from nodestep.agents._messages import ToolCall, ToolMessage

__all__ = ["ToolCallRepair", "not_run", "repair_tool_calls"]


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


def _open_calls(
    messages: Sequence[Any], start: int, pending: list[ToolCall]
) -> tuple[list[ToolCall], bool]:
    """Scan ``messages`` from ``start`` with the calls ``pending`` there.

    Returns:
        The calls still open at the end, and whether no call dangles before the end.
    """
    for message in messages[start:] if start else messages:
        role = message.role
        if role == "tool":
            if pending:
                answered = message.tool_call_id
                pending = [call for call in pending if call.id != answered]
            continue
        if pending:
            return pending, False
        if role == "assistant" and message.tool_calls:
            pending = list(message.tool_calls)
    return pending, True


class ToolCallRepair:
    """``repair_tool_calls`` for one model node, scanning only what is new (see the module).

    The kept conversation only makes a call cheaper: a conversation that does not start
    with it is scanned whole, so the result never depends on what was kept.
    """

    def __init__(self) -> None:
        # A conversation without a dangling call before its end, and the calls open there.
        self._clean: tuple[Sequence[Any], list[ToolCall]] | None = None

    def __call__(self, messages: Sequence[Any]) -> Sequence[Any]:
        """Return ``messages`` as ``repair_tool_calls`` does."""
        start, pending = 0, []
        kept = self._clean  # one read: another task may replace it meanwhile
        if kept is not None:
            prefix, open_calls = kept
            n = len(prefix)
            if n <= len(messages) and (messages is prefix or messages[:n] == prefix):
                start, pending = n, open_calls
        pending, clean = _open_calls(messages, start, pending)
        # Only a read-only MessageList is kept: a plain list (a node's private memory of
        # the conversation) may be changed in place, and would no longer be what was seen.
        if clean and isinstance(messages, MessageList):
            self._clean = (messages, pending)
        if clean and not pending:
            return messages
        return repair_tool_calls(messages)
