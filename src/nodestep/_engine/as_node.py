"""``update_state(..., as_node=...)``: an edit recorded as written by a node of the flow.

Where the thread stands decides what the edit stands for:

* **No pending superstep** (the last run completed, or a new thread with ``create=True``):
  the update merges into the values as the node's write, and the node's routes (its edge,
  ``when`` or ``branch``, resolved on the merged values) plan the next superstep, so
  ``invoke(None)`` continues from there. One ``state_updated`` record holds the update, the
  node and the routes.
* **A pending superstep with an unfinished task of the node** (stopped at a breakpoint, or
  failed): the update is that task's result, recorded as ``task_finished`` marked
  ``edited``, so the node does not run; ``invoke(None)`` runs the superstep's other tasks,
  merges, and follows the node's routes as if it had run.

A paused superstep (waiting for answers) and a blocked one are refused: answer it, or fork.
"""

from __future__ import annotations

from typing import Any

from nodestep._engine import history_ops
from nodestep._engine.compiled import CompiledGraph
from nodestep._engine.routing import Router
from nodestep._engine.turns import thread_label
from nodestep._errors import GraphConfigError, ResumeError
from nodestep._flow.nodes import Node
from nodestep._superstep.merge import apply_writes, merge_results
from nodestep._superstep.position import PlannedTask, Position, TaskResult
from nodestep._superstep.records import HistoryRecord, StateUpdated, TaskFinished
from nodestep.store import StateStore

__all__ = ["node_name", "update_state_as"]


def node_name(graph: CompiledGraph, as_node: Any) -> str:
    """Return the name of the node ``as_node`` names (a ``Node`` or a name).

    Raises:
        GraphConfigError: the graph has no such node (the message lists its nodes), or the
            node has no edge to follow (it routes only by what it returns).
    """
    name = as_node.name if isinstance(as_node, Node) else as_node
    if not isinstance(name, str) or name not in graph.nodes:
        raise GraphConfigError(
            f"update_state(as_node={as_node!r}) names no node of graph '{graph.name}'. Its "
            f"nodes: {', '.join(repr(n) for n in graph.nodes)}."
        )
    if name not in graph.flow.edges:
        raise GraphConfigError(
            f"Node '{name}' has no edge: it routes only by the Command(goto=...) or Send it "
            f"returns when it runs, so update_state(as_node='{name}') has no route to follow. "
            f"Stand in for a node with an edge, when() or branch(), or give '{name}' one."
        )
    return name


async def update_state_as(
    graph: CompiledGraph,
    store: StateStore,
    thread_id: str,
    values: Any,
    name: str,
    branch_id: str,
    create: bool,
) -> str:
    """Apply ``values`` as written by node ``name``; return the new event's id.

    The caller holds the branch (``_engine.thread_writes``).

    Raises:
        UnknownThreadError: the thread does not exist and ``create`` is false.
        ResumeError: the thread is paused or blocked.
        GraphConfigError: the pending superstep has no unfinished task of the node, or
            several.
        InvalidUpdateError: the update cannot merge with the superstep's finished tasks.
    """
    schema = graph.schema
    pos, records = await history_ops.edit_start(graph, store, thread_id, branch_id, create)
    writes = schema.validate_update(values, name)
    history_ops.check_storable(schema, writes, thread_id)
    if pos.status == "idle":
        merged = apply_writes(schema.channels, pos.values, writes)
        router = Router(graph.flow, schema, stores_json=True)
        routes = router.edge_routes(name, schema.instance(merged))
        record: HistoryRecord = StateUpdated(writes, name, routes)
    else:
        task = _pending_task(graph, pos, name, thread_label(thread_id, branch_id))
        update, replaced = schema.writes_to_json(writes)
        result = TaskResult(name, task.task_id, writes, None, update, replaced or None)
        result.edited = True
        merge_results(schema.channels, pos.values, [*pos.done.values(), result], pos.step)
        record = TaskFinished(pos.step, result)
    return await history_ops.edit_commit(graph, store, thread_id, branch_id, pos, records, record)


def _pending_task(graph: CompiledGraph, pos: Position, name: str, thread: str) -> PlannedTask:
    """Return the one unfinished task of node ``name`` in the pending superstep."""
    if pos.status in ("paused", "blocked"):
        why = (
            "paused, waiting for answers; answer it with resume=Resume(...) (or "
            "Command(resume=...)) first"
            if pos.status == "paused"
            else "blocked: its superstep's writes cannot be merged; fork it at an earlier event"
        )
        raise ResumeError(
            f"update_state(as_node='{name}') cannot stand in for a node of thread {thread}, "
            f"which is {why}. update_state without as_node edits its values."
        )
    tasks = [t for t in pos.pending_tasks() if t.node == name]
    if len(tasks) == 1:
        return tasks[0]
    unfinished = ", ".join(f"'{t.task_id}'" for t in pos.pending_tasks()) or "none"
    if tasks:
        problem = f"has {len(tasks)} unfinished tasks of '{name}', and as_node stands for one"
    else:
        problem = f"has no unfinished task of '{name}' (unfinished tasks: {unfinished})"
    raise GraphConfigError(
        f"Thread {thread} has a pending superstep {pos.step}, which {problem}. With a "
        f"pending superstep, update_state(as_node=...) stands in for the one unfinished task "
        f"of that node: name one of them, continue the thread with invoke(None) first, or "
        f"leave out as_node to edit the values."
    )
