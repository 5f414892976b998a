"""Read where a subgraph run of a thread stands: its state, status and pending tasks.

A subgraph run that has not finished (paused, failed, cut off) keeps its records in the
parent's position under its task (``Position.children``). Reading one folds them with the
child's schema, level by level down a task path such as ``"review/legal"``.
"""

from __future__ import annotations

import re
from typing import Any

from nodestep._engine.compiled import CompiledGraph
from nodestep._engine.history import StateSnapshot
from nodestep._engine.history_ops import position_at, snapshot_of
from nodestep._engine.subgraph import SubgraphNode
from nodestep._errors import GraphConfigError, UnknownThreadError
from nodestep._superstep import machine
from nodestep._superstep.position import Position
from nodestep._superstep.replay import replay
from nodestep.store import StateStore

__all__ = ["subgraph_state"]

_SEND_INDEX = re.compile(r"\[\d+\]$")


async def subgraph_state(
    graph: CompiledGraph,
    store: StateStore,
    thread_id: str,
    path: str,
    branch_id: str,
    at: str | None,
) -> StateSnapshot[Any]:
    """Return the snapshot of the subgraph run at task ``path`` (``"review/legal"``).

    Its ``value`` is the child's state (the child graph's class), ``status``, ``next`` and
    ``interrupts`` are the child's (keys as the child names them), and ``sequence`` and
    ``event_id`` are the child's own numbering of its records.

    Raises:
        GraphConfigError: a step of ``path`` is not a subgraph node of its graph.
        UnknownThreadError: the thread or event does not exist, or no unfinished subgraph
            run is kept at ``path`` there (it never ran, or its task finished).
    """
    pos, branch = await position_at(graph, store, thread_id, branch_id, at)
    where: list[str] = []
    for task_id in path.split("/"):
        node = graph.nodes.get(_SEND_INDEX.sub("", task_id))
        if not isinstance(node, SubgraphNode):
            raise GraphConfigError(
                f"'{task_id}' in path '{path}' is not a subgraph node of graph "
                f"'{graph.name}'; its subgraph nodes are "
                f"{sorted(n for n, x in graph.nodes.items() if isinstance(x, SubgraphNode))}."
            )
        where.append(task_id)
        kept = pos.children.get(task_id)
        child = replay(node.child.schema, kept) if kept else None
        if child is None:
            raise UnknownThreadError(
                f"Thread '{thread_id}' (branch '{branch}') has no unfinished subgraph run at "
                f"'{'/'.join(where)}' there: its task has not started it, or has finished. "
                f"Its events stay in history(thread_id), under that path.",
                thread_id=thread_id,
                branch_id=branch,
            )
        _answered(child, pos, task_id)
        graph, pos = node.child, child
    return snapshot_of(graph.schema, pos, thread_id, branch)


def _answered(child: Position, parent: Position, task_id: str) -> None:
    """Resume ``child`` with the answers ``parent`` stored for it, when it is paused and they
    answer all its interrupts.

    Why: a resume stores the answers in the parent's ``run_started``; the child records its
    own only once it runs. In between, the child is not waiting for anybody (the running
    parent's ``resume=`` refuses new answers), so its snapshot must not show it paused. A
    parent that failed on its answers takes new ones, and shows the child's interrupts open:
    the child is left paused to agree.
    """
    if child.status != "paused" or parent.status != "running":
        return
    prefix = f"{task_id}/"
    given = {k[len(prefix) :]: v for k, v in parent.answers.items() if k.startswith(prefix)}
    if child.interrupts.keys() <= given.keys():
        machine.resume(child, {k: given[k] for k in child.interrupts}, child.run_id or "")
