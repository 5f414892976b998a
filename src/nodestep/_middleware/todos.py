"""``TodoList``: a plan the model keeps with ``write_todos`` and ``read_todos`` tools.

Why the list lives in the conversation: each ``write_todos`` call is an assistant
message's tool call, stored with the thread. The list is the arguments of the latest
call, so it survives a restart, a resume in another process, and follows a fork or time
travel; the middleware keeps nothing in memory.
"""

from __future__ import annotations

from typing import Any, Literal

import orjson
from pydantic import BaseModel, ConfigDict

from nodestep._display.text import fields_repr
from nodestep._errors import GraphConfigError
from nodestep._flow.middleware import Middleware, Replacement
from nodestep._middleware.limits import state_messages
from nodestep.agents import AssistantMessage, Tool, ToolMessage, ToolMiddlewareContext, tool

__all__ = ["Todo", "TodoList", "todos_of"]


class Todo(BaseModel):
    """One item of the todo list.

    Attributes:
        content: What to do.
        status: ``"pending"``, ``"in_progress"`` or ``"completed"``.
    """

    model_config = ConfigDict(frozen=True, extra="forbid")

    content: str
    status: Literal["pending", "in_progress", "completed"] = "pending"

    def __repr__(self) -> str:
        return fields_repr(self, ("content", "status"))


def todos_of(messages: list[Any]) -> list[Todo]:
    """Return the todo list of a conversation: the arguments of its last ``write_todos``
    call that was not refused (its tool message is no error)."""
    refused = {
        m.tool_call_id for m in messages if isinstance(m, ToolMessage) and m.status == "error"
    }
    for message in reversed(messages):
        if isinstance(message, AssistantMessage):
            for call in reversed(message.tool_calls):
                if call.name == "write_todos" and call.id not in refused:
                    return [Todo.model_validate(item) for item in call.args.get("todos", [])]
    return []


@tool
def write_todos(todos: list[Todo]) -> str:
    """Replace the todo list with this one: every item, each with its status."""
    done = sum(1 for t in todos if t.status == "completed")
    return f"The todo list has {len(todos)} items, {done} completed."


@tool
def read_todos() -> str:
    """Return the current todo list."""
    raise GraphConfigError(
        "read_todos answers from the thread's messages, which only the TodoList "
        "middleware sees: pass middleware=[TodoList()] to the graph or agent."
    )


class TodoList(Middleware):
    """Offer the ``write_todos`` and ``read_todos`` tools; the list is kept in the thread.

    ``create_react_agent(..., middleware=[TodoList()])`` adds the tools; for a
    ``tool_node`` of your own, list ``TodoList().tools()`` in its tools.
    """

    def tools(self) -> list[Tool]:
        """Return the ``write_todos`` and ``read_todos`` tools."""
        return [write_todos, read_todos]

    def before_tool(self, ctx: ToolMiddlewareContext) -> Replacement | None:
        """Answer ``read_todos`` from the thread's messages."""
        if ctx.tool_name != "read_todos":
            return None
        todos = todos_of(state_messages(ctx.state))
        if not todos:
            return ctx.respond("The todo list is empty.")
        return ctx.respond(orjson.dumps([t.model_dump() for t in todos]).decode())
