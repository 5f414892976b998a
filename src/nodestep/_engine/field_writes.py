"""Who wrote what: a lineage's records read as field writes, and the state they make, as JSON.

Each record that changes the state is read as a batch of ``Write``s, one per field it
writes, each naming its writer: the base checkpoint (``"defaults"``, ``"fork"``,
``"migration"`` or ``"checkpoint"``), a run's ``"input"``, a node (``"node"``, or
``"resume"`` for a task that ran again to take an interrupt's answer), or
``update_state`` (``"update_state"``, with the node of ``as_node=``). A batch is merged at
once, as the engine merges a superstep.

Without the state class, which fields have a reducer is read from the records (see
``FieldFold``). A reducer field's value is merged as the
built-in reducers merge JSON (lists appended, items with an ``id`` replaced in place,
dicts updated); every checkpoint sets the values exactly as stored, so a reducer of one's
own can only make a value between two checkpoints approximate, never a provenance.
"""

from __future__ import annotations

from collections.abc import Iterable, Iterator, Mapping
from dataclasses import dataclass, field
from typing import Any

from nodestep._engine.lineage import Lineage
from nodestep.store import Record

__all__ = ["Batch", "FieldFold", "Write", "batches"]

_NODE_KINDS = ("node", "resume", "update_state")


@dataclass(frozen=True, slots=True)
class Write:
    """One write to a state field, and who made it.

    Attributes:
        field: The field.
        value: The written value, in its stored JSON form (for a reducer field, what the
            writer gave the reducer, not the merged result).
        kind: The writer: ``"input"`` (a run's input), ``"node"``, ``"resume"`` (a node
            that ran again with an interrupt's answer), ``"update_state"`` (with ``node``
            when made ``as_node=``), or the checkpoint the value comes from: ``"defaults"``
            (the thread's first), ``"fork"``, ``"migration"``, or ``"checkpoint"`` (where
            a pruned history starts).
        event_id: The event that holds the write.
        sequence: That event's sequence number in its branch.
        branch_id: That event's branch.
        timestamp: When the event was written (``time.time()``).
        node: The node that wrote it, or ``None`` for an input or a checkpoint.
        task_id: The node's task, when it differs from the node (a ``Send`` task).
        run_id: The run that made it; ``None`` for ``update_state`` and checkpoints.
        replaced: ``True`` when written with ``Replace(...)``: the reducer was skipped.
    """

    field: str
    value: Any
    kind: str
    event_id: str
    sequence: int
    branch_id: str
    timestamp: float
    node: str | None = None
    task_id: str | None = None
    run_id: str | None = None
    replaced: bool = False

    def to_json(self) -> dict[str, Any]:
        """Return the write as a plain JSON-able dict."""
        data = {
            "field": self.field,
            "value": self.value,
            "kind": self.kind,
            "event_id": self.event_id,
            "sequence": self.sequence,
            "branch_id": self.branch_id,
            "timestamp": self.timestamp,
            "node": self.node,
            "task_id": self.task_id,
            "run_id": self.run_id,
        }
        if self.replaced:
            data["replaced"] = True
        return data

    def describe(self) -> str:
        """Return who wrote it and where, in one line (without the value)."""
        who = self.kind
        if self.node is not None:
            task = f" ({self.task_id})" if self.task_id else ""
            who = (
                f"{self.kind} {self.node}{task}"
                if self.kind != "node"
                else f"node {self.node}{task}"
            )
        run = f", run {self.run_id}" if self.run_id else ""
        return f"{who} at event {self.sequence} on {self.branch_id!r}{run}"

    def __repr__(self) -> str:
        return f"Write({self.field!r}, {self.kind!r}, node={self.node!r}, seq={self.sequence})"


@dataclass(frozen=True, slots=True)
class Batch:
    """The writes of one record, merged together; ``values`` for a checkpoint."""

    record: Record
    writes: list[Write]
    values: dict[str, Any] | None = None


