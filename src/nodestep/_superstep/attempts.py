"""History records of resilient nodes: a retried attempt, a circuit breaker's change.

Neither moves the position: they say what happened inside a superstep, for the reader of
the history (and for the ``"debug"`` stream). A retried attempt leaves nothing behind, by
design: its writes are dropped, so replaying the history gives the state the run had.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any, ClassVar

from nodestep._state.schema import StateSchema
from nodestep._superstep.position import Position
from nodestep._superstep.records import Body, HistoryRecord

__all__ = ["BreakerChanged", "TaskRetried"]

# These records hold no state values, so their JSON form never reads the schema.
_NO_SCHEMA: Any = None


@dataclass(slots=True)
class TaskRetried(HistoryRecord):
    """Attempt ``attempt`` of a task failed with ``error``; the next starts after ``delay`` s.

    ``message`` is stored as a failure's is: the secrets of the run masked, ``redact=``
    applied (see ``_engine.redact``).
    """

    kind: ClassVar[str] = "task_retried"
    step: int
    node: str
    task_id: str
    attempt: int
    error: str
    message: str
    delay: float

    def to_json(self, schema: StateSchema) -> Body:
        body: Body = {"type": self.kind, "step": self.step, "node": self.node}
        if self.task_id != self.node:
            body["task"] = self.task_id
        body.update(attempt=self.attempt, error=self.error, message=self.message)
        body["delay"] = self.delay
        return body

    @classmethod
    def from_json(cls, schema: StateSchema, body: Mapping[str, Any]) -> TaskRetried:
        node = body["node"]
        return cls(
            body["step"],
            node,
            body.get("task") or node,
            body["attempt"],
            body["error"],
            body["message"],
            float(body["delay"]),
        )

    def advance(self, schema: StateSchema, pos: Position) -> None:
        return None

    def event_data(self) -> dict[str, Any]:
        """Return the ``"debug"`` stream event's data: the stored form."""
        return self.to_json(_NO_SCHEMA)


@dataclass(slots=True)
class BreakerChanged(HistoryRecord):
    """Node ``node``'s circuit breaker moved to ``state`` (``open``, ``half_open``, ``closed``)
    while task ``task_id`` of step ``step`` ran."""

    kind: ClassVar[str] = "breaker_changed"
    step: int
    node: str
    task_id: str
    state: str

    def to_json(self, schema: StateSchema) -> Body:
        body: Body = {"type": self.kind, "step": self.step, "node": self.node}
        if self.task_id != self.node:
            body["task"] = self.task_id
        body["state"] = self.state
        return body

    @classmethod
    def from_json(cls, schema: StateSchema, body: Mapping[str, Any]) -> BreakerChanged:
        node = body["node"]
        return cls(body["step"], node, body.get("task") or node, body["state"])

    def advance(self, schema: StateSchema, pos: Position) -> None:
        return None

    def event_data(self) -> dict[str, Any]:
        """Return the ``"debug"`` stream event's data: the stored form."""
        return self.to_json(_NO_SCHEMA)
