"""Compare a replayed call's records with the stored ones: the first divergence.

Two runs of one graph write the same records but for their ids, times and run ids, and
the order in which a superstep's parallel tasks finished (their merge order is fixed).
So records are compared as *units*: each record without its envelope, and a superstep
with its tasks' results gathered by task id. Checkpoints, retries, circuit breaker
changes and subgraph records follow from the rest, or from timing, and are not compared.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

from nodestep._engine.provenance import short_json
from nodestep.store import Record

__all__ = [
    "Divergence",
    "Finished",
    "Unit",
    "compare",
    "divergence_at",
    "finished_in",
    "opening_divergence",
    "units",
]

_UNCOMPARED = frozenset({"checkpoint", "subgraph", "task_retried", "breaker_changed"})
_ENVELOPE = frozenset({"id", "seq", "ts", "thread", "branch", "run", "c"})


@dataclass(frozen=True, slots=True, repr=False)
class Divergence:
    """The first event where the new graph version does not do what the stored run did.

    Attributes:
        index: The event's position in the replayed history, counted from 1 (the
            thread's opening checkpoint), so on the main branch it is the sequence
            number; across forks, the parent's events come first.
        event_id: The stored event's id, or ``None`` when the new version recorded an
            event past the stored history's end.
        sequence: The stored event's sequence number in its branch (or ``None``).
        branch_id: The stored event's branch (or ``None``).
        event_type: The stored event's type, e.g. ``"superstep_completed"`` (or the new
            event's, past the stored end).
        node: The node whose task differs, or ``None``.
        field: The state field whose write differs, or ``None`` when something else does
            (the tasks run, the routes, the event's type).
        old: What the stored run recorded (JSON).
        new: What the new version recorded (JSON).
        reason: One sentence saying what differs.
    """

    index: int
    event_id: str | None
    sequence: int | None
    branch_id: str | None
    event_type: str
    node: str | None
    field: str | None
    old: Any
    new: Any
    reason: str

    def to_json(self) -> dict[str, Any]:
        """Return the divergence as a plain JSON-able dict."""
        return {
            "index": self.index,
            "event_id": self.event_id,
            "sequence": self.sequence,
            "branch_id": self.branch_id,
            "event_type": self.event_type,
            "node": self.node,
            "field": self.field,
            "old": self.old,
            "new": self.new,
            "reason": self.reason,
        }

    def __str__(self) -> str:
        where = f"event {self.index} ({self.branch_id}@{self.sequence} {self.event_type})"
        return f"diverges at {where}: {self.reason}"

    def __repr__(self) -> str:
        return (
            f"Divergence(index={self.index}, event_type={self.event_type!r}, "
            f"node={self.node!r}, field={self.field!r})"
        )


@dataclass(frozen=True, slots=True)
class Unit:
    """One compared step of a history: a record, or a superstep with its tasks' results."""

    kind: str
    body: dict[str, Any]
    index: int
    record: Record | None
    tasks: dict[str, tuple[int, Record]] = field(default_factory=dict)


Finished = dict[str, tuple[int, Record, Record]]
"""A superstep's finished tasks by task id: the index and record that hold each one's
result (a ``task_finished``, or a checkpoint's ``done``), and the result."""


def units(
    records: list[tuple[int, Record]] | list[Record], pending: Finished | None = None
) -> list[Unit]:
    """Read records as compared units: a superstep gathers its tasks' results.

    Args:
        records: The records of one call, or with their indexes in the history.
        pending: The tasks of an unfinished superstep that finished before these
            records, kept from one call to the next (``finished_in``): which of a
            superstep's parallel tasks finished before a failure, a crash or a fork
            depends on timing, so its tasks' results are compared where the superstep
            completes, wherever they were recorded.
    """
    units: list[Unit] = []
    pending = {} if pending is None else pending
    for position, item in enumerate(records):
        index, record = item if isinstance(item, tuple) else (position, item)
        kind = record["type"]
        if kind in _UNCOMPARED:
            continue
        if kind == "task_finished" and not record.get("edited"):
            pending[str(record.get("task") or record["node"])] = (index, record, record)
            continue
        if kind != "superstep_completed":
            units.append(Unit(kind, _plain(record), index, record))
            continue
        tasks: dict[str, tuple[int, Record]] = {}
        body: dict[str, Any] = {}
        for task_id, entry in record["tasks"].items():
            found = (index, record, entry) if "update" in entry else pending.get(task_id)
            at, holder, result = (index, record, record) if found is None else found
            tasks[task_id] = (at, holder)
            body[task_id] = {
                "node": result.get("node") or task_id,
                "update": result.get("update") or {},
                "replaced": result.get("replaced", []),
                "routes": entry.get("routes", []),
                "failed": result.get("failed"),
            }
        pending.clear()
        units.append(Unit(kind, {"step": record["step"], "tasks": body}, index, record, tasks))
    return units


def finished_in(checkpoint: Record, index: int) -> Finished:
    """Return the tasks a checkpoint holds as finished (its ``done``), as ``units`` reads
    them; ``index`` is the checkpoint's position."""
    if checkpoint["type"] != "checkpoint":
        return {}
    done = checkpoint.get("done", {})
    return {task_id: (index, checkpoint, entry) for task_id, entry in done.items()}


def _plain(record: Record) -> dict[str, Any]:
    """Return a record's compared keys: not its ids, times, run or checksum; no message."""
    body = {k: v for k, v in record.items() if k not in _ENVELOPE}
    if record["type"] == "run_failed":  # a message may hold addresses or times
        body.pop("message", None)
    return body


def opening_divergence(stored: Record, new_values: dict[str, Any]) -> Divergence | None:
    """Compare the stored opening checkpoint's values with the new version's defaults."""
    old_values = stored.get("values", {})
    for name in [*old_values, *(n for n in new_values if n not in old_values)]:
        if old_values.get(name) != new_values.get(name):
            return divergence_at(
                0,
                stored,
                None,
                name,
                old_values.get(name),
                new_values.get(name),
                f"the thread opens with {name} = {short_json(old_values.get(name))}; the new "
                f"version's default is {short_json(new_values.get(name))}",
            )
    return None


def divergence_at(
    index: int,
    record: Record | None,
    node: str | None,
    name: str | None,
    old: Any,
    new: Any,
    reason: str,
    new_type: str | None = None,
) -> Divergence:
    index += 1  # positions count from 0, a history's events from 1
    if record is None:
        return Divergence(index, None, None, None, new_type or "", node, name, old, new, reason)
    return Divergence(
        index,
        record["id"],
        record["seq"],
        record["branch"],
        record["type"],
        node,
        name,
        old,
        new,
        reason,
    )


def compare(
    stored: list[Unit], new: list[Unit], failure: str | None
) -> tuple[Divergence | None, int]:
    """Return the first difference between a call's stored and new units, and the count."""
    for count, (old, made) in enumerate(zip(stored, new, strict=False), start=1):
        found = _differ(old, made)
        if found is not None:
            return found, count
    if len(stored) > len(new):
        old = stored[len(new)]
        raised = f" (it raised {failure})" if failure else ""
        reason = f"the stored run recorded a {old.kind} here; the new version stops{raised}"
        return divergence_at(old.index, old.record, None, None, old.kind, None, reason), len(
            new
        ) + 1
    if len(new) > len(stored):
        made = new[len(stored)]
        last = stored[-1] if stored else None
        index = last.index + 1 if last else 0
        reason = f"the new version goes on with a {made.kind} where the stored run stopped"
        return divergence_at(index, None, None, None, None, made.kind, reason, made.kind), len(
            stored
        )
    return None, len(stored)


def _differ(old: Unit, made: Unit) -> Divergence | None:
    if old.kind != made.kind:
        reason = f"the stored run recorded a {old.kind} here; the new version a {made.kind}"
        node = old.body.get("node") if isinstance(old.body.get("node"), str) else None
        return divergence_at(old.index, old.record, node, None, old.kind, made.kind, reason)
    if old.kind == "superstep_completed":
        return _differ_tasks(old, made)
    for key in [*old.body, *(k for k in made.body if k not in old.body)]:
        before, after = old.body.get(key), made.body.get(key)
        if before != after:
            node = old.body.get("node") if isinstance(old.body.get("node"), str) else None
            reason = f"its {key} was {short_json(before)}; the new version's is {short_json(after)}"
            name = key if key in ("values", "input") else None
            return divergence_at(old.index, old.record, node, name, before, after, reason)
    return None


def _differ_tasks(old: Unit, made: Unit) -> Divergence | None:
    step = old.body["step"]
    before, after = old.body["tasks"], made.body["tasks"]
    if list(before) != list(after):
        node = next(
            iter([t for t in before if t not in after] + [t for t in after if t not in before]),
            None,
        )
        reason = f"superstep {step} ran tasks {list(before)}; the new version runs {list(after)}"
        return divergence_at(old.index, old.record, node, None, list(before), list(after), reason)
    for task_id, was in before.items():
        now = after[task_id]
        index, record = old.tasks[task_id]
        node = str(was["node"])
        for name in [*was["update"], *(k for k in now["update"] if k not in was["update"])]:
            if was["update"].get(name) != now["update"].get(name):
                old_value, new_value = was["update"].get(name), now["update"].get(name)
                reason = (
                    f"node {node} wrote {name} = {short_json(old_value)}; the new version "
                    f"writes {short_json(new_value)}"
                )
                return divergence_at(index, record, node, name, old_value, new_value, reason)
        for key in ("replaced", "routes", "failed"):
            if was[key] != now[key]:
                reason = (
                    f"node {node}'s {key} were {short_json(was[key])}; the new version's are "
                    f"{short_json(now[key])}"
                )
                return divergence_at(index, record, node, None, was[key], now[key], reason)
    return None
