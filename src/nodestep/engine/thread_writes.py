"""The thread methods that write, as holders of the thread: refused while a run holds it.

``update_state`` and ``migrate`` append to a branch outside a run. Each takes the branch's
lease first (see ``engine.lease``), so an edit never lands between the records of a live
run: while a run holds the branch, the edit is refused with ``ThreadBusyError`` before it
writes anything.
"""

from __future__ import annotations

from typing import Any

from pydantic import BaseModel

from nodestep.engine import history_ops
from nodestep.engine.compiled import ThreadServices
from nodestep.engine.lease import hold_thread
from nodestep.engine.migrate import Migration
from nodestep.engine.migrate import migrate as migrate_thread
from nodestep.store.base import StateStore

__all__ = ["migrate", "update_state"]


async def update_state(
    graph: ThreadServices,
    store: StateStore,
    thread_id: str,
    values: Any,
    branch_id: str,
    create: bool,
) -> str:
    """``history_ops.update_state``, holding the branch.

    Raises:
        ThreadBusyError: a run (or another edit) holds the branch; nothing is written.
    """
    history_ops.check_ids(thread_id, branch_id)
    async with hold_thread(store, thread_id, branch_id, "update_state", graph.lease_ttl):
        return await history_ops.update_state(
            graph, store, thread_id, values, branch_id=branch_id, create=create
        )


async def migrate(
    graph: ThreadServices,
    store: StateStore,
    thread_id: str,
    fn: Migration,
    from_state: type[BaseModel],
    branch_id: str,
) -> str:
    """``engine.migrate.migrate``, holding the branch.

    Raises:
        ThreadBusyError: a run (or another edit) holds the branch; nothing is written.
    """
    history_ops.check_ids(thread_id, branch_id)
    async with hold_thread(store, thread_id, branch_id, "migrate", graph.lease_ttl):
        return await migrate_thread(graph, store, thread_id, fn, from_state, branch_id)
