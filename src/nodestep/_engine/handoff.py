"""``Command(graph=PARENT)``: a node of a subgraph hands its command to the parent graph.

The node's task ends with ``ParentCommand``, which ends the child run (its history records
a ``run_failed`` naming it, so a continuation that runs the node again hands over again)
and reaches the subgraph task of the parent (``_engine.subgraph``), which returns the
command as its own.
"""

from __future__ import annotations

from nodestep._engine.runtime import Runtime
from nodestep._errors import GraphExecutionError
from nodestep._flow.routing import Command

__all__ = ["ParentCommand", "parent_command"]


class ParentCommand(BaseException):
    """A node of a subgraph returned ``Command(graph=PARENT, ...)``.

    It derives from ``BaseException`` so that ``except Exception`` in node code between the
    node and the parent does not swallow the hand-over.

    Attributes:
        node: The node that returned the command.
        command: The command, for the parent.
    """

    def __init__(self, node: str, command: Command) -> None:
        super().__init__(
            f"Node '{node}' handed the run to the parent graph with "
            f"Command(update={command.update!r}, goto={command.goto!r}, graph=PARENT)"
        )
        self.node = node
        self.command = command


def parent_command(runtime: Runtime, node: str, command: Command) -> BaseException:
    """Return what ends a task whose node returned ``Command(graph=PARENT, ...)``.

    Args:
        runtime: The task's run.
        node: The node's name.
        command: What it returned.

    Returns:
        ``ParentCommand`` in a subgraph run; else a ``GraphExecutionError`` saying the
        graph has no parent.
    """
    if runtime.path:
        return ParentCommand(node, Command(update=command.update, goto=command.goto))
    return GraphExecutionError(
        f"Node '{node}' returned Command(graph=PARENT, ...), but graph "
        f"'{runtime.graph.name}' is not running as a subgraph of another graph, so there "
        f"is no parent to route in. Return Command(goto=...) without graph=, or run the "
        f"graph as a node of another graph (subgraph(...))."
    )
