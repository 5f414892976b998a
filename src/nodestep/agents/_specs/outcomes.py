"""What an agent's step gives back: its ``AgentStep``, the events ``Agent.stream`` yields
(``AgentEvent``), and a node's state as ``Agent.node_state`` reads it (``NodeState``)."""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any, Literal

from nodestep._display.text import fields_repr
from nodestep._display.views import agent_step_html
from nodestep._engine.interrupts import Interrupt
from nodestep._errors import GraphExecutionError
from nodestep.agents._specs.streaming import AgentToken, AgentToolCall, AgentToolResult

__all__ = ["AgentEvent", "AgentStep", "NodeState", "ended", "ended_early"]


@dataclass(frozen=True)
class AgentStep:
    """What ``Agent.step`` returns.

    Attributes:
        output: The final reply's text (empty when the step failed).
        execution_id: The conversation's id (its thread); pass it to continue it.
        status: ``"completed"``, ``"paused"`` (a node waits for ``interrupt``) or
            ``"failed"``.
        error: Why the step failed (``"<ErrorType>: <message>"``, the context's values
            masked), or ``None``.
        failed_nodes: The nodes whose failure failed the step.
        interrupts: What the paused nodes ask (``Interrupt``: ``payload``, ``id``,
            ``node``, ``key``); answer with ``step(resume=...)``. Empty unless paused.
    """

    output: str
    execution_id: str
    status: Literal["completed", "paused", "failed"]
    error: str | None = None
    failed_nodes: tuple[str, ...] = ()
    interrupts: tuple[Interrupt, ...] = ()

    def __str__(self) -> str:
        return self.output

    def __repr__(self) -> str:
        names = ["status", "output", "execution_id"]
        names += [n for n in ("error", "failed_nodes", "interrupts") if getattr(self, n)]
        return fields_repr(self, names, width=100)

    def _repr_html_(self) -> str:
        return agent_step_html(self)


AgentEvent = AgentToken | AgentToolCall | AgentToolResult | AgentStep
"""What ``Agent.stream`` yields; the last one is the step's ``AgentStep``."""


@dataclass(frozen=True)
class NodeState:
    """A node's state in a conversation, as ``Agent.node_state`` reads it.

    Attributes:
        name: The node's name.
        kind: ``LLMNode``, ``ToolNode``, ``FunctionNode`` or ``Node``.
        status: ``idle`` (it never ran), ``running``, ``completed`` or ``failed``.
        has_error: Whether its last run ended with an error: a failure, or (a ToolNode) a
            call that did not fit or raised, whose error went back to the model.
        error: That error, or ``None``.
        messages: An LLMNode's conversation (without the system prompt, which is made
            for each call); empty for other kinds.
        input: What its last run took (a ToolNode: ``{"name", "args"}`` of the call).
        output: What its last run gave.
    """

    name: str
    kind: str
    status: str = "idle"
    has_error: bool = False
    error: str | None = None
    messages: tuple[Any, ...] = ()
    input: Any = None
    output: Any = None

    def __repr__(self) -> str:
        names = ["name", "kind", "status", "error", "messages", "input", "output"]
        return fields_repr(self, names)


def ended_early(thread: str) -> GraphExecutionError:
    return GraphExecutionError(
        f"The stream of conversation {thread!r} ended before its run did; step again to "
        f"continue it."
    )


def ended(
    thread: str, state: Any, run_id: str, interrupts: Mapping[str, Interrupt] | None
) -> AgentStep:
    """Return the ``AgentStep`` of a run that ended with ``state`` (paused: ``interrupts``)."""
    outputs = [o for o in state.outputs.values() if o.run == run_id]
    output = "\n\n".join(o.text for o in sorted(outputs, key=lambda o: o.order))
    if interrupts is not None:
        return AgentStep(output, thread, "paused", interrupts=tuple(interrupts.values()))
    return AgentStep(output=output, execution_id=thread, status="completed")
