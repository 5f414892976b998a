"""The public view of a thread's history: events, checkpoints and snapshots."""

from __future__ import annotations

from collections.abc import Iterator
from dataclasses import dataclass, field
from typing import Any, Generic, NamedTuple, TypeVar

from nodestep.store.base import Record

__all__ = ["History", "HistoryEvent", "StateSnapshot"]

S = TypeVar("S")

_ENVELOPE = ("id", "seq", "ts", "thread", "branch", "type")


@dataclass(frozen=True, slots=True)
class HistoryEvent:
    """One recorded event of a thread branch.

    Attributes:
        id: A uuid4, unique in the store; pass it as ``at=`` or ``from_=``.
        type: What happened: ``run_started``, ``task_finished``, ``superstep_completed``,
            ``run_paused``, ``run_failed``, ``run_stopped``, ``run_completed``,
            ``state_updated`` or ``checkpoint``.
        sequence: The event's number in its branch, from 1, with no gaps.
        timestamp: When it was written (``time.time()``).
        thread_id: The thread.
        branch_id: The branch.
        data: The type-specific fields, as stored (JSON data); see the history docs.
    """

    id: str
    type: str
    sequence: int
    timestamp: float
    thread_id: str
    branch_id: str
    data: dict[str, Any] = field(default_factory=dict)

    @classmethod
    def from_record(cls, record: Record) -> HistoryEvent:
        """Build the event from a stored record."""
        return cls(
            id=record["id"],
            type=record["type"],
            sequence=record["seq"],
            timestamp=record["ts"],
            thread_id=record["thread"],
            branch_id=record["branch"],
            data={k: v for k, v in record.items() if k not in _ENVELOPE},
        )


@dataclass(frozen=True, slots=True)
class History:
    """Every recorded event of a thread branch, oldest first.

    Attributes:
        thread_id: The thread.
        branch_id: The branch.
        events: All events, checkpoints included.
    """

    thread_id: str
    branch_id: str
    events: list[HistoryEvent] = field(default_factory=list)

    @property
    def checkpoints(self) -> list[HistoryEvent]:
        """The checkpoint events, oldest first."""
        return [e for e in self.events if e.type == "checkpoint"]

    def __iter__(self) -> Iterator[HistoryEvent]:
        return iter(self.events)

    def __len__(self) -> int:
        return len(self.events)


class StateSnapshot(NamedTuple, Generic[S]):
    """A thread's state at one event: an immutable named tuple.

    Attributes:
        value: The state as the declared type.
        sequence: The event's sequence number.
        event_id: The event's id.
        thread_id: The thread.
        branch_id: The branch.
        status: ``"idle"`` (no superstep pending), ``"running"`` (a superstep is planned or
            unfinished), ``"paused"`` (waiting for answers) or ``"blocked"`` (its writes
            cannot be merged).
        next: The task ids of the pending superstep, in scheduling order.
        interrupts: The pending ``Interrupt``s, by key.
    """

    value: S
    sequence: int
    event_id: str | None
    thread_id: str
    branch_id: str
    status: str
    next: tuple[str, ...]
    interrupts: dict[str, Any]
