"""The JSON forms of the parts history records are made of: routes, tasks, results, failures.

Values go through the state schema (each field's own JSON form); everything else here is
names and ids. ``_superstep.records`` builds the records from these pieces.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from typing import Any

from nodestep._state.schema import StateSchema
from nodestep._superstep.position import (
    DeferredRoute,
    Failure,
    JoinRoute,
    PlannedTask,
    Position,
    Route,
    SendRoute,
    TaskResult,
)

__all__ = [
    "extras_from_json",
    "extras_to_json",
    "failure_from_json",
    "failure_to_json",
    "payload_from_json",
    "result_from_json",
    "result_to_json",
    "route_from_json",
    "route_to_json",
    "tasks_from_json",
    "tasks_to_json",
    "upgrade_v1_superstep",
]


def payload_from_json(schema: StateSchema, data: Mapping[str, Any] | None) -> dict[str, Any]:
    """Return a ``Send`` payload's values from its stored form."""
    return schema.fields_from_json(data or {})


def route_to_json(route: Route) -> Any:
    """Return a route's stored form.

    A node name stays a string; a ``Send`` becomes ``{"send": node, "payload": {...}}``
    (``"input"`` instead of ``"payload"`` for a node with an input model); an arrival at a
    join ``{"join": node, "from": source, "after": [sources], "defer"?: true}``; a route
    held for a deferred node ``{"defer": route}``.
    """
    if isinstance(route, str):
        return route
    if isinstance(route, SendRoute):
        if route.input is not None:
            return {"send": route.node, "input": route.input}
        return {"send": route.node, "payload": route.payload_json}
    if isinstance(route, JoinRoute):
        body: dict[str, Any] = {"join": route.node, "from": route.source}
        body["after"] = list(route.sources)
        if route.defer:
            body["defer"] = True
        return body
    return {"defer": route_to_json(route.route)}


def route_from_json(schema: StateSchema, data: Any) -> Route:
    if isinstance(data, str):
        return data
    if "send" in data:
        if "input" in data:
            return SendRoute(data["send"], {}, None, dict(data["input"]))
        return SendRoute(data["send"], payload_from_json(schema, data["payload"]), data["payload"])
    if "join" in data:
        after = tuple(data["after"])
        return JoinRoute(data["join"], data["from"], after, bool(data.get("defer", False)))
    held = route_from_json(schema, data["defer"])
    if not isinstance(held, str | SendRoute):
        raise TypeError(f"a deferred route holds a node or a send, not {data['defer']!r}")
    return DeferredRoute(held)


def extras_to_json(pos: Position) -> dict[str, Any]:
    """Return a checkpoint's keys for what a position holds besides its superstep: the
    turn's join barriers and held routes, the nodes' private states and the subgraph runs
    of unfinished tasks and the count of turns, each only if not empty."""
    body: dict[str, Any] = {}
    if pos.joins:
        body["joins"] = pos.joins
    if pos.deferred:
        body["deferred"] = [route_to_json(r) for r in pos.deferred]
    if pos.node_states:
        body["node_states"] = pos.node_states
    if pos.children:
        body["children"] = pos.children
    if pos.turn:
        body["turn"] = pos.turn
    return body


def extras_from_json(schema: StateSchema, body: Mapping[str, Any]) -> dict[str, Any]:
    """Return ``Position`` keywords from ``extras_to_json``'s keys (none in older records)."""
    held: dict[str, Any] = {}
    if "joins" in body:
        held["joins"] = {str(k): [str(s) for s in v] for k, v in body["joins"].items()}
    if "deferred" in body:
        routes = [route_from_json(schema, r) for r in body["deferred"]]
        if not all(isinstance(r, str | SendRoute) for r in routes):
            raise TypeError("held routes are node names or sends")
        held["deferred"] = routes
    held["node_states"] = dict(body.get("node_states", {}))
    held["children"] = {t: list(b) for t, b in body.get("children", {}).items()}
    held["turn"] = int(body.get("turn", 0))
    return held


def tasks_to_json(tasks: Iterable[PlannedTask]) -> list[Any]:
    """A plain task is its node's name; a ``Send`` task is ``{"node", "id", "payload"}``.

    A task with an input (its node has an input model) is ``{"node", "id", "input"}``.
    """
    out: list[Any] = []
    for t in tasks:
        if t.input is not None:
            out.append({"node": t.node, "id": t.task_id, "input": t.input})
        elif t.payload_json is None and t.task_id == t.node:
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
            given = item.get("input")
            given = None if given is None else dict(given)
            out.append(PlannedTask(item["node"], item["id"], payload, raw, given))
    return out


def result_to_json(result: TaskResult, *, goto: bool = True) -> dict[str, Any]:
    """Return ``{"node"?, "update", "replaced"?, "goto"?, "private"?, "cached"?, "edited"?,
    "failed"?}`` for a task's result.

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
    if result.private is not None or result.cached or result.edited or result.failed is not None:
        body.update(result_marks(result))
    return body


def result_marks(result: TaskResult) -> dict[str, Any]:
    """The optional keys of a stored task result: ``private``, ``cached``, ``edited``,
    ``failed``."""
    marks: dict[str, Any] = {}
    if result.private is not None:
        marks["private"] = result.private
    if result.cached:
        marks["cached"] = True
    if result.edited:
        marks["edited"] = True
    if result.failed is not None:  # an error route took the task's failure
        marks["failed"] = {"error": result.failed[0], "message": result.failed[1]}
    return marks


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
        private=body.get("private"),
        cached=body.get("cached") is True,
        edited=body.get("edited") is True,
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


def upgrade_v1_superstep(body: Mapping[str, Any]) -> dict[str, Any]:
    """Return a format 1 ``superstep_completed`` in the format 2 shape.

    Format 1 had two shapes: a superstep of one task carried its result beside a list of
    routes (``node``, ``task``, ``update``, ``replaced``, ``routes``), one of several tasks
    only the routes by task id.
    """
    routes = body["routes"]
    if isinstance(routes, dict):
        return {"step": body["step"], "tasks": {t: {"routes": r} for t, r in routes.items()}}
    task_id = str(body.get("task") or body["node"])
    entry: dict[str, Any] = {
        "node": body["node"],
        "update": body.get("update") or {},
        "routes": routes,
    }
    if body.get("replaced"):
        entry["replaced"] = body["replaced"]
    return {"step": body["step"], "tasks": {task_id: entry}}
