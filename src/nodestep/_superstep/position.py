"""Where a thread stands: the state values and the superstep that is planned or unfinished."""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any, Literal

from nodestep._state.channels import FieldWrite

__all__ = [
    "DeferredRoute",
    "Failure",
    "JoinRoute",
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
    """A route to ``node`` as a task of its own, with ``payload`` laid over its state.

    ``input``, when the node declares an input model, is the task's input instead: the
    model's fields as data (their JSON form in a run with a store), validated again when
    the task runs, so a live run and a replay hand the node the same input.
    """

    node: str
    payload: dict[str, Any]
    payload_json: dict[str, Any] | None = None
    input: dict[str, Any] | None = None


@dataclass(slots=True, frozen=True)
class JoinRoute:
    """``source`` ran and arrived at the join of ``node``, which waits on ``sources``.

    The route carries the whole join, so the stored history says what the barrier waits
    on without the flow: ``node`` is planned once every source has arrived (see
    ``_superstep.barriers``). ``defer``: ``node`` is a deferred node.
    """

    node: str
    source: str
    sources: tuple[str, ...]
    defer: bool = False


@dataclass(slots=True, frozen=True)
class DeferredRoute:
    """A route to a deferred node, held until nothing else is left to run in the turn."""

    route: str | SendRoute


Route = str | SendRoute | JoinRoute | DeferredRoute
"""A resolved route: a node name (trigger the node), a ``SendRoute``, an arrival at a join,
or a route held back for a deferred node."""


@dataclass(slots=True)
class PlannedTask:
    """A task of a superstep: which node runs, its id, and its ``Send`` payload if any."""

    node: str
    task_id: str
    payload: dict[str, Any] | None = None
    payload_json: dict[str, Any] | None = None
    input: dict[str, Any] | None = None


@dataclass(slots=True)
class TaskResult:
    """A finished task: its validated writes and its own choice of routes.

    ``goto`` is ``None`` when the task follows its node's edges; otherwise the routes it chose
    with ``Command(goto=...)``, ``Send`` or ``END`` (``[]``: nowhere). ``update_json`` and
    ``replaced`` are the stored form of ``writes``, set when the run has a store.
    ``private`` is the node's private state after the task, in its JSON form, when the
    task changed it (else ``None``). ``cached`` marks a result the node's cache gave, and
    ``edited`` one ``update_state(as_node=...)`` gave; the node did not run for either.
    ``failed`` is ``(error type, message)`` when the node failed and an error route took
    the failure: the task then has no writes and ``goto`` holds that route.
    """

    node: str
    task_id: str
    writes: list[FieldWrite]
    goto: list[Route] | None = None
    update_json: dict[str, Any] | None = None
    replaced: list[str] | None = None
    private: dict[str, Any] | None = None
    cached: bool = False
    edited: bool = False
    failed: tuple[str, str] | None = None


@dataclass(slots=True)
class Position:
    """A thread's position after its last event.

    ``_superstep.machine`` is the only code that moves a position on; the live run and the
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
        joins: The progress of each join barrier of the turn: the sources that arrived,
            sorted, by the joined node. Empty when the turn is over.
        deferred: Routes to deferred nodes, held until nothing else is left in the turn.
        node_states: Each node's private state (its JSON form), by node name; only nodes
            that declare ``private_state`` and changed it have one. It is kept across
            turns, and a completed superstep replaces the entries its tasks changed.
        children: The stored records (JSON bodies) of the subgraph runs of unfinished
            tasks of the pending superstep, by task id, from the child's last checkpoint on
            (see ``_superstep.nested``).
        turn: How many turns the branch has started (a new input starts one), so a
            superstep is named by ``(turn, step)`` across the branch's turns; sub-agents
            name their threads by it (``_engine.subagents``).
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
    joins: dict[str, list[str]] = field(default_factory=dict)
    deferred: list[str | SendRoute] = field(default_factory=list)
    node_states: dict[str, dict[str, Any]] = field(default_factory=dict)
    children: dict[str, list[dict[str, Any]]] = field(default_factory=dict)
    turn: int = 0

    def pending_tasks(self) -> list[PlannedTask]:
        """Return the planned tasks that have not finished, in scheduling order."""
        done = self.done
        return [t for t in self.tasks if t.task_id not in done]

    def open_interrupts(self) -> dict[str, dict[str, Any]]:
        """Return the interrupts that ``resume=`` may answer (their JSON form), by key.

        A paused superstep waits for all of them. Once a resume stored its answers they
        are answered: the superstep runs (or a continuation runs it) with them, and they
        are open again only if it failed on them, so new answers can replace an answer its
        node could not take. An interrupt of a task that finished since (a sibling of the
        failed task, or one ``update_state(as_node=...)`` stood in for) is closed: no answer
        reaches it. A snapshot shows these, so it never offers an interrupt that
        ``resume=`` then refuses, or asks for an answer that nothing reads.
        """
        if not self.interrupts or self.status not in ("paused", "failed"):
            return {}
        found = self.interrupts
        if self.done:
            waiting = [t.task_id for t in self.pending_tasks()]
            found = {k: i for k, i in found.items() if _of_waiting(str(i.get("task")), waiting)}
        if self.status == "failed" and not found.keys() <= self.answers.keys():
            return {}
        return found


def _of_waiting(task: str, waiting: list[str]) -> bool:
    """Tell whether an interrupt's ``task`` is one of the ``waiting`` tasks, or under one.

    A subgraph's interrupt names the path down to the child's task
    (``"review/legal/sign"``), and a tool call's the call under the tool node's task; the
    first step is the task here. It is matched whole, not cut at a ``/``: a node name may
    hold one.
    """
    return any(task == w or task.startswith(w + "/") for w in waiting)