@dataclass(slots=True)
class _Reading:
    """What reading a lineage remembers between records."""

    run_id: str | None = None
    paused: set[str] = field(default_factory=set)
    resumed: set[str] = field(default_factory=set)
    # A finished task's record, its result, and the run that wrote the record: a task
    # that finished before a crash or a fork was run by an earlier run than the one
    # that completes its superstep.
    pending: dict[str, tuple[Record, Mapping[str, Any], str | None]] = field(default_factory=dict)


def batches(lineage: Lineage) -> Iterator[Batch]:
    """Yield the lineage's records that write the state, each as a batch of writes."""
    reading = _Reading()
    records = lineage.records
    base = records[0]
    yield Batch(base, _writes(base, base["values"], lineage.base, {}), dict(base["values"]))
    _remember_checkpoint(reading, base)
    for record in records[1:]:
        batch = _read(reading, record)
        if batch is not None:
            yield batch


def _remember_checkpoint(reading: _Reading, record: Record) -> None:
    reading.paused = _paused_tasks(record.get("interrupts", {}).values())
    for task_id, entry in record.get("done", {}).items():
        reading.pending[task_id] = (record, entry, None)  # its run is not stored


def _paused_tasks(interrupts: Iterable[Mapping[str, Any]]) -> set[str]:
    """Return the ids of the tasks that paused, as their interrupts name them."""
    return {str(i.get("task", i.get("node"))) for i in interrupts}


def _resumed(task_id: str, resumed: set[str]) -> bool:
    """Tell whether task ``task_id`` ran again to take an answer: it paused, or a subgraph
    it runs did (whose interrupt names the task by its path, ``child/ask``)."""
    return task_id in resumed or any(t.startswith(f"{task_id}/") for t in resumed)


def _read(reading: _Reading, record: Record) -> Batch | None:
    kind = record["type"]
    if kind == "run_started":
        reading.run_id = record.get("run")
        if record.get("answers"):
            reading.resumed = set(reading.paused)
        if "input" in record:
            return Batch(record, _writes(record, record["input"], "input", record, reading.run_id))
    elif kind == "task_finished":
        task_id = str(record.get("task") or record["node"])
        reading.pending[task_id] = (record, record, reading.run_id)
    elif kind == "superstep_completed":
        return Batch(record, _superstep(reading, record))
    elif kind == "run_paused":
        reading.paused = _paused_tasks(record["interrupts"])
    elif kind == "state_updated":
        node = record.get("node")
        return Batch(record, _writes(record, record["values"], "update_state", record, node=node))
    elif kind == "checkpoint":
        return Batch(record, [], dict(record["values"]))
    return None


def _superstep(reading: _Reading, record: Record) -> list[Write]:
    tasks: Mapping[str, Any] = record.get("tasks", {})
    writes: list[Write] = []
    for task_id, entry in tasks.items():
        source: tuple[Record, Mapping[str, Any], str | None] | None
        if "update" in entry:
            source = (record, entry, reading.run_id)
        else:
            source = reading.pending.get(task_id)
        if source is None:
            continue
        holder, result, run_id = source
        node = str(result.get("node") or task_id)
        if result.get("edited"):
            kind = "update_state"
        elif _resumed(task_id, reading.resumed):
            kind = "resume"
        else:
            kind = "node"
        writes += _writes(
            holder,
            result.get("update") or {},
            kind,
            result,
            run_id if kind != "update_state" else None,
            node=node,
            task_id=task_id if task_id != node else None,
        )
    reading.pending.clear()
    reading.resumed.clear()
    return writes


def _writes(
    record: Record,
    values: Mapping[str, Any],
    kind: str,
    body: Mapping[str, Any],
    run_id: str | None = None,
    *,
    node: str | None = None,
    task_id: str | None = None,
) -> list[Write]:
    replaced = set(body.get("replaced", ()))
    return [
        Write(
            name,
            value,
            kind,
            record["id"],
            record["seq"],
            record["branch"],
            record["ts"],
            node,
            task_id,
            run_id,
            name in replaced,
        )
        for name, value in values.items()
    ]


@dataclass(slots=True)
class _Field:
    """One field's fold: its writes since the value was last replaced, and its values."""

    writes: list[Write]
    plain: Any  # the value if the field has no reducer: its last write
    merged: Any  # the value if it has one: the writes merged as JSON
    since_checkpoint: int = 0


