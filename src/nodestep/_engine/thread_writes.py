"""The thread methods that write, as holders of the thread: refused while a run holds it.

``update_state`` and ``migrate`` append to a branch outside a run. Each takes the branch's
lease first (see ``_engine.lease``), so an edit never lands between the records of a live
run: while a run holds the branch, the edit is refused with ``ThreadBusyError`` before it
writes anything.
"""

from __future__ import annotations

from typing import Any

from pydantic import BaseModel

from nodestep._engine import history_ops
from nodestep._engine.as_node import node_name, update_state_as
from nodestep._engine.compiled import CompiledGraph, ThreadServices
from nodestep._engine.lease import hold_thread
from nodestep._engine.migrate import Migration
from nodestep._engine.migrate import migrate as migrate_thread
from nodestep._errors import GraphConfigError
from nodestep.store import StateStore

__all__ = ["migrate", "update_state"]


async def update_state(
    graph: ThreadServices,
    store: StateStore,
    thread_id: str,
    values: Any,
    branch_id: str,
    create: bool,
    as_node: Any = None,
) -> str:
    """Edit the branch's values, holding the branch; return the new event's id.

    The edit is made by ``_engine.history_ops.update_state``, or with ``as_node`` by
    ``_engine.as_node.update_state_as``.

    Raises:
        ThreadBusyError: a run (or another edit) holds the branch; nothing is written.
        GraphConfigError: ``as_node`` names no node of the graph, or the graph has no flow.
    """
    history_ops.check_ids(thread_id, branch_id)
    name = None if as_node is None else node_name(_with_flow(graph), as_node)
    async with hold_thread(store, thread_id, branch_id, "update_state", graph.lease_ttl):
        if name is not None:
            flow_graph = _with_flow(graph)
            return await update_state_as(
                flow_graph, store, thread_id, values, name, branch_id, create
            )
        return await history_ops.update_state(
            graph, store, thread_id, values, branch_id=branch_id, create=create
        )


def _with_flow(graph: ThreadServices) -> CompiledGraph:
    if not isinstance(graph, CompiledGraph):
        raise GraphConfigError(
            f"update_state(as_node=...) follows the node's routes, but graph '{graph.name}' "
            f"has no flow yet; call graph.flow(START >> first, ...) first."
        )
    return graph


async def migrate(
    graph: ThreadServices,
    store: StateStore,
    thread_id: str,
    fn: Migration,
    from_state: type[BaseModel],
    branch_id: str,
) -> str:
    """Migrate the branch as ``_engine.migrate.migrate`` does, holding the branch.

    Raises:
        ThreadBusyError: a run (or another edit) holds the branch; nothing is written.
    """
    history_ops.check_ids(thread_id, branch_id)
    async with hold_thread(store, thread_id, branch_id, "migrate", graph.lease_ttl):
        return await migrate_thread(graph, store, thread_id, fn, from_state, branch_id)
