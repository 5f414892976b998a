"""``ToolContext``: what a tool may know of the run that calls it.

A tool asks for it with a parameter annotated ``ToolContext``; that parameter is no
argument of the model's (it is left out of the schema the model is given) and the tool node
fills it for each call. It is made for the call and dropped after it: nothing of it is
stored in the thread, so the run's ``context=`` and memory store stay out of the history.
"""

from __future__ import annotations

from typing import Any

from nodestep._errors import ContextNotProvidedError
from nodestep._flow.context import NodeContext
from nodestep._memory.contract import MemoryStore

__all__ = ["ToolContext"]


class ToolContext:
    """What a tool knows of the run that calls it; a tool gets it by annotation.

    Declare a parameter annotated ``ToolContext`` (under any name): the model does not see
    it, and the tool node passes the context of the call there.

    Attributes:
        thread_id: The thread of the run.
        branch_id: The history branch of the run.
        state: The state the tool node saw, for reading. Changing it changes nothing:
            a tool's result goes back to the model as its tool message. ``None`` in an
            ``Agent`` run from a folder of specs, whose tool steps get a call, not a state.
        tool_call_id: The id of the call being run; its tool message answers it.
        tool_name: The name of the tool being called.
        memory: The run's long-term memory store, or ``None`` when the run has none.
    """

    __slots__ = ("_ctx", "branch_id", "memory", "state", "thread_id", "tool_call_id", "tool_name")

    def __init__(self, ctx: NodeContext, state: Any, tool_call_id: str, tool_name: str) -> None:
        self._ctx = ctx
        self.thread_id = ctx.thread_id
        self.branch_id = ctx.branch_id
        self.state = state
        self.tool_call_id = tool_call_id
        self.tool_name = tool_name
        try:
            self.memory: MemoryStore | None = ctx.memory
        except ContextNotProvidedError:
            self.memory = None

    @property
    def context(self) -> Any:
        """The run's ``context=`` object; it is never stored.

        Raises:
            ContextNotProvidedError: the run was started without ``context=``.
        """
        try:
            return self._ctx.context
        except ContextNotProvidedError:
            raise ContextNotProvidedError(
                f"Tool {self.tool_name!r} (call {self.tool_call_id!r}) read the run's "
                f"context from its ToolContext, but the run got no context. Pass context=... "
                f"to invoke/ainvoke/stream/astream (and again when resuming: the context is "
                f"never stored)."
            ) from None

    def writer(self, data: Any) -> None:
        """Send ``data`` as a ``"custom"`` stream event; a no-op unless the run streams it."""
        self._ctx.emit(data, "custom")

    def __repr__(self) -> str:
        # never the state or the context: a repr ends up in logs
        return (
            f"ToolContext(tool_name={self.tool_name!r}, tool_call_id={self.tool_call_id!r}, "
            f"thread_id={self.thread_id!r}, branch_id={self.branch_id!r})"
        )
