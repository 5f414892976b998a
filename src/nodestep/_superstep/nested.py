"""The history record of a subgraph: a record of a child run, stored in the parent's thread.

A node that runs a compiled graph (a subgraph) keeps the child's history in the parent's
thread, so one store append, one lease and one sequence cover both, and a load, a fork or
a continuation of the parent sees the child as it stood. Each record the child stores is
wrapped in a ``subgraph`` record that names the parent task it belongs to::

    {"type": "subgraph", "task": "review", "record": {"type": "run_started", ...}}

A grandchild's record is wrapped twice (``review`` then ``legal``), so the nesting is the
path. The parent's position keeps the child's records, as JSON, by task id
(``Position.children``) until the task finishes; the parent never decodes them: it has
no schema for the child's state. The child decodes them, with its own schema, when the
task runs again (``_engine.subgraph``).
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any, ClassVar

from nodestep._state.schema import StateSchema
from nodestep._superstep import machine
from nodestep._superstep.position import Position
from nodestep._superstep.records import Body, HistoryRecord

__all__ = ["SubgraphEvent", "child_path"]


@dataclass(slots=True)
class SubgraphEvent(HistoryRecord):
    """A record of the subgraph run of parent task ``task``.

    Attributes:
        task: The parent task that runs the subgraph (its node name, or ``name[1]`` and on
            for its further tasks in one superstep, as a ``Send`` makes them).
        record: The child's record, in its stored form, with the child's own ``id`` and
            ``seq`` (counted within the child's run).
    """

    kind: ClassVar[str] = "subgraph"
    task: str
    record: dict[str, Any]

    def to_json(self, schema: StateSchema) -> Body:
        return {"type": self.kind, "task": self.task, "record": self.record}

    @classmethod
    def from_json(cls, schema: StateSchema, body: Mapping[str, Any]) -> SubgraphEvent:
        record = body["record"]
        if not isinstance(record, dict) or not isinstance(record.get("type"), str):
            raise TypeError(f"the child record is not a record: {record!r:.80}")
        return cls(str(body["task"]), record)

    def advance(self, schema: StateSchema, pos: Position) -> None:
        machine.child_event(pos, self.task, self.record)


def child_path(body: Mapping[str, Any]) -> tuple[list[str], Mapping[str, Any]]:
    """Return the task path of a stored ``subgraph`` record and the innermost record.

    ``{"type": "subgraph", "task": "a", "record": {"type": "subgraph", "task": "b",
    "record": R}}`` gives ``(["a", "b"], R)``.
    """
    path: list[str] = []
    while body.get("type") == SubgraphEvent.kind:
        path.append(str(body["task"]))
        body = body["record"]
    return path, body
