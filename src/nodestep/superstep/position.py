"""Where a thread stands: the state values and the superstep that is planned or unfinished."""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any, Literal

from nodestep.state.channels import FieldWrite

__all__ = [
    "Failure",
    "PlannedTask",
    "Position",
    "Route",
    "SendRoute",
    "Status",
    "TaskResult",
]

Status = Literal["idle", "running", "paused", "failed", "blocked"]
"""``idle``: no superstep pending (a new or completed thread). ``running``: a superstep is
planned or unfinished. ``paused``: tasks of the pending superstep wait for answers.
``failed``: the last run failed in the pending superstep; a continuation runs its
unfinished tasks. ``blocked``: the pending superstep's writes cannot be merged; it cannot
continue."""


@dataclass(slots=True, frozen=True)
class Failure:
    """Why the last run failed in the pending superstep.

    ``node`` and ``task_id`` name the failing task; both are ``None`` when the superstep
    itself failed (its writes conflict, a limit or a timeout stopped it).
    """

    step: int
    error: str
    message: str
    node: str | None = None
    task_id: str | None = None


@dataclass(slots=True, frozen=True)
class SendRoute:
    """A route to ``node`` as a task of its own, with ``payload`` laid over its state."""

    node: str
    payload: dict[str, Any]
    payload_json: dict[str, Any] | None = None


Route = str | SendRoute
"""A resolved route: a node name (trigger the node), or a ``SendRoute``."""


@dataclass(slots=True)
class PlannedTask:
    """A task of a superstep: which node runs, its id, and its ``Send`` payload if any."""

    node: str
    task_id: str
    payload: dict[str, Any] | None = None
    payload_json: dict[str, Any] | None = None


@dataclass(slots=True)
class TaskResult:
    """A finished task: its validated writes and its own choice of routes.

    ``goto`` is ``None`` when the task follows its node's edges; otherwise the routes it chose
    with ``Command(goto=...)``, ``Send`` or ``END`` (``[]``: nowhere). ``update_json`` and
    ``replaced`` are the stored form of ``writes``, set when the run has a store.
    ``failed`` is ``(error type, message)`` when the node failed and an error route took
    the failure: the task then has no writes and ``goto`` holds that route.
    """

    node: str
    task_id: str
    writes: list[FieldWrite]
    goto: list[Route] | None = None
    update_json: dict[str, Any] | None = None
    replaced: list[str] | None = None
    failed: tuple[str, str] | None = None


@dataclass(slots=True)
class Position:
    """A thread's position after its last event.

    ``superstep.machine`` is the only code that moves a position on; the live run and the
    replay of stored records both go through it.

    Attributes:
        values: The state, field by field.
        status: See ``Status``.
        step: The superstep that is pending (or, when idle, the last one run).
        tasks: The tasks of the pending superstep, in scheduling order.
        done: Tasks of the pending superstep that finished, by task id.
        interrupts: Pending interrupts of paused tasks (their JSON form), by key
            ``"<task_id>:<id>"``.
        answers: Answers given to interrupts of the pending superstep, by key.
        caches: ``ctx.cache`` of each paused task, by task id.
        seq: Sequence number of the last event applied (0: none).
        event_id: Id of the last event applied.
        since_checkpoint: Events stored since the last checkpoint.
        run_id: The run that wrote the last event.
        failure: Why the last run failed in the pending superstep (status ``failed`` or
            ``blocked``), else ``None``.
    """

    values: dict[str, Any]
    status: Status = "idle"
    step: int = 0
    tasks: list[PlannedTask] = field(default_factory=list)
    done: dict[str, TaskResult] = field(default_factory=dict)
    interrupts: dict[str, dict[str, Any]] = field(default_factory=dict)
    answers: dict[str, Any] = field(default_factory=dict)
    caches: dict[str, dict[str, Any]] = field(default_factory=dict)
    seq: int = 0
    event_id: str | None = None
    since_checkpoint: int = 0
    run_id: str | None = None
    failure: Failure | None = None

    def pending_tasks(self) -> list[PlannedTask]:
        """Return the planned tasks that have not finished, in scheduling order."""
        done = self.done
        return [t for t in self.tasks if t.task_id not in done]
