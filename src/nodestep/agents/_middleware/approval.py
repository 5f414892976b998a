"""``HumanApproval``: a person approves, edits or rejects calls of chosen tools."""

from __future__ import annotations

from collections.abc import Iterable, Sequence

from nodestep._errors import GraphConfigError
from nodestep._flow.middleware import Middleware

__all__ = ["HumanApproval", "approval_names"]


class HumanApproval(Middleware):
    """Pause for a person's answer before calls of the named tools run.

    The tool node pauses once for every call of the reply that waits, with an interrupt
    of id ``"approve"`` listing them, before it runs any call, so a resume never runs a
    call twice; the answer approves, edits (``{"edit": {...}}``) or rejects
    (``{"reject": "why"}``) each call, as for ``@tool(approve=True)``.

    Args:
        tools: The names of the tools whose calls wait for approval.

    Raises:
        GraphConfigError: ``tools`` is empty or holds something that is not a name.
    """

    def __init__(self, tools: Sequence[str]) -> None:
        names = [tools] if isinstance(tools, str) else list(tools)
        if not names or not all(isinstance(n, str) and n for n in names):
            raise GraphConfigError(
                f"HumanApproval takes the names of the tools to approve, e.g. "
                f"HumanApproval(tools=['send_email']), got {tools!r}."
            )
        self.tools_to_approve = frozenset(names)

    def tool_names(self) -> frozenset[str]:
        """Return the tools whose calls wait for approval."""
        return self.tools_to_approve

    def __repr__(self) -> str:
        return f"HumanApproval(tools={sorted(self.tools_to_approve)!r})"


def approval_names(middleware: Iterable[Middleware]) -> frozenset[str]:
    """Return the tool names the ``HumanApproval`` middleware among ``middleware`` name."""
    found: frozenset[str] = frozenset()
    for item in middleware:
        if isinstance(item, HumanApproval):
            found |= item.tools_to_approve
    return found