_BASES = ("defaults", "fork", "migration", "checkpoint")


class FieldFold:
    """Fold a lineage's batches into each field's writes and value.

    Which fields have a reducer, when ``reducers`` does not say: a field written with
    ``Replace`` or twice in one merge has one; a checkpoint whose value is the field's
    last write and not the writes merged says it has none, one whose value is not the
    last write says it has one. A field the records say nothing about has one if its
    value is a list (lists are mostly appended to: messages, logs) and none otherwise.

    Args:
        reducers: The fields known to have a reducer; ``None`` reads them from the records.
    """

    def __init__(self, reducers: frozenset[str] | None = None) -> None:
        self._known = reducers
        self._fields: dict[str, _Field] = {}
        self._evidence: dict[str, bool] = {}  # what the records showed of a field's reducer

    def fold(self, batch: Batch) -> None:
        """Take one batch."""
        if batch.values is not None and not batch.writes:
            self._checkpoint(batch.values)
            return
        seen: set[str] = set()
        for write in batch.writes:
            state = self._fields.get(write.field)
            if state is None or write.kind in _BASES:
                self._fields[write.field] = _Field([write], write.value, write.value)
                continue
            if write.replaced or write.field in seen:
                self._evidence[write.field] = True
            seen.add(write.field)
            state.plain = write.value
            state.since_checkpoint += 1
            if write.replaced:
                state.writes = [write]
                state.merged = write.value
            else:
                state.writes.append(write)
                state.merged = merge_json(state.merged, write.value)

    def _checkpoint(self, values: Mapping[str, Any]) -> None:
        for name, value in values.items():
            state = self._fields.get(name)
            if state is None:
                continue
            if state.since_checkpoint and name not in self._evidence:
                if value != state.plain:
                    self._evidence[name] = True
                elif value != state.merged:
                    self._evidence[name] = False
            state.plain = state.merged = value
            state.since_checkpoint = 0

    @property
    def names(self) -> list[str]:
        """The fields seen, in the order they first appeared."""
        return list(self._fields)

    def reducer(self, name: str) -> bool:
        """Tell whether field ``name`` has a reducer (known, or read from the records)."""
        if self._known is not None:
            return name in self._known
        shown = self._evidence.get(name)
        return isinstance(self._fields[name].plain, list) if shown is None else shown

    def value(self, name: str) -> Any:
        """Return field ``name``'s value after the batches folded so far (JSON)."""
        state = self._fields[name]
        return state.merged if self.reducer(name) else state.plain

    def values(self) -> dict[str, Any]:
        """Return every field's value (JSON)."""
        return {name: self.value(name) for name in self._fields}

    def writes(self, name: str) -> list[Write]:
        """Return the writes that made field ``name``'s value, oldest first.

        A field without a reducer: its last write. One with a reducer: every write since
        its value was last replaced (by a checkpoint, a ``Replace``), leaving out a
        checkpoint's empty value that later writes were merged into.
        """
        state = self._fields[name]
        if not self.reducer(name):
            return [state.writes[-1]]
        writes = state.writes
        if len(writes) > 1 and writes[0].kind not in _NODE_KINDS and _empty(writes[0].value):
            writes = writes[1:]
        return list(writes)


def _empty(value: Any) -> bool:
    return value is None or (isinstance(value, list | dict | str) and not value)


def merge_json(current: Any, update: Any) -> Any:
    """Merge a reducer field's write into its JSON value, as the built-in reducers do.

    Lists are appended (``add``); a list of objects with an ``id`` replaces the items with
    the same id in place (``add_messages``); dicts are updated (``merge_dict``); anything
    else replaces the value.
    """
    if isinstance(current, list) and isinstance(update, list):
        if update and all(isinstance(i, dict) and "id" in i for i in update):
            where = {i["id"]: n for n, i in enumerate(current) if isinstance(i, dict) and "id" in i}
            merged = list(current)
            for item in update:
                if item["id"] in where:
                    merged[where[item["id"]]] = item
                else:
                    where[item["id"]] = len(merged)
                    merged.append(item)
            return merged
        return current + update
    if isinstance(current, dict) and isinstance(update, dict):
        return {**current, **update}
    return update
