"""Middleware: hooks around a graph's runs, nodes, model calls and tool calls, and the
built-in middleware for agents. See ``docs/middleware.md``.

``Graph(..., middleware=[...])`` and ``create_react_agent(..., middleware=[...])`` take
them. The context classes of the model and tool hooks and ``HumanApproval`` live on
``nodestep.agents`` and are re-exported here.
"""

from nodestep._flow.middleware import (
    GraphMiddlewareContext,
    Middleware,
    MiddlewareError,
    NodeMiddlewareContext,
    Replacement,
    RunOutcome,
)
from nodestep._middleware.fallback import ModelFallback
from nodestep._middleware.limits import ToolCallLimit
from nodestep._middleware.pii import RedactPII
from nodestep._middleware.skills import Skills
from nodestep._middleware.todos import Todo, TodoList, todos_of
from nodestep._middleware.trim import SummarizeMessages, TrimMessages
from nodestep._public import publish as _publish
from nodestep.agents import (
    HumanApproval,
    ModelMiddlewareContext,
    ModelRequest,
    ToolMiddlewareContext,
)

__all__ = [
    "GraphMiddlewareContext",
    "HumanApproval",
    "Middleware",
    "MiddlewareError",
    "ModelFallback",
    "ModelMiddlewareContext",
    "ModelRequest",
    "NodeMiddlewareContext",
    "RedactPII",
    "Replacement",
    "RunOutcome",
    "Skills",
    "SummarizeMessages",
    "Todo",
    "TodoList",
    "ToolCallLimit",
    "ToolMiddlewareContext",
    "TrimMessages",
    "todos_of",
]

_publish(__name__, __all__, globals())
