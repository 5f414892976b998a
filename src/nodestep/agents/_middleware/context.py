"""The contexts of the model and tool hooks, and the request a model hook may rewrite."""

from __future__ import annotations

import dataclasses
from dataclasses import dataclass
from typing import Any

from nodestep._display.text import fields_repr, plural
from nodestep._flow.middleware import NodeMiddlewareContext, Replacement
from nodestep.agents._messages import AssistantMessage, ToolCall, ToolMessage
from nodestep.agents._models import ChatModel

__all__ = ["ModelMiddlewareContext", "ModelRequest", "ToolMiddlewareContext"]


@dataclass(frozen=True, slots=True)
class ModelRequest:
    """What a model node sends: the conversation, the tools' specs and the model.

    A ``before_model`` hook returns ``ctx.replace(request.replace(...))`` to send other
    messages, or to another model (a fallback). What it sends is never stored: the state
    keeps the conversation as it was.

    Attributes:
        messages: The conversation, the system prompt first when the node has one.
        tools: The JSON specs of the tools the model may call.
        model: The chat model the request goes to.
    """

    messages: list[Any]
    tools: list[dict[str, Any]]
    model: ChatModel

    def __repr__(self) -> str:
        counts = f"{plural(len(self.messages), 'message')}, {plural(len(self.tools), 'tool')}"
        return f"ModelRequest(model={self.model.name!r}, {counts})"

    def replace(self, **changes: Any) -> ModelRequest:
        """Return a copy with ``changes`` (``messages=``, ``tools=``, ``model=``)."""
        return dataclasses.replace(self, **changes)


@dataclass(slots=True)
class ModelMiddlewareContext(NodeMiddlewareContext):
    """What a model hook (``before_model``, ``after_model``, ``on_model_error``) knows.

    ``state`` is the state the model node read (a value to read; the stored one changes
    only through the node's update).

    Attributes:
        request: The ``ModelRequest`` about to be sent (or sent).
        response: The reply, in ``after_model``; a ``before_model`` hook that returns
            ``ctx.replace(AssistantMessage(...))`` answers without calling the model.
        attempts: The models tried so far in this call, by name, in order.
    """

    request: ModelRequest | None = None
    response: AssistantMessage | None = None
    attempts: list[str] = dataclasses.field(default_factory=list)

    def __repr__(self) -> str:
        return fields_repr(self, ("node_name", "task_id", "request", "response"))

    @property
    def model(self) -> str:
        """The name of the model the request goes to."""
        return "" if self.request is None else self.request.model.name

    def replace(self, value: Any) -> Replacement:
        """Return the ``Replacement`` of the request (a ``ModelRequest``) or of the reply
        (an ``AssistantMessage``)."""
        return Replacement(value)


@dataclass(slots=True)
class ToolMiddlewareContext(NodeMiddlewareContext):
    """What a tool hook (``before_tool``, ``after_tool``, ``on_tool_error``) knows.

    Attributes:
        tool_name: The tool the model called.
        args: The call's arguments; ``ctx.replace({...})`` in ``before_tool`` runs the
            tool with others.
        tool_call_id: The id of the call.
        calls: Every call of the model's reply, in order (the call is ``calls[index]``).
        index: The call's place in ``calls``.
        result: The call's ``ToolMessage``, in ``after_tool``; a ``before_tool`` hook that
            returns ``ctx.respond(...)`` or ``ctx.refuse(...)`` answers without the tool.
    """

    tool_name: str = ""
    args: dict[str, Any] = dataclasses.field(default_factory=dict)
    tool_call_id: str = ""
    calls: tuple[ToolCall, ...] = ()
    index: int = 0
    result: ToolMessage | None = None

    def __repr__(self) -> str:
        return fields_repr(self, ("node_name", "tool_name", "tool_call_id", "args", "result"))

    def respond(self, content: str) -> Replacement:
        """Return the ``Replacement`` that answers the call with ``content``, unrun.

        Raises:
            TypeError: ``content`` is not a str.
        """
        return Replacement(self._message(content, "ok", "respond"))

    def refuse(self, reason: str) -> Replacement:
        """Return the ``Replacement`` that refuses the call: an error tool message saying
        ``reason``, which the model reads.

        Raises:
            TypeError: ``reason`` is not a str.
        """
        return Replacement(self._message(reason, "error", "refuse"))

    def _message(self, content: str, status: Any, method: str) -> ToolMessage:
        if not isinstance(content, str):
            # Else pydantic's error about a ToolMessage the caller never made.
            example = (
                "ctx.respond(json.dumps(value))"
                if method == "respond"
                else "ctx.refuse('the budget is spent')"
            )
            raise TypeError(
                f"ctx.{method}(...) takes the text the model reads, a str; got "
                f"{type(content).__name__} {content!r:.60}. Give it text, e.g. {example}."
            )
        return ToolMessage(
            content=content, tool_call_id=self.tool_call_id, name=self.tool_name, status=status
        )
