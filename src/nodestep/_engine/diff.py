"""Diff two branches (or two events) of a thread: fork point, field changes, events since.

Both sides are read from the store alone, as lineages (see ``_engine.lineage``): the fork
point is the last event the two lineages share, each side's events are those after it, and
the states are the two lineages folded to their ends (``_engine.field_writes``).
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from pydantic import BaseModel

from nodestep._engine.history import HistoryEvent, event_nodes
from nodestep._engine.lineage import Lineage, read_lineage, resolve_point
from nodestep._engine.provenance import (
    fold_lineage,
    reducer_fields,
    short_json,
    state_values,
    thread_branches,
)
from nodestep.store import StateStore

__all__ = ["FieldChange", "ThreadDiff", "diff", "diff_thread", "event_nodes"]

_ABSENT: Any = None


@dataclass(frozen=True, slots=True, repr=False)
class FieldChange:
    """How one state field differs between the two sides of a diff.

    Attributes:
        field: The field.
        change: ``"added"`` (only side ``b`` has it), ``"removed"`` (only ``a``) or
            ``"changed"``.
        a: The value on side ``a`` (JSON), ``None`` when ``"added"``.
        b: The value on side ``b`` (JSON), ``None`` when ``"removed"``.
        appended: When both values are lists and one starts with the other: the items the
            longer one has after it, else ``None``.
        appended_on: Which side has those items, ``"a"`` or ``"b"``, else ``None``.
    """

    field: str
    change: str
    a: Any
    b: Any
    appended: tuple[Any, ...] | None = None
    appended_on: str | None = None

    def mirrored(self) -> FieldChange:
        """Return the change seen from the other side (``a`` and ``b`` swapped)."""
        change = {"added": "removed", "removed": "added"}.get(self.change, self.change)
        side = {"a": "b", "b": "a"}.get(self.appended_on or "")
        return FieldChange(self.field, change, self.b, self.a, self.appended, side)

    def to_json(self) -> dict[str, Any]:
        """Return the change as a plain JSON-able dict."""
        data = {"field": self.field, "change": self.change, "a": self.a, "b": self.b}
        if self.appended is not None:
            data["appended"] = list(self.appended)
            data["appended_on"] = self.appended_on
        return data

    def __str__(self) -> str:
        if self.change == "added":
            return f"+ {self.field}: {short_json(self.b)}"
        if self.change == "removed":
            return f"- {self.field}: {short_json(self.a)}"
        if self.appended is not None:
            items = ", ".join(short_json(i, 30) for i in self.appended)
            return f"~ {self.field}: {self.appended_on} appends {len(self.appended)}: {items}"
        return f"~ {self.field}: {short_json(self.a)} -> {short_json(self.b)}"

    def __repr__(self) -> str:
        return f"FieldChange({self.field!r}, {self.change!r})"


@dataclass(frozen=True, slots=True, repr=False)
class ThreadDiff:
    """What differs between two branches, or two events, of a thread.

    Attributes:
        thread_id: The thread.
        a: Side ``a``: the event compared (a branch's head when a branch was named).
        b: Side ``b``: the same.
        fork_point: The last event both sides share (their common ancestor), or ``None``
            when they share none (a prune or a migration cut their histories apart).
        changes: The fields whose values differ, in field order.
        a_events: The events of side ``a`` after the fork point, oldest first.
        b_events: The same for side ``b``.
    """

    thread_id: str
    a: HistoryEvent
    b: HistoryEvent
    fork_point: HistoryEvent | None
    changes: tuple[FieldChange, ...]
    a_events: tuple[HistoryEvent, ...]
    b_events: tuple[HistoryEvent, ...]

    @property
    def same(self) -> bool:
        """Whether the two sides hold the same state."""
        return not self.changes

    def mirrored(self) -> ThreadDiff:
        """Return the diff of ``b`` against ``a``."""
        changes = tuple(c.mirrored() for c in self.changes)
        return ThreadDiff(
            self.thread_id, self.b, self.a, self.fork_point, changes, self.b_events, self.a_events
        )

    def to_json(self) -> dict[str, Any]:
        """Return the diff as a plain JSON-able dict."""
        return {
            "thread_id": self.thread_id,
            "a": _event_json(self.a),
            "b": _event_json(self.b),
            "fork_point": None if self.fork_point is None else _event_json(self.fork_point),
            "changes": [c.to_json() for c in self.changes],
            "a_events": [_event_json(e) for e in self.a_events],
            "b_events": [_event_json(e) for e in self.b_events],
        }

    def __str__(self) -> str:
        fork = "none" if self.fork_point is None else _event_line(self.fork_point)
        lines = [
            f"diff of thread {self.thread_id!r}",
            f"  a: {_event_line(self.a)}",
            f"  b: {_event_line(self.b)}",
            f"  fork point: {fork}",
        ]
        lines.append("  state: the same" if self.same else "  state:")
        lines += [f"    {c}" for c in self.changes]
        for side, events in (("a", self.a_events), ("b", self.b_events)):
            lines.append(f"  {len(events)} event(s) on {side} since the fork point")
            lines += [f"    {_event_line(e)}" for e in events]
        return "\n".join(lines)

    def __repr__(self) -> str:
        return (
            f"ThreadDiff({self.thread_id!r}, a={self.a.branch_id}@{self.a.sequence}, "
            f"b={self.b.branch_id}@{self.b.sequence}, changes={len(self.changes)})"
        )


def _event_json(event: HistoryEvent) -> dict[str, Any]:
    return {
        "id": event.id,
        "type": event.type,
        "sequence": event.sequence,
        "branch_id": event.branch_id,
        "timestamp": event.timestamp,
        "nodes": event_nodes(event),
    }


def _event_line(event: HistoryEvent) -> str:
    nodes = " ".join(event_nodes(event))
    return f"{event.branch_id}@{event.sequence} {event.type}{' ' if nodes else ''}{nodes}"


async def diff(
    store: StateStore,
    thread_id: str,
    a: str,
    b: str,
    *,
    state: type[BaseModel] | None = None,
) -> ThreadDiff:
    """Compare two branches or events of a thread.

    Args:
        store: The store that holds the thread.
        thread_id: The thread.
        a: A branch id (its head) or an event id.
        b: The same, for the other side.
        state: The thread's state class, when known: it tells which fields have a
            reducer. ``None`` reads that from the records (see ``nodestep.history``).

    Raises:
        GraphConfigError: an id is not a non-empty string, or ``state`` is not a state
            class.
        UnknownThreadError: the thread has no such branch or event.
        StateStoreError: a history does not start with a checkpoint.
    """
    reducer_fields(state)  # refuses a state= that is no state class, before any read
    branches = await thread_branches(store, thread_id)
    point_a = await resolve_point(store, thread_id, a, None, branches, "a")
    point_b = await resolve_point(store, thread_id, b, None, branches, "b")
    side_a = await read_lineage(store, thread_id, point_a, branches)
    side_b = await read_lineage(store, thread_id, point_b, branches)
    if state is None:
        changes = _changes(side_a, side_b)
    else:  # the class's own reducers make the values exactly
        values_a = await state_values(store, state, thread_id, point_a)
        changes = _compare(values_a, await state_values(store, state, thread_id, point_b))
    ids_b = {r["id"]: n for n, r in enumerate(side_b.records)}
    shared = next(
        (n for n in range(len(side_a.records) - 1, -1, -1) if side_a.records[n]["id"] in ids_b),
        None,
    )
    if shared is None:
        fork, after_a, after_b = None, side_a.records, side_b.records
    else:
        fork = HistoryEvent.from_record(side_a.records[shared])
        after_a = side_a.records[shared + 1 :]
        after_b = side_b.records[ids_b[side_a.records[shared]["id"]] + 1 :]
    return ThreadDiff(
        thread_id,
        _last(side_a),
        _last(side_b),
        fork,
        changes,
        tuple(HistoryEvent.from_record(r) for r in after_a),
        tuple(HistoryEvent.from_record(r) for r in after_b),
    )


def _last(lineage: Lineage) -> HistoryEvent:
    return HistoryEvent.from_record(lineage.records[-1])


def _changes(side_a: Lineage, side_b: Lineage) -> tuple[FieldChange, ...]:
    # what either side's records show of a field's reducer holds for both
    fold_a, fold_b = fold_lineage(side_a), fold_lineage(side_b)
    reducers = frozenset(n for f in (fold_a, fold_b) for n in f.names if f.reducer(n))
    return _compare(
        fold_lineage(side_a, reducers).values(), fold_lineage(side_b, reducers).values()
    )


def _compare(values_a: dict[str, Any], values_b: dict[str, Any]) -> tuple[FieldChange, ...]:
    changes: list[FieldChange] = []
    for name in [*values_a, *(n for n in values_b if n not in values_a)]:
        if name not in values_b:
            changes.append(FieldChange(name, "removed", values_a[name], _ABSENT))
        elif name not in values_a:
            changes.append(FieldChange(name, "added", _ABSENT, values_b[name]))
        elif values_a[name] != values_b[name]:
            changes.append(_changed(name, values_a[name], values_b[name]))
    return tuple(changes)


def _changed(name: str, a: Any, b: Any) -> FieldChange:
    if isinstance(a, list) and isinstance(b, list):
        if b[: len(a)] == a:
            return FieldChange(name, "changed", a, b, tuple(b[len(a) :]), "b")
        if a[: len(b)] == b:
            return FieldChange(name, "changed", a, b, tuple(a[len(b) :]), "a")
    return FieldChange(name, "changed", a, b)


diff_thread = diff
"""``diff`` under a name that a ``Graph`` method of the same name does not hide."""
