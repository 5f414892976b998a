"""Provenance: which event, node, run and time wrote a state field's value.

Read from the store alone (see ``_engine.lineage``): the records are folded from the
branch's base checkpoint to the event asked about, across forks, and each field keeps the
writes that made its value (``_engine.field_writes``). A field without a reducer has one:
its last write. A field with a reducer has every write since its value was last replaced.

Subgraph runs keep their own fields in their own records; a parent field that a subgraph
node returned is the parent's write, named by the subgraph's node in the parent graph.
Only the thread's own (top-level) fields have a provenance.
"""

from __future__ import annotations

import json
from dataclasses import dataclass
from typing import Any

from pydantic import BaseModel

from nodestep._engine.field_writes import Batch, FieldFold, Write, batches
from nodestep._engine.history_ops import check_ids, check_thread_id
from nodestep._engine.lineage import Lineage, Point, read_lineage, resolve_point
from nodestep._engine.positions import load_position
from nodestep._errors import GraphConfigError, StateStoreError
from nodestep._state.schema import StateSchema
from nodestep.store import BranchRecord, StateStore

__all__ = [
    "Provenance",
    "field_provenance",
    "fold_lineage",
    "provenance",
    "reducer_fields",
    "short_json",
    "state_values",
    "thread_branches",
]


@dataclass(frozen=True, slots=True, repr=False)
class Provenance:
    """Who wrote a state field's value at one event of a thread.

    Attributes:
        thread_id: The thread.
        branch_id: The branch of the event.
        event_id: The event the value is read at (a branch's head by default).
        sequence: That event's sequence number.
        field: The field.
        value: The field's value at the event, in its JSON form.
        reducer: Whether the field has a reducer: then ``writes`` holds every write merged
            into the value since it was last replaced; else only the last write.
        writes: The writes that made the value, oldest first; never empty.
    """

    thread_id: str
    branch_id: str
    event_id: str
    sequence: int
    field: str
    value: Any
    reducer: bool
    writes: tuple[Write, ...]

    @property
    def writer(self) -> Write:
        """The last write to the field: for a field without a reducer, the value's writer."""
        return self.writes[-1]

    def to_json(self) -> dict[str, Any]:
        """Return the provenance as a plain JSON-able dict."""
        return {
            "thread_id": self.thread_id,
            "branch_id": self.branch_id,
            "event_id": self.event_id,
            "sequence": self.sequence,
            "field": self.field,
            "value": self.value,
            "reducer": self.reducer,
            "writes": [w.to_json() for w in self.writes],
        }

    def __str__(self) -> str:
        head = (
            f"{self.field} = {short_json(self.value)}\n"
            f"  at event {self.sequence} of thread {self.thread_id!r}, branch {self.branch_id!r}"
        )
        if not self.reducer:
            return f"{head}\n  written by {self.writer.describe()}"
        lines = [f"{head}\n  a reducer field; {len(self.writes)} write(s) since it was set:"]
        lines += [f"  - {short_json(w.value)} by {w.describe()}" for w in self.writes]
        return "\n".join(lines)

    def __repr__(self) -> str:
        return (
            f"Provenance({self.field!r}, thread={self.thread_id!r}, branch={self.branch_id!r}, "
            f"seq={self.sequence}, writes={len(self.writes)})"
        )


def short_json(value: Any, width: int = 60) -> str:
    """Return ``value`` as compact JSON, cut to ``width`` characters."""
    text = json.dumps(value, ensure_ascii=False, default=str)
    return text if len(text) <= width else text[: width - 3] + "..."


def reducer_fields(state: type[BaseModel] | None) -> frozenset[str] | None:
    """Return the fields of state class ``state`` that have a reducer; ``None`` for none.

    Raises:
        GraphConfigError: ``state`` is not a state class.
    """
    if state is None:
        return None
    if not (isinstance(state, type) and issubclass(state, BaseModel)):
        raise GraphConfigError(
            f"state= takes the thread's state class (a BaseState subclass), got {state!r}. "
            f"Leave it out to read the fields' reducers from the stored records."
        )
    return frozenset(n for n, c in StateSchema.of(state).channels.items() if c.merging)


async def state_values(
    store: StateStore, state: type[BaseModel], thread_id: str, point: Point
) -> dict[str, Any]:
    """Return the state's values at ``point`` (JSON), folded with ``state``'s own reducers.

    Raises:
        StateStoreError: ``state`` cannot read the stored values.
    """
    schema = StateSchema.of(state)
    pos = await load_position(store, schema, thread_id, point.branch_id, at=point.sequence)
    if pos is None:  # resolve_point found the event: a store that lost it since is damaged
        raise StateStoreError(
            f"Thread '{thread_id}' lost record {point.sequence} of branch '{point.branch_id}' "
            f"while it was read; read it again."
        )
    values: dict[str, Any] = schema.values_to_json(pos.values)
    return values


async def thread_branches(store: StateStore, thread_id: str) -> dict[str, BranchRecord]:
    """Return the thread's forked branches by id."""
    check_thread_id(thread_id)
    return {b.id: b for b in await store.list_branches(thread_id)}


def fold_lineage(lineage: Lineage, reducers: frozenset[str] | None = None) -> FieldFold:
    """Fold a lineage's writes; ``reducers`` names the reducer fields, ``None`` infers them."""
    fold = FieldFold(reducers)
    batch: Batch
    for batch in batches(lineage):
        fold.fold(batch)
    return fold


async def provenance(
    store: StateStore,
    thread_id: str,
    field: str,
    *,
    at: str | None = None,
    branch_id: str | None = None,
    state: type[BaseModel] | None = None,
) -> Provenance:
    """Return who wrote ``field``'s value at event ``at`` (default: the branch's head).

    Args:
        store: The store that holds the thread.
        thread_id: The thread.
        field: A field of the thread's state.
        at: An event id; ``None`` for the head of ``branch_id``.
        branch_id: The branch (``"main"`` when ``None`` and ``at`` is ``None``); with
            ``at``, the branch the event must be on.
        state: The thread's state class, when known: it tells which fields have a
            reducer. ``None`` reads that from the records (see ``nodestep.history``).

    Raises:
        GraphConfigError: an id is not a non-empty string, ``field`` is not a field of
            the thread's state, or ``state`` is not a state class.
        UnknownThreadError: the thread, branch or event does not exist.
        StateStoreError: the history does not start with a checkpoint.
    """
    reducers = reducer_fields(state)
    if branch_id is not None:
        check_ids(thread_id, branch_id)
    branches = await thread_branches(store, thread_id)
    point = await resolve_point(store, thread_id, at, branch_id, branches, "at=")
    fold = fold_lineage(await read_lineage(store, thread_id, point, branches), reducers)
    if not isinstance(field, str) or field not in fold.names:
        known = ", ".join(repr(n) for n in fold.names)
        raise GraphConfigError(
            f"Thread '{thread_id}' has no state field {field!r} at event {point.sequence} of "
            f"branch '{point.branch_id}'. Name one of its fields: {known}."
        )
    value = fold.value(field)
    if state is not None and fold.reducer(field):  # the class's own reducer makes it exactly
        value = (await state_values(store, state, thread_id, point)).get(field, value)
    return Provenance(
        thread_id,
        point.branch_id,
        point.event_id,
        point.sequence,
        field,
        value,
        fold.reducer(field),
        tuple(fold.writes(field)),
    )


field_provenance = provenance
"""``provenance`` under a name that a ``Graph`` method of the same name does not hide."""
