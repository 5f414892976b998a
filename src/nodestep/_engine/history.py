"""The public view of a thread's history: events, checkpoints and snapshots."""

from __future__ import annotations

from collections.abc import Iterator
from dataclasses import dataclass, field
from typing import Any, Generic, NamedTuple, TypeVar, overload

from nodestep._display.text import fields_repr, plural, short_repr
from nodestep._engine.views import PAGE_SIZE, events_html, history_html, snapshot_html
from nodestep._errors import GraphConfigError
from nodestep.store import Record

__all__ = [
    "History",
    "HistoryEvent",
    "HistoryPage",
    "HistoryStep",
    "StateHistory",
    "StateSnapshot",
    "event_nodes",
]

S = TypeVar("S")

_ENVELOPE = ("id", "seq", "ts", "thread", "branch", "type")


@dataclass(frozen=True, slots=True)
class HistoryEvent:
    """One recorded event of a thread branch.

    Attributes:
        id: A uuid4, unique in the store; pass it as ``at=`` or ``from_=``.
        type: What happened: ``run_started``, ``task_finished``, ``superstep_completed``,
            ``run_paused``, ``run_failed``, ``run_stopped``, ``run_completed``,
            ``state_updated``, ``checkpoint``, or ``subgraph``: an event of a subgraph
            run, see ``path`` and ``record``.
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

    def __repr__(self) -> str:
        return fields_repr(self, ("type", "sequence", "id", "branch_id", "data"))

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

    @property
    def path(self) -> str | None:
        """For a ``subgraph`` event, the tasks down to the subgraph run that recorded it,
        e.g. ``"review/legal"``; ``None`` for an event of the thread's own graph."""
        if self.type != "subgraph":
            return None
        return "/".join(_unwrap(self.data)[0])

    @property
    def record(self) -> dict[str, Any]:
        """The event's own fields: for a ``subgraph`` event, the subgraph run's record
        (``type`` first, with its ``id`` and ``seq`` within that run); else ``data``."""
        return _unwrap(self.data)[1] if self.type == "subgraph" else self.data


def event_nodes(event: HistoryEvent) -> list[str]:
    """Return the nodes an event records: a superstep's tasks, a paused or failed node..."""
    data = event.data
    if event.type == "superstep_completed":
        tasks = data.get("tasks", {})
        return [str(entry.get("node") or task) for task, entry in tasks.items()]
    if event.type == "run_paused":
        return list(dict.fromkeys(str(i["node"]) for i in data.get("interrupts", ())))
    node = data.get("node")
    return [node] if isinstance(node, str) else []


def _unwrap(data: dict[str, Any]) -> tuple[list[str], dict[str, Any]]:
    """Return the task path of a ``subgraph`` event's data and the innermost record."""
    path = [str(data["task"])]
    record: dict[str, Any] = data["record"]
    while record.get("type") == "subgraph":
        path.append(str(record["task"]))
        record = record["record"]
    return path, record


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

    def __repr__(self) -> str:
        return (
            f"History(thread_id={self.thread_id!r}, branch_id={self.branch_id!r}, "
            f"{plural(len(self.events), 'event')})"
        )

    def _repr_html_(self) -> str:
        return events_html(self, event_nodes)


class StateSnapshot(NamedTuple, Generic[S]):
    """A thread's state at one event: an immutable named tuple.

    Attributes:
        value: The state as the declared type.
        sequence: The event's sequence number.
        event_id: The event's id.
        thread_id: The thread.
        branch_id: The branch.
        status: ``"idle"`` (no superstep pending), ``"running"`` (a superstep is planned or
            unfinished), ``"paused"`` (waiting for answers), ``"failed"`` (the last run
            failed in the pending superstep; ``invoke(None)`` continues it) or
            ``"blocked"`` (it failed and its writes cannot be merged).
        next: The task ids of the pending superstep that are still to run, in
            scheduling order; tasks that finished in it are left out.
        interrupts: The pending ``Interrupt``s, by key.
        error_type: With ``"failed"`` or ``"blocked"``: the class name of the error,
            e.g. ``"ConnectionError"``; else ``None``.
        error_message: With ``"failed"`` or ``"blocked"``: the error's message.
        failed_node: The node whose task raised, or ``None`` when the superstep itself
            failed (conflicting writes, ``max_steps``, a timeout) or nothing failed.
    """

    value: S
    sequence: int
    event_id: str | None
    thread_id: str
    branch_id: str
    status: str
    next: tuple[str, ...]
    interrupts: dict[str, Any]
    error_type: str | None = None
    error_message: str | None = None
    failed_node: str | None = None

    def __repr__(self) -> str:
        names = ["status", "sequence", "thread_id", "branch_id", "next", "value"]
        names += ["interrupts"] if self.interrupts else []
        names += ["error_type", "failed_node"] if self.error_type else []
        return fields_repr(self, names)

    def _repr_html_(self) -> str:
        return snapshot_html(self)


