"""History records: every kind of event a thread's history holds, typed, with its JSON form.

Each kind is a class that knows its stored form (``to_json``, ``from_json``) and how
it moves a position on (``advance``, through ``_superstep.machine``). The engine builds
records only from these classes and moves the live position by advancing it with the
records it stores; a load decodes the stored records and advances a position with them
(``_superstep.replay``). One code path for both is what makes a loaded position equal the
live one.

The stored forms are listed in ``docs/history.md``. A record's JSON holds its kind's keys,
``"type"`` first; a store adds the envelope (``id``, ``seq``, ``ts``, ``thread``,
``branch``). Format version 2 gives each kind one shape; the version 1 shapes of
``superstep_completed`` are read by ``codec.upgrade_v1_superstep``.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any, ClassVar

from nodestep._state.channels import FieldWrite
from nodestep._state.schema import StateSchema
from nodestep._superstep import machine
from nodestep._superstep.codec import (
    extras_from_json,
    extras_to_json,
    failure_from_json,
    failure_to_json,
    result_from_json,
    result_marks,
    result_to_json,
    route_from_json,
    route_to_json,
    tasks_from_json,
    tasks_to_json,
    upgrade_v1_superstep,
)
from nodestep._superstep.merge import merge_results
from nodestep._superstep.position import Failure, PlannedTask, Position, Route, TaskResult
from nodestep._superstep.private import private_changes

__all__ = [
    "Checkpoint",
    "HistoryRecord",
    "RunCompleted",
    "RunFailed",
    "RunPaused",
    "RunStarted",
    "RunStopped",
    "StateUpdated",
    "SuperstepCompleted",
    "TaskFinished",
]

Body = dict[str, Any]


class HistoryRecord:
    """One kind of history event.

    Records are values: nothing changes one after it is made. Their classes are not frozen
    dataclasses only because a frozen one costs twice as much to make, and the run loop
    makes one per superstep.
    """

    __slots__ = ()
    kind: ClassVar[str]

    def to_json(self, schema: StateSchema) -> Body:
        """Return the record's type-specific keys, ``"type"`` first.

        Raises:
            StateStoreError: a value in it has no JSON form.
        """
        raise NotImplementedError

    @classmethod
    def from_json(cls, schema: StateSchema, body: Mapping[str, Any]) -> HistoryRecord:
        """Read a record written by ``to_json`` (a ``KeyError`` if a key is missing)."""
        raise NotImplementedError

    def advance(self, schema: StateSchema, pos: Position) -> None:
        """Move ``pos`` on to where the thread stands after this record."""
        raise NotImplementedError


@dataclass(slots=True)
class Checkpoint(HistoryRecord):
    """The whole position, so a load starts here instead of at the thread's first record.

    ``checked=False`` writes values without checking their JSON round trip, for positions
    whose values were all checked when they were stored. ``written=True`` says the values
    were made by the records stored before: then a frozen value (such as a conversation) is
    not checked again, because each of its items was checked when its write was stored and
    it never changes; other values still are, since a reducer may have made them.
    ``values``, when given, are the values written instead of the position's (some of
    them: a cache keeps the others as objects, ``_engine.positions``).
    """

    kind: ClassVar[str] = "checkpoint"
    position: Position
    checked: bool = True
    written: bool = False
    values: dict[str, Any] | None = None

    def to_json(self, schema: StateSchema) -> Body:
        pos = self.position
        given = pos.values if self.values is None else self.values
        if self.checked:
            values = schema.values_to_json(given, frozen_checked=self.written)
        else:
            values = schema.values_dumped(given)
        body: Body = {"type": self.kind, "values": values, "status": pos.status, "step": pos.step}
        if pos.tasks:
            body["tasks"] = tasks_to_json(pos.tasks)
        if pos.done:
            body["done"] = {tid: result_to_json(r) for tid, r in pos.done.items()}
        for key in ("interrupts", "answers", "caches"):  # stored only when not empty
            if getattr(pos, key):
                body[key] = getattr(pos, key)
        if pos.failure is not None:
            body["failure"] = failure_to_json(pos.failure)
        body.update(extras_to_json(pos))
        return body

    @classmethod
    def from_json(
        cls, schema: StateSchema, body: Mapping[str, Any], given: Mapping[str, Any] | None = None
    ) -> Checkpoint:
        """Read a checkpoint; ``given`` holds the values of fields its JSON leaves out, as
        they are (see ``StateSchema.values_from_json``)."""
        done = body.get("done", {})
        return cls(
            Position(
                values=schema.values_from_json(body["values"], given),
                status=body["status"],
                step=body["step"],
                tasks=tasks_from_json(schema, body.get("tasks", ())),
                done={tid: result_from_json(schema, tid, r) for tid, r in done.items()},
                interrupts=dict(body.get("interrupts", {})),
                answers=dict(body.get("answers", {})),
                caches=dict(body.get("caches", {})),
                failure=failure_from_json(body["failure"]) if "failure" in body else None,
                **extras_from_json(schema, body),
            )
        )

    def advance(self, schema: StateSchema, pos: Position) -> None:
        raise TypeError("A checkpoint starts a position; replay() takes it as the position.")


@dataclass(slots=True)
class RunStarted(HistoryRecord):
    """A call began: with ``input`` (a new turn that plans ``tasks``), with ``answers`` to
    a paused superstep, or with neither (it continues the pending superstep)."""

    kind: ClassVar[str] = "run_started"
    run_id: str
    input: list[FieldWrite] | None = None
    tasks: list[PlannedTask] = field(default_factory=list)
    answers: dict[str, Any] | None = None

    def to_json(self, schema: StateSchema) -> Body:
        body: Body = {"type": self.kind, "run": self.run_id}
        if self.input is not None:
            data, replaced = schema.writes_to_json(self.input)
            body["input"] = data
            if replaced:
                body["replaced"] = replaced
            body["tasks"] = tasks_to_json(self.tasks)
        if self.answers:
            body["answers"] = self.answers
        return body

    @classmethod
    def from_json(cls, schema: StateSchema, body: Mapping[str, Any]) -> RunStarted:
        raw = body.get("input")
        if raw is None:
            return cls(body["run"], answers=body.get("answers") or None)
        writes = schema.writes_from_json(raw, body.get("replaced"))
        return cls(body["run"], writes, tasks_from_json(schema, body["tasks"]))

    def advance(self, schema: StateSchema, pos: Position) -> None:
        if self.input is not None:
            machine.start_turn(pos, schema.channels, self.input, self.tasks, self.run_id)
        elif self.answers:
            machine.resume(pos, self.answers, self.run_id)
        else:
            machine.continue_turn(pos, self.run_id)


@dataclass(slots=True)
class TaskFinished(HistoryRecord):
    """A task of a superstep with several tasks finished, with its update and routes."""

    kind: ClassVar[str] = "task_finished"
    step: int
    result: TaskResult

    def to_json(self, schema: StateSchema) -> Body:
        result = self.result
        body: Body = {"type": self.kind, "step": self.step, "node": result.node}
        if result.task_id != result.node:
            body["task"] = result.task_id
        body["update"] = result.update_json or {}
        if result.replaced:
            body["replaced"] = result.replaced
        if result.goto is not None:
            body["goto"] = [route_to_json(r) for r in result.goto]
        body.update(result_marks(result))
        return body

    @classmethod
    def from_json(cls, schema: StateSchema, body: Mapping[str, Any]) -> TaskFinished:
        task_id = str(body.get("task") or body["node"])
        return cls(body["step"], result_from_json(schema, task_id, body))

    def advance(self, schema: StateSchema, pos: Position) -> None:
        machine.finish_task(pos, self.result)


@dataclass(slots=True)
class SuperstepCompleted(HistoryRecord):
    """A superstep's writes merged and its routes resolved; the next superstep is planned.

    Attributes:
        step: The superstep.
        routes: Each task's resolved routes, by task id.
        results: The results of tasks that no ``task_finished`` recorded (a superstep of
            one task stores its result here, in one record).
        merged: The live run's merge of the results, when it has one; not stored. Replay
            merges the results again, which gives the same values.
    """

    kind: ClassVar[str] = "superstep_completed"
    step: int
    routes: dict[str, list[Route]]
    results: dict[str, TaskResult] = field(default_factory=dict)
    merged: dict[str, Any] | None = field(default=None, compare=False)

    def to_json(self, schema: StateSchema) -> Body:
        tasks: Body = {}
        for task_id, routes in self.routes.items():
            result = self.results.get(task_id)
            entry = {} if result is None else result_to_json(result, goto=False)
            entry["routes"] = [route_to_json(r) for r in routes]
            tasks[task_id] = entry
        return {"type": self.kind, "step": self.step, "tasks": tasks}

    @classmethod
    def from_json(cls, schema: StateSchema, body: Mapping[str, Any]) -> SuperstepCompleted:
        if "tasks" not in body:
            body = upgrade_v1_superstep(body)
        routes: dict[str, list[Route]] = {}
        results: dict[str, TaskResult] = {}
        for task_id, entry in body["tasks"].items():
            routes[task_id] = [route_from_json(schema, r) for r in entry["routes"]]
            if "update" in entry:
                results[task_id] = result_from_json(schema, task_id, entry)
        return cls(body["step"], routes, results)

    def advance(self, schema: StateSchema, pos: Position) -> None:
        values, inline, tasks = self.merged, self.results, pos.tasks
        if values is None:
            results = [inline.get(t.task_id) or pos.done[t.task_id] for t in tasks]
            values = merge_results(schema.channels, pos.values, results, self.step)
        by_task = self.routes
        if len(tasks) == 1:  # most supersteps: no loop, no call
            task_id = tasks[0].task_id
            routes = [by_task[task_id]]
            one = inline.get(task_id) or pos.done.get(task_id)
            changed = None if one is None or one.private is None else {one.node: one.private}
        else:
            routes = [by_task[t.task_id] for t in tasks]
            changed = private_changes(inline, pos.done)
        machine.complete_superstep(pos, self.step, values, routes, changed)


@dataclass(slots=True)
class RunPaused(HistoryRecord):
    """Tasks of superstep ``step`` wait for answers; ``caches`` holds their ``ctx.cache``."""

    kind: ClassVar[str] = "run_paused"
    run_id: str
    step: int
    interrupts: dict[str, dict[str, Any]]
    caches: dict[str, dict[str, Any]] = field(default_factory=dict)

    def to_json(self, schema: StateSchema) -> Body:
        body: Body = {"type": self.kind, "run": self.run_id, "step": self.step}
        body["interrupts"] = list(self.interrupts.values())
        if self.caches:
            body["caches"] = self.caches
        return body

    @classmethod
    def from_json(cls, schema: StateSchema, body: Mapping[str, Any]) -> RunPaused:
        pending = {i["key"]: i for i in body["interrupts"]}
        return cls(body["run"], body["step"], pending, dict(body.get("caches", {})))

    def advance(self, schema: StateSchema, pos: Position) -> None:
        machine.pause(pos, self.interrupts, self.caches)


@dataclass(slots=True)
class RunFailed(HistoryRecord):
    """The run failed in the pending superstep, as ``failure`` tells (its failing task, if
    one raised); ``mergeable`` false means the superstep cannot continue."""

    kind: ClassVar[str] = "run_failed"
    run_id: str
    failure: Failure
    mergeable: bool = True

    def to_json(self, schema: StateSchema) -> Body:
        failure = failure_to_json(self.failure)
        return {"type": self.kind, "run": self.run_id, **failure, "mergeable": self.mergeable}

    @classmethod
    def from_json(cls, schema: StateSchema, body: Mapping[str, Any]) -> RunFailed:
        return cls(body["run"], failure_from_json(body), bool(body.get("mergeable", True)))

    def advance(self, schema: StateSchema, pos: Position) -> None:
        machine.fail(pos, self.mergeable, self.failure)


@dataclass(slots=True)
class RunStopped(HistoryRecord):
    """The run stopped before superstep ``step`` finished or started: a breakpoint, a
    closed stream or a cancellation. The position does not move."""

    kind: ClassVar[str] = "run_stopped"
    run_id: str
    step: int
    reason: str
    nodes: list[str] | None = None

    def to_json(self, schema: StateSchema) -> Body:
        body: Body = {"type": self.kind, "run": self.run_id, "step": self.step}
        body["reason"] = self.reason
        if self.nodes is not None:
            body["nodes"] = self.nodes
        return body

    @classmethod
    def from_json(cls, schema: StateSchema, body: Mapping[str, Any]) -> RunStopped:
        return cls(body["run"], body["step"], body["reason"], body.get("nodes"))

    def advance(self, schema: StateSchema, pos: Position) -> None:
        return None


@dataclass(slots=True)
class RunCompleted(HistoryRecord):
    """The run ended after superstep ``step`` with nothing left to run."""

    kind: ClassVar[str] = "run_completed"
    run_id: str
    step: int

    def to_json(self, schema: StateSchema) -> Body:
        return {"type": self.kind, "run": self.run_id, "step": self.step}

    @classmethod
    def from_json(cls, schema: StateSchema, body: Mapping[str, Any]) -> RunCompleted:
        return cls(body["run"], body["step"])

    def advance(self, schema: StateSchema, pos: Position) -> None:
        machine.complete_run(pos)


@dataclass(slots=True)
class StateUpdated(HistoryRecord):
    """``update_state`` merged ``writes`` into the values.

    With ``as_node``, the update counts as written by node ``node``, and ``routes`` (its
    routes, resolved on the merged values) plan the next superstep, as if it had run.
    """

    kind: ClassVar[str] = "state_updated"
    writes: list[FieldWrite]
    node: str | None = None
    routes: list[Route] | None = None

    def to_json(self, schema: StateSchema) -> Body:
        data, replaced = schema.writes_to_json(self.writes)
        body: Body = {"type": self.kind, "values": data}
        if replaced:
            body["replaced"] = replaced
        if self.node is not None:
            body["node"] = self.node
        if self.routes is not None:
            body["routes"] = [route_to_json(r) for r in self.routes]
        return body

    @classmethod
    def from_json(cls, schema: StateSchema, body: Mapping[str, Any]) -> StateUpdated:
        writes = schema.writes_from_json(body["values"], body.get("replaced"))
        routes = body.get("routes")
        if routes is not None:
            routes = [route_from_json(schema, r) for r in routes]
        return cls(writes, body.get("node"), routes)

    def advance(self, schema: StateSchema, pos: Position) -> None:
        machine.edit(pos, schema.channels, self.writes)
        if self.routes is not None:
            machine.hand_over(pos, self.routes)
