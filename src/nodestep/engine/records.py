"""History records: what the engine stores for each thing that happens, and how to replay it.

Every superstep is expressed as records that a store appends; folding a branch's records
from its last checkpoint gives back the thread's ``Position`` exactly as the live run had it.
The record types are documented in ``docs/history.md``; keep the two in step.
"""

from __future__ import annotations

from collections.abc import Iterable
from typing import Any

from nodestep.errors import StateStoreError
from nodestep.state.schema import StateSchema
from nodestep.store.base import Record
from nodestep.superstep.merge import merge_results
from nodestep.superstep.plan import plan_tasks
from nodestep.superstep.position import PlannedTask, Position, Route, SendRoute, TaskResult

__all__ = [
    "EVENT_TYPES",
    "apply_record",
    "checkpoint_body",
    "result_to_json",
    "route_from_json",
    "route_to_json",
    "tasks_from_json",
    "tasks_to_json",
]

EVENT_TYPES = (
    "checkpoint",
    "run_started",
    "task_finished",
    "superstep_completed",
    "run_paused",
    "run_failed",
    "run_stopped",
    "run_completed",
    "state_updated",
)


def route_to_json(route: Route) -> Any:
    if isinstance(route, SendRoute):
        return {"send": route.node, "payload": route.payload_json}
    return route


def route_from_json(schema: StateSchema, data: Any) -> Route:
    if isinstance(data, str):
        return data
    payload = {k: schema.fields[k].from_json(v) for k, v in (data["payload"] or {}).items()}
    return SendRoute(data["send"], payload, data["payload"])


def tasks_to_json(tasks: Iterable[PlannedTask]) -> list[Any]:
    out: list[Any] = []
    for t in tasks:
        if t.payload_json is None and t.task_id == t.node:
            out.append(t.node)
        else:
            out.append({"node": t.node, "id": t.task_id, "payload": t.payload_json})
    return out


def tasks_from_json(schema: StateSchema, data: Iterable[Any]) -> list[PlannedTask]:
    out = []
    for item in data:
        if isinstance(item, str):
            out.append(PlannedTask(item, item))
        else:
            raw = item.get("payload")
            payload = None
            if raw is not None:
                payload = {k: schema.fields[k].from_json(v) for k, v in raw.items()}
            out.append(PlannedTask(item["node"], item["id"], payload, raw))
    return out


def result_to_json(result: TaskResult) -> dict[str, Any]:
    body: dict[str, Any] = {"node": result.node, "update": result.update_json or {}}
    if result.replaced:
        body["replaced"] = result.replaced
    if result.goto is not None:
        body["goto"] = [route_to_json(r) for r in result.goto]
    return body


def _result_from_json(schema: StateSchema, task_id: str, body: dict[str, Any]) -> TaskResult:
    update = body.get("update") or {}
    replaced = body.get("replaced")
    goto = body.get("goto")
    return TaskResult(
        node=body["node"],
        task_id=task_id,
        writes=schema.writes_from_json(update, replaced),
        goto=None if goto is None else [route_from_json(schema, r) for r in goto],
        update_json=update,
        replaced=replaced,
    )


def checkpoint_body(schema: StateSchema, pos: Position, *, checked: bool = True) -> dict[str, Any]:
    """Return the type-specific keys of a checkpoint record for ``pos``.

    ``checked=False`` skips the JSON round-trip check of the values, for positions whose
    values were all checked when they were stored.
    """
    if checked:
        values = schema.values_to_json(pos.values)
    else:
        values = {k: schema.fields[k].dump(v) for k, v in pos.values.items()}
    body: dict[str, Any] = {
        "type": "checkpoint",
        "values": values,
        "status": pos.status,
        "step": pos.step,
    }
    if pos.tasks:
        body["tasks"] = tasks_to_json(pos.tasks)
    if pos.done:
        body["done"] = {tid: result_to_json(r) for tid, r in pos.done.items()}
    if pos.interrupts:
        body["interrupts"] = pos.interrupts
    if pos.answers:
        body["answers"] = pos.answers
    if pos.caches:
        body["caches"] = pos.caches
    return body


def _resolved_routes(schema: StateSchema, raw: Any) -> list[Route]:
    return [route_from_json(schema, r) for r in raw]


def apply_record(schema: StateSchema, pos: Position | None, record: Record) -> Position:
    """Return the position after ``record`` (``pos`` is changed in place when given).

    Raises:
        StateStoreError: the record does not fit the position it is applied to.
    """
    kind = record["type"]
    if kind == "checkpoint":
        pos = Position(
            values=schema.values_from_json(record["values"]),
            status=record["status"],
            step=record["step"],
            tasks=tasks_from_json(schema, record.get("tasks", ())),
            done={
                tid: _result_from_json(schema, tid, body)
                for tid, body in record.get("done", {}).items()
            },
            interrupts=dict(record.get("interrupts", {})),
            answers=dict(record.get("answers", {})),
            caches=dict(record.get("caches", {})),
        )
        pos.since_checkpoint = -1  # the checkpoint itself does not count: back to 0 below
    elif pos is None:
        raise StateStoreError(
            f"History of thread '{record['thread']}' (branch '{record['branch']}') does not start "
            f"with a checkpoint: record {record['seq']} is a '{kind}' record."
        )
    elif kind == "superstep_completed":
        if "routes" in record and isinstance(record["routes"], dict):
            results = [pos.done[t.task_id] for t in pos.tasks]
            routes = [_resolved_routes(schema, record["routes"][t.task_id]) for t in pos.tasks]
        else:
            body = record
            result = _result_from_json(schema, str(body.get("task") or body["node"]), body)
            results = [result]
            routes = [_resolved_routes(schema, body["routes"])]
        pos.values = merge_results(schema.channels, pos.values, results, pos.step)
        pos.tasks = plan_tasks(routes)
        pos.step = record["step"] + 1
        pos.status = "running" if pos.tasks else "idle"
        pos.done = {}
        pos.interrupts = {}
        pos.answers = {}
        pos.caches = {}
    elif kind == "task_finished":
        task_id = str(record.get("task") or record["node"])
        pos.done[task_id] = _result_from_json(schema, task_id, record)
    elif kind == "run_started":
        if record.get("input") is not None:
            schema.apply(
                pos.values,
                schema.writes_from_json(record["input"], record.get("replaced")),
                "input",
            )
            pos.tasks = tasks_from_json(schema, record["tasks"])
            pos.step = 0
            pos.done = {}
            pos.interrupts = {}
            pos.answers = {}
            pos.caches = {}
            pos.status = "running"
        if record.get("answers"):
            pos.answers.update(record["answers"])
            pos.status = "running"
        pos.run_id = record["run"]
    elif kind == "run_paused":
        pos.status = "paused"
        pos.interrupts = {i["key"]: i for i in record["interrupts"]}
        pos.caches = dict(record.get("caches", {}))
    elif kind == "run_failed":
        pos.status = "running" if record.get("mergeable", True) else "blocked"
    elif kind == "run_completed":
        pos.status = "idle"
    elif kind == "state_updated":
        schema.apply(
            pos.values,
            schema.writes_from_json(record["values"], record.get("replaced")),
            "update_state",
        )
    elif kind != "run_stopped":
        raise StateStoreError(
            f"Unknown history record type '{kind}' (record {record['seq']} of thread "
            f"'{record['thread']}'); it was written by a newer nodestep. Upgrade nodestep to "
            f"read it."
        )
    pos.seq = record["seq"]
    pos.event_id = record["id"]
    pos.since_checkpoint += 1
    return pos
