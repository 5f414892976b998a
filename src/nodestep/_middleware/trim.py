"""``TrimMessages`` and ``SummarizeMessages``: a shorter conversation for the model.

Both change only what is sent: the stored conversation stays whole. Both cut at a point
that keeps each tool result with the assistant message that called it, since a model API
refuses a tool message whose call it was not sent.
"""

from __future__ import annotations

from typing import Any

from nodestep._errors import GraphConfigError
from nodestep._flow.middleware import Middleware, Replacement
from nodestep.agents import (
    ChatModel,
    ModelMiddlewareContext,
    SystemMessage,
    ToolMessage,
    UserMessage,
)

__all__ = ["SummarizeMessages", "TrimMessages", "split_recent"]


def _count(value: Any, what: str, least: int) -> int:
    if not isinstance(value, int) or isinstance(value, bool) or value < least:
        raise GraphConfigError(f"{what} takes an int >= {least}, got {value!r}.")
    return value


def split_recent(messages: list[Any], keep: int) -> tuple[list[Any], list[Any], list[Any]]:
    """Split a conversation into its system messages, the older rest, and the last ``keep``.

    The cut moves earlier while the first kept message is a tool result, so each result
    keeps the assistant message that called it.

    Returns:
        ``(system, older, recent)``.
    """
    system = [m for m in messages if isinstance(m, SystemMessage)]
    rest = [m for m in messages if not isinstance(m, SystemMessage)]
    cut = max(len(rest) - keep, 0)
    while 0 < cut < len(rest) and isinstance(rest[cut], ToolMessage):
        cut -= 1
    return system, rest[:cut], rest[cut:]


class TrimMessages(Middleware):
    """Send the model only the system messages and the last ``keep`` messages.

    Args:
        keep: How many of the latest messages to send (a few more when the cut would
            separate tool results from their call).

    Raises:
        GraphConfigError: ``keep`` is not an int >= 1.
    """

    def __init__(self, keep: int) -> None:
        self.keep = _count(keep, "TrimMessages(keep=...)", 1)

    def before_model(self, ctx: ModelMiddlewareContext) -> Replacement | None:
        """Drop the older messages from the request."""
        if ctx.request is None:
            return None
        system, older, recent = split_recent(ctx.request.messages, self.keep)
        if not older:
            return None
        return ctx.replace(ctx.request.replace(messages=[*system, *recent]))

    def __repr__(self) -> str:
        return f"TrimMessages(keep={self.keep})"


class SummarizeMessages(Middleware):
    """Past ``max_messages``, send a summary of the older messages instead of them.

    The summary is asked of ``model`` on each call past the limit and is not stored, so
    the stored conversation stays whole and a fork summarises its own past.

    Args:
        model: The chat model that writes the summary.
        max_messages: Summarise once the conversation (without system messages) is longer.
        keep: How many of the latest messages to send as they are.

    Raises:
        GraphConfigError: a count that is not a positive int, or ``keep >= max_messages``.
    """

    def __init__(self, model: ChatModel, *, max_messages: int = 40, keep: int = 10) -> None:
        if not isinstance(model, ChatModel):
            raise GraphConfigError(
                f"SummarizeMessages takes the chat model that writes the summary, got "
                f"{type(model).__name__}."
            )
        self.model = model
        self.max_messages = _count(max_messages, "SummarizeMessages(max_messages=...)", 2)
        self.keep = _count(keep, "SummarizeMessages(keep=...)", 1)
        if self.keep >= self.max_messages:
            raise GraphConfigError(
                f"SummarizeMessages(keep={keep}) must be less than max_messages="
                f"{max_messages}, or nothing is left to summarise."
            )

    async def before_model(self, ctx: ModelMiddlewareContext) -> Replacement | None:
        """Replace the older messages of the request by one summary."""
        if ctx.request is None:
            return None
        messages = ctx.request.messages
        if sum(1 for m in messages if not isinstance(m, SystemMessage)) <= self.max_messages:
            return None
        system, older, recent = split_recent(messages, self.keep)
        text = "\n".join(f"{m.role}: {getattr(m, 'content', '')}" for m in older)
        asked = [
            SystemMessage(content="Summarise this conversation in a few sentences."),
            UserMessage(content=text),
        ]
        summary = await self.model.complete(asked, [])
        note = SystemMessage(content=f"Summary of the earlier conversation: {summary.content}")
        return ctx.replace(ctx.request.replace(messages=[*system, note, *recent]))

    def __repr__(self) -> str:
        return f"SummarizeMessages(max_messages={self.max_messages}, keep={self.keep})"
