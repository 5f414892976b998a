"""The JSON forms of the parts history records are made of: routes, tasks, results, failures.

Values go through the state schema (each field's own JSON form); everything else here is
names and ids. ``superstep.records`` builds the records from these pieces.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from typing import Any

from nodestep.state.schema import StateSchema
from nodestep.superstep.position import Failure, PlannedTask, Route, SendRoute, TaskResult

__all__ = [
    "failure_from_json",
    "failure_to_json",
    "payload_from_json",
    "result_from_json",
    "result_to_json",
    "route_from_json",
    "route_to_json",
    "tasks_from_json",
    "tasks_to_json",
]


def payload_from_json(schema: StateSchema, data: Mapping[str, Any] | None) -> dict[str, Any]:
    """Return a ``Send`` payload's values from its stored form."""
    return schema.fields_from_json(data or {})


def route_to_json(route: Route) -> Any:
    """A node name stays a string; a ``Send`` becomes ``{"send": node, "payload": {...}}``."""
    if isinstance(route, SendRoute):
        return {"send": route.node, "payload": route.payload_json}
    return route


def route_from_json(schema: StateSchema, data: Any) -> Route:
    if isinstance(data, str):
        return data
    return SendRoute(data["send"], payload_from_json(schema, data["payload"]), data["payload"])


def tasks_to_json(tasks: Iterable[PlannedTask]) -> list[Any]:
    """A plain task is its node's name; a ``Send`` task is ``{"node", "id", "payload"}``."""
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
            payload = None if raw is None else payload_from_json(schema, raw)
            out.append(PlannedTask(item["node"], item["id"], payload, raw))
    return out


def result_to_json(result: TaskResult, *, goto: bool = True) -> dict[str, Any]:
    """Return ``{"node"?, "update", "replaced"?, "goto"?, "failed"?}`` for a task's result.

    ``node`` is left out when it is the task id (the task was its node's first);
    ``goto=False`` leaves out the task's own routes, for a result stored together with the
    routes that were resolved from them.
    """
    body: dict[str, Any] = {}
    if result.node != result.task_id:
        body["node"] = result.node
    body["update"] = result.update_json or {}
    if result.replaced:
        body["replaced"] = result.replaced
    if goto and result.goto is not None:
        body["goto"] = [route_to_json(r) for r in result.goto]
    if result.failed is not None:
        body["failed"] = {"error": result.failed[0], "message": result.failed[1]}
    return body


def result_from_json(schema: StateSchema, task_id: str, body: Mapping[str, Any]) -> TaskResult:
    update = body.get("update") or {}
    replaced = body.get("replaced")
    goto = body.get("goto")
    failed = body.get("failed")
    return TaskResult(
        node=body.get("node") or task_id,
        task_id=task_id,
        writes=schema.writes_from_json(update, replaced),
        goto=None if goto is None else [route_from_json(schema, r) for r in goto],
        update_json=update,
        replaced=replaced,
        failed=None if failed is None else (failed["error"], failed["message"]),
    )


def failure_to_json(failure: Failure) -> dict[str, Any]:
    """``step``, ``error`` and ``message``, then ``node`` and ``task`` when they are known.

    ``task`` is left out when it is the node's name, as in ``task_finished``.
    """
    body: dict[str, Any] = {
        "step": failure.step,
        "error": failure.error,
        "message": failure.message,
    }
    if failure.node is not None:
        body["node"] = failure.node
        if failure.task_id is not None and failure.task_id != failure.node:
            body["task"] = failure.task_id
    return body


def failure_from_json(data: Mapping[str, Any]) -> Failure:
    """Read ``failure_to_json``'s form; records written before nodestep named no node."""
    node = data.get("node")
    return Failure(data["step"], data["error"], data["message"], node, data.get("task") or node)
