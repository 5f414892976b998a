"""What ``Agent.stream`` yields while a step runs: tokens, tool calls and their results.

The step runs as ``Agent.step`` runs it, as one run of the agent's graph, streamed in the
``"messages"`` mode (each LLMNode then asks its model with ``stream()`` and sends each
piece of text) and the ``"updates"`` mode (each node's update: an LLMNode's reply with
its tool calls, a ToolNode's result). ``events_of`` reads those into the events below;
the stream's last item is the step's ``AgentStep``.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

from nodestep._display.text import fields_repr
from nodestep._engine.results import StreamEvent
from nodestep.agents._messages import AssistantMessage
from nodestep.agents._models import MessageChunk
from nodestep.agents._specs.records import CallResult

__all__ = ["STEP_MODES", "AgentToken", "AgentToolCall", "AgentToolResult", "events_of"]

STEP_MODES = ("messages", "updates")
"""The graph's stream modes a streamed step reads."""


@dataclass(frozen=True)
class AgentToken:
    """A piece of an LLMNode's reply, as its model streams it.

    Attributes:
        node: The LLMNode.
        text: The piece of text (a token or a few).
        message_id: The reply's id: the pieces of one reply share it, and the reply is
            stored in the node's conversation under it.
    """

    node: str
    text: str
    message_id: str

    def __repr__(self) -> str:
        return fields_repr(self, ("node", "text"))


@dataclass(frozen=True)
class AgentToolCall:
    """A tool call in an LLMNode's reply, whole, as the reply is stored.

    Attributes:
        node: The LLMNode that asked for it.
        tool: The tool's name, as the model wrote it (an unknown one too).
        args: The arguments, as the model wrote them.
        call_id: The call's id; its ``AgentToolResult`` has the same.
    """

    node: str
    tool: str
    args: dict[str, Any] = field(default_factory=dict)
    call_id: str = ""

    def __repr__(self) -> str:
        return fields_repr(self, ("node", "tool", "args", "call_id"))


@dataclass(frozen=True)
class AgentToolResult:
    """The result of a tool call, as it is stored and goes back to the model.

    Attributes:
        node: The node that answered: the ToolNode, or the calling LLMNode for a call of
            a tool it does not list.
        tool: The tool's name.
        call_id: The call's id.
        text: The result's text (the call context's values masked, as stored); for a
            call that failed or did not fit, the error the model reads.
        status: ``"ok"``, or ``"error"`` for a call that failed or did not fit.
    """

    node: str
    tool: str
    call_id: str
    text: str
    status: str

    def __repr__(self) -> str:
        return fields_repr(self, ("node", "tool", "status", "text", "call_id"))


def events_of(
    event: StreamEvent, fields: dict[str, str]
) -> list[AgentToken | AgentToolCall | AgentToolResult]:
    """Return what a graph stream event of a step shows, in order.

    Args:
        event: A ``"messages"`` or ``"updates"`` event of the agent's graph.
        fields: The state field of each LLMNode's conversation.
    """
    node = event.node or ""
    data = event.data
    if event.mode == "messages":
        if isinstance(data, MessageChunk) and data.content:
            return [AgentToken(node, data.content, data.message_id)]
        return []
    if event.mode != "updates" or not isinstance(data, dict):
        return []
    out: list[AgentToken | AgentToolCall | AgentToolResult] = []
    written = data.get(fields[node]) if node in fields else None
    if written:
        reply = written[-1]
        if isinstance(reply, AssistantMessage):
            out += [AgentToolCall(node, c.name, dict(c.args), c.id) for c in reply.tool_calls]
    for call_id, result in (data.get("results") or {}).items():
        if isinstance(result, CallResult):
            out.append(AgentToolResult(node, result.tool, call_id, result.content, result.status))
    return out
