"""The stream events a run sends, and where they go.

A run hands its events to an ``EventSink``: ``invoke`` gives one that wants none, a stream
one that passes each event to the caller as the caller asks for it (see
``_engine.streaming``).
"""

from __future__ import annotations

from collections.abc import Set
from dataclasses import replace as replaced
from typing import Any, Literal

from pydantic_core import PydanticSerializationError, to_jsonable_python

from nodestep._engine.results import StreamEvent
from nodestep._state.deep_copy import deep_copy, deep_copy_values
from nodestep._state.schema import StateSchema
from nodestep._superstep.position import DeferredRoute, JoinRoute, Route, TaskResult

__all__ = [
    "ChildEvents",
    "EventSink",
    "after_step_events",
    "debug_values",
    "task_update_event",
    "update_dict",
]


class EventSink:
    """Where a run's stream events go; this base keeps none.

    Attributes:
        stop_reason: What a ``run_stopped`` record says when the run is cancelled:
            ``"cancelled"``, or ``"stream_closed"`` once the caller closed its stream.
    """

    stop_reason: str = "cancelled"

    async def send(self, event: StreamEvent) -> None:
        """Deliver one event; returns when the run may go on."""


class ChildEvents(EventSink):
    """Pass a child run's stream events to the parent run's sink, under a path.

    A child run is a subgraph task's (the path: its task id) or a sub-agent's (the path:
    ``<task>/<name>#<index>``). The child waits while the caller handles its event, as the
    parent does: closing the stream stops the child right there. The parent's sink takes
    events from several tasks at once (sibling tasks, the parent's own in-step events).
    """

    def __init__(self, parent: EventSink, path: str) -> None:
        self.parent = parent
        self.path = path

    # A read-only view of the parent's attribute; the base class declares a plain one.
    @property
    def stop_reason(self) -> str:  # type: ignore[override]
        """The parent's: a closed stream stops the child as ``"stream_closed"`` too."""
        return self.parent.stop_reason

    async def send(self, event: StreamEvent) -> None:
        path = self.path if event.path is None else f"{self.path}/{event.path}"
        await self.parent.send(replaced(event, path=path))


def after_step_events(
    modes: Set[str],
    run_id: str,
    step: int,
    results: list[TaskResult],
    routes: list[list[Route]],
    merged: dict[str, Any],
    checkpoint_id: str | None,
    schema: StateSchema,
) -> list[StreamEvent]:
    """Return the events streamed after a superstep, for the modes asked for.

    Events carry copies of the state, so a consumer that changes them changes no run.
    """
    if not modes:
        return []
    events = []
    if "updates" in modes:
        for r in results:
            data = update_dict(r) if r.writes else None
            events.append(
                StreamEvent("updates", data, r.node, step, r.task_id, run_id, checkpoint_id)
            )
    if "debug" in modes:
        shown = {
            r.task_id: [_route_label(x, schema) for x in rs]
            for r, rs in zip(results, routes, strict=True)
        }
        routes_data = {"type": "routes", "routes": shown}
        merge_data = {"type": "state_merge", "state": debug_values(schema, merged)}
        events.append(StreamEvent("debug", routes_data, None, step, None, run_id, checkpoint_id))
        events.append(StreamEvent("debug", merge_data, None, step, None, run_id, checkpoint_id))
    if "values" in modes:
        values = deep_copy_values(merged, None)
        events.append(StreamEvent("values", values, None, step, None, run_id, checkpoint_id))
    return events


def task_update_event(result: TaskResult, step: int, run_id: str) -> StreamEvent:
    """Return the ``"task_updates"`` event of a task that just finished.

    It has no ``checkpoint_id``: the superstep has not merged the update yet.
    """
    data = update_dict(result) if result.writes else None
    return StreamEvent("task_updates", data, result.node, step, result.task_id, run_id)


def update_dict(result: TaskResult) -> dict[str, Any]:
    """Return a task's update as a dict of copies of the written values."""
    return {key: deep_copy(value, result.node, key) for key, value, _ in result.writes}


def debug_values(
    schema: StateSchema, values: dict[str, Any], mode: Literal["python", "json"] = "python"
) -> dict[str, Any]:
    """Return state values as the ``"debug"`` stream shows them: dumped by their fields.

    A field's serializer holds, as it does in the ``node_input`` event's ``model_dump``:
    a ``PlainSerializer`` that masks a token masks it in every debug event. A value that
    cannot be dumped is shown by its ``repr``: a debug view never fails a run.
    """
    out: dict[str, Any] = {}
    for key, value in values.items():
        spec = schema.fields.get(key)
        try:
            if spec is None:
                out[key] = to_jsonable_python(value, fallback=repr)
            else:
                out[key] = spec.adapter.dump_python(value, mode=mode)
        except (PydanticSerializationError, TypeError, ValueError):
            out[key] = repr(value)
    return out


def _route_label(route: Route, schema: StateSchema) -> str | dict[str, Any]:
    """Return a route as JSON data: a node name, ``{"send": node, "payload": {...}}``, ...

    The shapes are the ones history records use (``"input"`` for a task input, ``"join"``
    for an arrival at a join, ``"defer"`` for a held route). The payload is made afresh
    (the debug stream is rare, so the cost does not matter), not ``payload_json``, which only
    runs with a store have and which the run still uses.
    """
    if isinstance(route, str):
        return route
    if isinstance(route, JoinRoute):
        return {"join": route.node, "from": route.source, "after": list(route.sources)}
    if isinstance(route, DeferredRoute):
        return {"defer": _route_label(route.route, schema)}
    if route.input is None:  # laid over the state: shown by the state's fields
        return {"send": route.node, "payload": debug_values(schema, route.payload, "json")}
    try:
        shown = to_jsonable_python(route.input, fallback=repr)  # the input model's dump
    except (PydanticSerializationError, TypeError, ValueError):
        # A value that breaks even the fallback: show it, never fail the run for a debug view.
        shown = {key: repr(value) for key, value in route.input.items()}
    return {"send": route.node, "input": shown}
