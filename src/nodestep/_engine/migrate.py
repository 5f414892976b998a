"""Migrate a stored thread to another state class: one checkpoint that carries the new values.

A thread's records hold its values in the JSON form of the class that wrote them, and a
class without one of the stored fields refuses to load them (``StateSchema.unknown_fields``).
A migration reads the thread with the old class, hands its values (as JSON) to the user's
function, and appends a checkpoint of the new class's values, marked ``"migration"``. Loads
start at the last checkpoint, so every later load reads only the new values; the records
before it stay as they were stored, and the old class still reads them.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping, Sequence
from typing import Any

from pydantic import BaseModel

from nodestep._engine.compiled import ThreadServices
from nodestep._engine.history_ops import unknown_thread
from nodestep._engine.positions import MIGRATION_KEY, load_position
from nodestep._engine.writer import stamp
from nodestep._errors import GraphConfigError, StateUpdateError
from nodestep._state.deep_copy import deep_copy
from nodestep._state.schema import StateSchema
from nodestep._superstep import machine
from nodestep._superstep.position import Position
from nodestep._superstep.records import Checkpoint
from nodestep.store import Record, StateStore

__all__ = ["Migration", "last_migration", "migrate"]

Migration = Callable[[dict[str, Any]], Mapping[str, Any] | BaseModel]
"""Takes the stored values (JSON) and returns the new class's values."""


async def migrate(
    graph: ThreadServices,
    store: StateStore,
    thread_id: str,
    fn: Migration,
    from_state: type[BaseModel],
    branch_id: str,
) -> str:
    """Append a migration checkpoint of ``graph.schema``'s values; return its event id.

    Raises:
        UnknownThreadError: the branch has no history.
        GraphConfigError: ``from_state`` is no state class, or a superstep is pending.
        StateStoreError: ``from_state`` cannot read the thread, or a new value has no
            JSON form.
        StateUpdateError: ``fn`` returned something that does not fit the new class.
        ThreadConflictError: another writer appended to the branch meanwhile.
    """
    old = StateSchema.of(from_state)
    pos = await load_position(store, old, thread_id, branch_id)
    if pos is None:
        raise unknown_thread(thread_id, branch_id)
    if pos.tasks:
        raise GraphConfigError(
            f"Thread '{thread_id}' (branch '{branch_id}') is {pos.status} in superstep "
            f"{pos.step} (tasks {', '.join(repr(t.task_id) for t in pos.tasks)}), whose "
            f"stored writes and payloads are {old.cls.__name__}'s. Finish the run with the "
            f"old graph first (resume it, or invoke(None, thread_id=...)), then migrate."
        )
    schema = graph.schema
    new = fn(old.values_to_json(pos.values))
    if not isinstance(new, Mapping | BaseModel):
        raise StateUpdateError(
            f"The migration of thread '{thread_id}' returned {type(new).__name__}; return a "
            f"dict of {schema.cls.__name__}'s field values.",
            writer="migrate",
        )
    values = schema.defaults()
    # The function's objects stay the caller's: the state gets copies.
    for key, value, _ in schema.validate_update(deep_copy(new, "migrate"), "migrate"):
        values[key] = value
    moved = Position(
        values=values,
        step=pos.step,
        run_id=pos.run_id,
        node_states=pos.node_states,
        turn=pos.turn,
    )
    body = Checkpoint(moved).to_json(schema)
    body[MIGRATION_KEY] = {"from": _name(old.cls), "to": _name(schema.cls)}
    seq = pos.seq + 1
    event_id = graph.new_id()
    stamp(body, event_id, seq, round(graph.clock(), 6), thread_id, branch_id)
    await store.append(thread_id, branch_id, [body], after=pos.seq)
    machine.stored(moved, seq, event_id, checkpoint=True)
    graph.positions.put(store, schema, thread_id, branch_id, moved)
    return event_id


def _name(cls: type) -> str:
    return f"{cls.__module__}.{cls.__qualname__}"


def last_migration(bodies: Sequence[Record]) -> int:
    """Return the index of the last migration checkpoint in ``bodies``, else 0.

    The records before it hold another class's values, which this class cannot read.
    """
    for index in range(len(bodies) - 1, 0, -1):
        body = bodies[index]
        if MIGRATION_KEY in body and body.get("type") == "checkpoint":
            return index
    return 0
