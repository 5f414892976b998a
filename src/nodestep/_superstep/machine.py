"""How a thread's position moves on: one function for each thing that can happen to it.

A turn starts (new input), continues, or is resumed with answers; a task finishes; a
superstep completes, pauses or fails; a run completes; ``update_state`` edits the values;
a record is stored. The live run and the replay of stored history move positions only
through these functions (the live run by applying each record it stores, see
``_superstep.records``), so the position a load folds from the store is, by construction,
the position the run had.

Each function changes the position in place. None does I/O, reads a clock or makes an id.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping, Sequence
from typing import Any

from nodestep._state.channels import Channel, FieldWrite
from nodestep._superstep import barriers
from nodestep._superstep.merge import apply_writes
from nodestep._superstep.plan import plan_tasks
from nodestep._superstep.position import Failure, PlannedTask, Position, Route, TaskResult

__all__ = [
    "child_event",
    "complete_run",
    "complete_superstep",
    "continue_turn",
    "edit",
    "fail",
    "finish_task",
    "hand_over",
    "new_thread",
    "pause",
    "resume",
    "start_turn",
    "stored",
]


def new_thread(values: dict[str, Any]) -> Position:
    """Return the position of a thread that has not run: ``values``, nothing pending."""
    return Position(values=values)


def _clear_superstep(pos: Position) -> None:
    # What belongs to one pending superstep; a new superstep starts without any of it.
    # (New dicts, not cleared ones: a record or a cached position may hold the old.)
    if pos.done:
        pos.done = {}
    if pos.interrupts:
        pos.interrupts = {}
    if pos.answers:
        pos.answers = {}
    if pos.caches:
        pos.caches = {}
    if pos.failure is not None:
        pos.failure = None
    if pos.children:
        pos.children = {}


def start_turn(
    pos: Position,
    channels: Mapping[str, Channel],
    writes: Iterable[FieldWrite],
    tasks: Sequence[PlannedTask],
    run_id: str,
) -> None:
    """New input: merge it into the values and plan superstep 0 with ``tasks``.

    An unfinished superstep of an earlier turn is dropped (its finished tasks stay in the
    history, not in the position), and with it that turn's join barriers and held routes.
    """
    pos.values = apply_writes(channels, pos.values, writes)
    pos.tasks = list(tasks)
    if pos.joins:  # barriers count arrivals in one turn
        pos.joins = {}
    if pos.deferred:
        pos.deferred = []
    pos.step = 0
    pos.turn += 1
    pos.status = "running"
    _clear_superstep(pos)
    pos.run_id = run_id


def continue_turn(pos: Position, run_id: str) -> None:
    """A call without input continues the pending superstep as it stands.

    After a failure the superstep runs again: it is no longer failed.
    """
    pos.run_id = run_id
    if pos.failure is not None:
        pos.failure = None
    if pos.status == "failed":
        pos.status = "running"


def resume(pos: Position, answers: Mapping[str, Any], run_id: str) -> None:
    """Answers to pending interrupts: the paused superstep may run again."""
    pos.answers = {**pos.answers, **answers}
    pos.status = "running"
    pos.run_id = run_id


def finish_task(pos: Position, result: TaskResult) -> None:
    """A task of a superstep with several tasks finished; a continuation will not rerun it."""
    pos.done[result.task_id] = result
    if result.task_id in pos.children:  # its subgraph run is over with it
        pos.children = {k: v for k, v in pos.children.items() if k != result.task_id}


def child_event(pos: Position, task_id: str, body: dict[str, Any]) -> None:
    """The subgraph run of task ``task_id`` stored the record ``body`` (its JSON form).

    A child's checkpoint starts its records again, so they never grow past one checkpoint
    interval. (A new dict and list: a cached position or a checkpoint may hold the old.)
    """
    kept = [] if body.get("type") == "checkpoint" else pos.children.get(task_id, [])
    pos.children = {**pos.children, task_id: [*kept, body]}


def complete_superstep(
    pos: Position,
    step: int,
    values: dict[str, Any],
    routes: Sequence[Sequence[Route]],
    private: Mapping[str, dict[str, Any]] | None = None,
) -> None:
    """Superstep ``step`` completed: ``values`` is its merged state, ``routes`` each task's.

    ``private`` holds the private states its tasks changed, by node; they replace the
    nodes' entries. The next superstep is planned from the routes; with no task planned
    the turn is over.
    """
    if private:
        pos.node_states = {**pos.node_states, **private}
    pos.values = values
    if (
        len(routes) == 1
        and len(routes[0]) == 1
        and type(routes[0][0]) is str
        and not (pos.joins or pos.deferred)
    ):
        pos.tasks = [_lone_task(routes[0][0])]  # the common case: one task, one node
    else:
        pos.tasks = _plan(pos, routes)
    pos.step = step + 1
    pos.status = "running" if pos.tasks else "idle"
    _clear_superstep(pos)


_LONE_TASKS: dict[str, PlannedTask] = {}
"""The task of a node planned alone, by node name: shared, since nothing changes a planned
task, so the common superstep makes no new one. Emptied when it grows past 1,024 names."""


def _lone_task(name: str) -> PlannedTask:
    """Return the task of node ``name`` planned alone (its id is the node's name)."""
    task = _LONE_TASKS.get(name)
    if task is None:
        if len(_LONE_TASKS) >= 1024:
            _LONE_TASKS.clear()
        task = _LONE_TASKS[name] = PlannedTask(name, name)
    return task


def _plan(pos: Position, routes: Sequence[Sequence[Route]]) -> list[PlannedTask]:
    """Return the next superstep's tasks from each task's ``routes``, through the turn's
    join barriers and held routes when there are any."""
    if pos.joins or pos.deferred or barriers.holds(routes):
        return barriers.plan_held(pos, routes)
    return plan_tasks(barriers.as_plain(routes))


def pause(
    pos: Position, interrupts: Mapping[str, dict[str, Any]], caches: Mapping[str, Any]
) -> None:
    """Tasks of the pending superstep wait for answers to ``interrupts`` (by key)."""
    pos.status = "paused"
    pos.interrupts = dict(interrupts)
    pos.caches = dict(caches)


def fail(pos: Position, mergeable: bool, failure: Failure) -> None:
    """The run failed in the pending superstep, as ``failure`` tells.

    It can be continued unless its writes cannot be merged (``mergeable`` false), which
    blocks the superstep for good.
    """
    pos.status = "failed" if mergeable else "blocked"
    pos.failure = failure


def complete_run(pos: Position) -> None:
    """The run ended with no superstep pending."""
    pos.status = "idle"


def edit(pos: Position, channels: Mapping[str, Channel], writes: Iterable[FieldWrite]) -> None:
    """``update_state`` merged ``writes`` into the values, as one writer."""
    pos.values = apply_writes(channels, pos.values, writes)


def hand_over(pos: Position, routes: Sequence[Route]) -> None:
    """``update_state(as_node=...)`` on a thread with no pending superstep: the node's
    ``routes`` plan the next superstep, as if the node had run (with none, it stays idle)."""
    # An idle position's ``step`` is already the next superstep's number.
    pos.tasks = _plan(pos, [routes])
    if pos.tasks:
        pos.status = "running"
    _clear_superstep(pos)


def stored(pos: Position, seq: int, event_id: str, *, checkpoint: bool) -> None:
    """The record that moved ``pos`` last is stored as ``seq`` with id ``event_id``."""
    pos.seq = seq
    pos.event_id = event_id
    pos.since_checkpoint = 0 if checkpoint else pos.since_checkpoint + 1