class HistoryStep(NamedTuple, Generic[S]):
    """One event of a branch with the thread's state right after it.

    Attributes:
        event: The event; pass its ``id`` as ``at=`` or ``from_=``.
        snapshot: The ``StateSnapshot`` after the event: state, status, ``next``.
        nodes: The nodes the event records: the tasks of a completed superstep (in
            scheduling order), the task of a ``task_finished``, the failing node of a
            ``run_failed``, the paused nodes of a ``run_paused``, the node of a
            ``task_retried`` or ``breaker_changed``, or ``state_updated`` made with
            ``as_node=``; ``()`` for the others.
    """

    event: HistoryEvent
    snapshot: StateSnapshot[S]
    nodes: tuple[str, ...]

    def __repr__(self) -> str:
        event, snapshot = self.event, self.snapshot
        return (
            f"HistoryStep(#{event.sequence} {event.type}, nodes={self.nodes!r}, "
            f"status={snapshot.status!r}, value={short_repr(snapshot.value, 80)})"
        )


@dataclass(frozen=True, slots=True)
class StateHistory(Generic[S]):
    """A branch's events in order, each with the state after it; ``state_history`` returns it.

    It is a sequence of ``HistoryStep``: iterate it, index it, take its ``len``. The
    branch's first checkpoint is the first step (the defaults, or where a fork starts);
    later checkpoints repeat the state before them and are left out.

    Attributes:
        thread_id: The thread.
        branch_id: The branch.
        steps: The steps, oldest first.
    """

    thread_id: str
    branch_id: str
    steps: tuple[HistoryStep[S], ...] = ()

    def __iter__(self) -> Iterator[HistoryStep[S]]:
        return iter(self.steps)

    def __len__(self) -> int:
        return len(self.steps)

    @overload
    def __getitem__(self, index: int) -> HistoryStep[S]: ...

    @overload
    def __getitem__(self, index: slice) -> tuple[HistoryStep[S], ...]: ...

    def __getitem__(self, index: int | slice) -> HistoryStep[S] | tuple[HistoryStep[S], ...]:
        return self.steps[index]

    def __repr__(self) -> str:
        return (
            f"StateHistory(thread_id={self.thread_id!r}, branch_id={self.branch_id!r}, "
            f"{plural(len(self.steps), 'step')})"
        )

    def _repr_html_(self) -> str:
        return history_html(self)

    def page(self, number: int = 1, size: int = PAGE_SIZE) -> HistoryPage[S]:
        """Return page ``number`` (from 1) of ``size`` steps, which a notebook shows as a table.

        A notebook shows a ``StateHistory`` as its first page; ``history.page(2)`` shows
        the next, ``history.page(1, size=100)`` more at a time.

        Raises:
            GraphConfigError: ``number`` or ``size`` is not a positive integer.
        """
        for name, value in (("number", number), ("size", size)):
            if isinstance(value, bool) or not isinstance(value, int) or value < 1:
                raise GraphConfigError(
                    f"StateHistory.page() takes a whole number from 1 as {name}, got {value!r}"
                )
        return HistoryPage(self, number, size)

    def last_pause(self) -> HistoryStep[S] | None:
        """Return the last ``run_paused`` step, or ``None`` if the branch never paused.

        A fork there waits for the same answers, so it can be answered differently. A
        branch forked at a pause starts paused, with no ``run_paused`` of its own: its
        opening checkpoint is that step, until a pause of its own follows.
        """
        paused = [
            step
            for step in self.steps
            if step.event.type == "run_paused"
            or (step.event.type == "checkpoint" and step.snapshot.status == "paused")
        ]
        return paused[-1] if paused else None

    def before(self, node: str) -> HistoryStep[S] | None:
        """Return the last step before ``node`` last finished, or ``None`` if it never did.

        At that step the node's task is still to run (in ``snapshot.next``), and the next
        event records it finishing; so a fork there followed by ``invoke(None,
        branch_id=...)`` runs the node again, and what follows it.
        """
        steps = self.steps
        for index in range(len(steps) - 2, -1, -1):
            after = steps[index + 1]
            if (
                node in after.nodes
                and after.event.type in _FINISHING
                and _waits(steps[index].snapshot, node)
            ):
                return steps[index]
        return None


@dataclass(frozen=True, slots=True)
class HistoryPage(Generic[S]):
    """One page of a ``StateHistory``, as ``StateHistory.page`` returns it.

    Attributes:
        history: The whole history.
        number: The page, from 1.
        size: Steps a page.
    """

    history: StateHistory[S]
    number: int
    size: int

    @property
    def steps(self) -> tuple[HistoryStep[S], ...]:
        """The page's steps (none past the last page)."""
        first = (self.number - 1) * self.size
        return self.history.steps[first : first + self.size]

    def __iter__(self) -> Iterator[HistoryStep[S]]:
        return iter(self.steps)

    def __len__(self) -> int:
        return len(self.steps)

    def __repr__(self) -> str:
        return (
            f"HistoryPage(thread_id={self.history.thread_id!r}, page {self.number} of "
            f"{-(-len(self.history) // self.size)}, {plural(len(self), 'step')})"
        )

    def _repr_html_(self) -> str:
        return history_html(self.history, self.number, self.size)


_FINISHING = frozenset({"superstep_completed", "task_finished"})


def _waits(snapshot: StateSnapshot[Any], node: str) -> bool:
    """Tell whether a task of ``node`` is still to run; a Send task's id is ``node[i]``."""
    prefix = node + "["
    return any(t == node or t.startswith(prefix) for t in snapshot.next)
