"""``tool_choice``: whether and which tool the model must call, checked against the tools.

A forcing choice (``"required"`` or a tool's name) holds for a model call that opens a
turn: once the tools have answered (the conversation ends with a tool message), the model
is asked with ``"auto"``. Forcing every call would make an agent loop until ``max_steps``,
since a model that must call a tool can never give its answer.
"""

from __future__ import annotations

import inspect
from collections.abc import Sequence
from typing import Any

from nodestep._errors import GraphConfigError

__all__ = ["ToolChoice", "check_tool_choice", "choice_for"]

ToolChoice = str
"""``"auto"``, ``"required"``, ``"none"`` or the name of one of the tools."""

_WORDS = ("auto", "required", "none")


def _takes_tool_choice(method: Any) -> bool:
    try:
        parameters = inspect.signature(method).parameters.values()
    except (TypeError, ValueError):  # a builtin or C callable: it says nothing
        return False
    return any(
        p.name == "tool_choice" or p.kind is inspect.Parameter.VAR_KEYWORD for p in parameters
    )


def check_tool_choice(choice: object, tool_names: Sequence[str], model: Any) -> None:
    """Refuse a ``tool_choice`` the tools or the model cannot honour.

    Raises:
        GraphConfigError: ``choice`` is not a str, names no tool, forces a call when there
            are no tools, or the model's ``complete``/``stream`` take no ``tool_choice``.
    """
    if choice is None:
        return
    known = ", ".join(repr(name) for name in tool_names) or "none"
    if not isinstance(choice, str):
        raise GraphConfigError(
            f"tool_choice={choice!r} is not a choice: it takes 'auto', 'required', 'none' or "
            f"the name of a tool (the tools: {known})."
        )
    if choice not in _WORDS and choice not in tool_names:
        raise GraphConfigError(
            f"tool_choice={choice!r} names no tool: the tools are {known}. Pass one of them, "
            f"or 'auto', 'required' or 'none'."
        )
    if choice == "required" and not tool_names:
        raise GraphConfigError(
            "tool_choice='required' asks the model to call a tool, but it has no tools. "
            "Give it tools, or leave tool_choice out."
        )
    name = getattr(model, "name", type(model).__name__)
    if not (_takes_tool_choice(model.complete) and _takes_tool_choice(model.stream)):
        raise GraphConfigError(
            f"tool_choice={choice!r} is for the model, but {name!r} "
            f"({type(model).__name__}) takes no tool_choice: add a keyword parameter "
            f"tool_choice: str | None = None to its complete() and stream(), or leave "
            f"tool_choice out."
        )


def choice_for(choice: str | None, messages: Sequence[Any]) -> dict[str, Any]:
    """Return the ``tool_choice`` keyword for a model call on ``messages`` (see the module).

    Returns:
        ``{}`` without a choice, else ``{"tool_choice": ...}``.
    """
    if choice is None:
        return {}
    last = messages[-1] if messages else None
    if choice not in ("auto", "none") and getattr(last, "role", None) == "tool":
        return {"tool_choice": "auto"}
    return {"tool_choice": choice}
