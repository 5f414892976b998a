"""What a finished superstep leaves behind: its history records and its stream events."""

from __future__ import annotations

import copy
from collections.abc import Set
from typing import Any

from nodestep.engine.records import route_to_json
from nodestep.engine.results import StreamEvent
from nodestep.store.base import Record
from nodestep.superstep.position import Route, TaskResult

__all__ = ["after_step_events", "finished_record", "superstep_record", "update_dict"]


def finished_record(step: int, result: TaskResult) -> Record:
    """Return the ``task_finished`` record of a task of a superstep with several tasks."""
    record: Record = {"type": "task_finished", "step": step, "node": result.node}
    if result.task_id != result.node:
        record["task"] = result.task_id
    record["update"] = result.update_json or {}
    if result.replaced:
        record["replaced"] = result.replaced
    if result.goto is not None:
        record["goto"] = [route_to_json(r) for r in result.goto]
    return record


def superstep_record(
    step: int, results: list[TaskResult], routes: list[list[Route]], lone: bool
) -> Record:
    """Return the ``superstep_completed`` record.

    A superstep with one task carries that task's update in this one record (one append
    per step); with several, each task was recorded as it finished, and this record holds
    only the resolved routes.
    """
    if lone:
        result = results[0]
        record: Record = {"type": "superstep_completed", "step": step, "node": result.node}
        if result.task_id != result.node:
            record["task"] = result.task_id
        record["update"] = result.update_json or {}
        record["routes"] = [route_to_json(r) for r in routes[0]]
        if result.replaced:
            record["replaced"] = result.replaced
        return record
    return {
        "type": "superstep_completed",
        "step": step,
        "routes": {
            r.task_id: [route_to_json(x) for x in rs] for r, rs in zip(results, routes, strict=True)
        },
    }


def after_step_events(
    want: Set[str],
    run_id: str,
    step: int,
    results: list[TaskResult],
    routes: list[list[Route]],
    merged: dict[str, Any],
    checkpoint_id: str | None,
) -> list[StreamEvent]:
    """Return the events streamed after a superstep, for the modes in ``want``.

    Events carry copies of the state, so a consumer that changes them changes no run.
    """
    if not want:
        return []
    events = []
    if "updates" in want:
        for r in results:
            data = update_dict(r) if r.writes else None
            events.append(
                StreamEvent("updates", data, r.node, step, r.task_id, run_id, checkpoint_id)
            )
    if "debug" in want:
        shown = {
            r.task_id: [_route_label(x) for x in rs] for r, rs in zip(results, routes, strict=True)
        }
        routes_data = {"type": "routes", "routes": shown}
        merge_data = {"type": "state_merge", "state": copy.deepcopy(merged)}
        events.append(StreamEvent("debug", routes_data, None, step, None, run_id, checkpoint_id))
        events.append(StreamEvent("debug", merge_data, None, step, None, run_id, checkpoint_id))
    if "values" in want:
        values = copy.deepcopy(merged)
        events.append(StreamEvent("values", values, None, step, None, run_id, checkpoint_id))
    return events


def update_dict(result: TaskResult) -> dict[str, Any]:
    """Return a task's update as a dict of copies of the written values."""
    return {key: copy.deepcopy(value) for key, value, _ in result.writes}


def _route_label(route: Route) -> str:
    return route if isinstance(route, str) else f"Send({route.node})"
