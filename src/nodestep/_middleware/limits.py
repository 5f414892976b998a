"""``ToolCallLimit``: a budget of tool calls per run and per thread, kept in the history.

Why the budget is counted from the conversation and not kept in the middleware: the calls
the model made are in the thread's messages, which the store keeps. So a resume in another
process, a fork or time travel sees exactly the calls made on that branch, and the
middleware writes nothing of its own.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from nodestep._errors import GraphConfigError
from nodestep._flow.middleware import Middleware, Replacement
from nodestep.agents import AssistantMessage, ToolMiddlewareContext, UserMessage

__all__ = ["ToolCallLimit", "calls_made", "state_messages"]


def _limit(value: Any, what: str) -> int | None:
    if value is None:
        return None
    if not isinstance(value, int) or isinstance(value, bool) or value < 0:
        raise GraphConfigError(
            f"ToolCallLimit({what}=...) takes a number of calls (an int >= 0) or None, got "
            f"{value!r}."
        )
    return value


def calls_made(messages: list[Any], tool: str | None = None, since_user: bool = False) -> int:
    """Return how many tool calls (of ``tool``, or any) the assistant messages hold.

    Args:
        messages: The conversation.
        tool: Count only calls of this tool; ``None`` counts every call.
        since_user: Count only after the last user message (the current run's turn).
    """
    count = 0
    for message in reversed(messages):
        if since_user and isinstance(message, UserMessage):
            break
        if isinstance(message, AssistantMessage):
            count += sum(1 for c in message.tool_calls if tool is None or c.name == tool)
    return count


class ToolCallLimit(Middleware):
    """Refuse tool calls over a budget: per run (since the last user message) and per thread.

    A refused call does not run: the model gets an error tool message that says the
    budget is spent, and can answer without the tool. Calls of one reply count in order.

    Args:
        run_limit: The most calls in one run: from the last user message on (a resume
            goes on counting), or ``None``.
        thread_limit: The most calls in the whole thread, or ``None``.
        tool: Count and limit only calls of this tool; ``None``: every tool.

    Raises:
        GraphConfigError: a limit that is not an int >= 0, neither limit given, or a
            ``tool`` that is not a tool's name.
    """

    def __init__(
        self,
        *,
        run_limit: int | None = None,
        thread_limit: int | None = None,
        tool: str | None = None,
    ) -> None:
        self.run_limit = _limit(run_limit, "run_limit")
        self.thread_limit = _limit(thread_limit, "thread_limit")
        if self.run_limit is None and self.thread_limit is None:
            raise GraphConfigError(
                "ToolCallLimit needs run_limit=, thread_limit= or both, e.g. "
                "ToolCallLimit(run_limit=5, thread_limit=50)."
            )
        if tool is not None and (not isinstance(tool, str) or not tool):
            # Any other value matches no call's name: the limit would never hold.
            raise GraphConfigError(
                f"ToolCallLimit(tool=...) takes the name of the tool to limit, a non-empty "
                f"str such as 'search', or None to limit every tool; got "
                f"{type(tool).__name__} {tool!r}."
            )
        self.tool = tool

    def tool_names(self) -> frozenset[str]:
        """Return the tool it limits alone, if any."""
        return frozenset() if self.tool is None else frozenset([self.tool])

    def before_tool(self, ctx: ToolMiddlewareContext) -> Replacement | None:
        """Refuse the call when it goes over a budget."""
        if self.tool is not None and ctx.tool_name != self.tool:
            return None
        messages = state_messages(ctx.state)
        reply = ctx.calls[: ctx.index + 1]
        this = sum(1 for c in reply if self.tool is None or c.name == self.tool)
        # The reply being run is the last message: its calls count by their place.
        earlier = (
            messages[:-1] if messages and isinstance(messages[-1], AssistantMessage) else messages
        )
        for limit, since_user, what in (
            (self.run_limit, True, "run"),
            (self.thread_limit, False, "thread"),
        ):
            if limit is not None and calls_made(earlier, self.tool, since_user) + this > limit:
                scope = f"of {self.tool} " if self.tool else ""
                return ctx.refuse(
                    f"Tool call limit reached: at most {limit} calls {scope}per {what}. "
                    f"Answer without calling {ctx.tool_name} again."
                )
        return None

    def __repr__(self) -> str:
        return (
            f"ToolCallLimit(run_limit={self.run_limit!r}, thread_limit={self.thread_limit!r}"
            f"{f', tool={self.tool!r}' if self.tool else ''})"
        )


def state_messages(state: Any) -> list[Any]:
    """Return the state's messages, or [] when it has none."""
    found = getattr(state, "messages", None)
    if isinstance(found, Mapping) or not isinstance(found, list):
        return []
    return found
