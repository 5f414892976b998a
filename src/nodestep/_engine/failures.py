"""Where a node's failure goes: down an error route, or out of the run.

Every exception a node raises (its own, a timeout, an update that does not fit the state)
passes through ``task_failed`` and nowhere else, so whatever decides about failures
(error routes now; retries, which run before routing) has one place to hook in.
"""

from __future__ import annotations

from typing import Any

from nodestep._engine.redact import stored_error
from nodestep._engine.runtime import Runtime
from nodestep._superstep.position import PlannedTask, TaskResult

__all__ = ["task_failed"]


def task_failed(
    runtime: Runtime, task: PlannedTask, error: BaseException, values: dict[str, Any]
) -> tuple[TaskResult | None, BaseException | None]:
    """Route a node's failure by its error routes, or hand it back to fail the run.

    Args:
        runtime: The run.
        task: The task that failed.
        error: What it raised.
        values: The state the task read.

    Returns:
        ``(result, None)`` when an error route took the failure: a result with no writes,
        the route as its ``goto`` and the failure (redacted as a stored error is) in
        ``failed``, so history records it. ``(None, error)`` otherwise: ``error`` itself,
        or the error of a condition that could not be evaluated (chained to it).
    """
    try:
        routes = runtime.router.error_routes(task.node, error, values)
    except Exception as broken:
        broken.__context__ = error
        return None, broken
    if routes is None:
        return None, error
    failed = stored_error(error, runtime.context, runtime.graph.redact)
    result = TaskResult(task.node, task.task_id, [], routes, failed=failed)
    if runtime.stores_json:
        result.update_json = {}
    return result, None
