"""Nodes' private state: which changes a completed superstep keeps, and which it refuses.

A node that declares ``private_state`` gets its own copy of it in every task; what the
task leaves changed travels in its result (``TaskResult.private``) and replaces the node's
entry in ``Position.node_states`` when the superstep completes, like a write to a plain
field. So two tasks of one node (``Send`` fan-out) that both change it in one superstep
are refused, as two writes to a plain field are: keeping either would silently drop the
other's change.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from typing import Any

from nodestep._errors import InvalidUpdateError
from nodestep._superstep.position import TaskResult

__all__ = ["check_private", "private_changes"]


def private_changes(
    inline: Mapping[str, TaskResult], done: Mapping[str, TaskResult]
) -> dict[str, dict[str, Any]] | None:
    """Return the private states a completing superstep's tasks changed, by node name.

    ``None`` when none did: the common case, which runs once per superstep, so it stays
    a plain loop over the results. Order does not matter: a superstep in which two tasks
    of one node changed it never completes (``check_private``).
    """
    out: dict[str, dict[str, Any]] | None = None
    for results in (inline, done):
        for result in results.values():
            if result.private is not None:
                if out is None:
                    out = {}
                out[result.node] = result.private
    return out


def check_private(results: Iterable[TaskResult], step: int) -> None:
    """Refuse a superstep in which two tasks of one node changed its private state.

    Raises:
        InvalidUpdateError: naming the node and its tasks.
    """
    seen: dict[str, str] = {}
    for result in results:
        if result.private is None:
            continue
        first = seen.setdefault(result.node, result.task_id)
        if first != result.task_id:
            raise InvalidUpdateError(
                f"Tasks '{first}' and '{result.task_id}' of node '{result.node}' both changed "
                f"its private state in step {step}; a node's private state takes one change "
                f"per superstep. Change it in one task only (e.g. the one that gathers the "
                f"results), or keep what each task adds in a state field with a reducer, "
                f"such as Annotated[list[str], add].",
                field=f"{result.node}.private_state",
                writers=[first, result.task_id],
                step=step,
            )
