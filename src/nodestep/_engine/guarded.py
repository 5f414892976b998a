"""Run the task of a node with a retry policy or a circuit breaker: attempts, waits, breaker.

Only nodes with ``retry=`` or ``breaker=`` come here (``Node.guarded``); every other task
runs as before, so they cost nothing. A guarded task always runs as a task of the
superstep's task group (``engine.concurrent``), never inline: its waits are awaited on
the event loop, through the graph's ``sleep=``, and a plain ``def`` node's attempts run
in a worker thread one after another. So the graph's ``timeout`` and a cancellation
reach a task while it waits, as while it runs.

Error routes come last: each attempt runs unrouted, so a failure is retried and counted
by the breaker first, and only the failure that ends the task (its last attempt, a
refusal of an open breaker) goes to the node's ``$is_error`` routes.

An attempt starts from the position the superstep started from: a failed attempt's
writes, private state and ``ctx.cache`` are dropped with it, so a retry never applies
writes twice. A pause (``interrupt``) is not a failure: it ends the task at once.

What happens is sent to ``note`` as records (``task_retried``, ``breaker_changed``); the
superstep's collector stores them in order and streams them.
"""

from __future__ import annotations

from collections.abc import Awaitable, Callable

import anyio.to_thread

from nodestep._engine.failures import task_failed
from nodestep._engine.redact import stored_error
from nodestep._engine.runtime import Runtime
from nodestep._engine.tasks import TaskOutcome, run_task, run_task_in_thread
from nodestep._errors import CircuitOpenError
from nodestep._flow.nodes import Node
from nodestep._flow.resilience import CircuitBreaker
from nodestep._superstep.attempts import BreakerChanged, TaskRetried
from nodestep._superstep.position import PlannedTask
from nodestep._superstep.records import HistoryRecord

__all__ = ["Note", "run_guarded"]

Note = Callable[[HistoryRecord], Awaitable[None]]
"""Hands a record to the superstep's collector, which stores it and streams it."""


async def run_guarded(
    runtime: Runtime, node: Node, task: PlannedTask, step: int, note: Note, *, lone: bool = False
) -> TaskOutcome:
    """Run ``task`` of ``node`` under its retry policy and breaker; return how it ended.

    ``lone``: the task is the only one running, and neither the node nor the graph has a
    timeout, so a plain ``def`` node's attempts run on the loop's thread, as a lone task
    without a policy does (a thread hop per attempt would cost more than the superstep).

    Returns:
        The outcome of the last attempt, or a ``CircuitOpenError`` outcome when the
        breaker refused the call.
    """
    policy, breaker = node.retry, node.breaker
    graph = runtime.graph
    clock = graph.clock
    started = clock()
    attempt = 1
    while True:
        if breaker is not None:
            refused = await _ask(breaker, runtime, node, task, step, note)
            if refused is not None:
                return _routed(runtime, task, refused)
        try:
            outcome = await _attempt(runtime, node, task, step, attempt, lone)
        except BaseException:
            if breaker is not None:  # cancelled: a half-open trial must not stay taken
                breaker.release()
            raise
        if breaker is not None:
            await _tell(breaker, outcome, runtime, node, task, step, note)
        error = outcome.error
        if error is None or policy is None or attempt >= policy.attempts:
            return _routed(runtime, task, outcome)
        if not policy.retries(error):
            return _routed(runtime, task, outcome)
        delay = policy.delay(attempt, f"{runtime.run_id}:{task.task_id}")
        if policy.deadline is not None and clock() + delay - started >= policy.deadline:
            return _routed(runtime, task, outcome)
        secrets = [c.secret() for c in runtime.resolved.values()]
        name, message = stored_error(error, runtime.context, graph.redact, secrets)
        await note(TaskRetried(step, node.name, task.task_id, attempt, name, message, delay))
        await graph.sleep(delay)
        attempt += 1


async def _attempt(
    runtime: Runtime, node: Node, task: PlannedTask, step: int, attempt: int, lone: bool
) -> TaskOutcome:
    if node.is_async or lone:
        return await run_task(runtime, task, step, attempt, False)
    # A worker thread per attempt; abandoned (left to finish alone) on a cancellation, as
    # the engine's own workers are after a graph timeout.
    return await anyio.to_thread.run_sync(
        run_task_in_thread, runtime, task, step, attempt, False, abandon_on_cancel=True
    )


async def _ask(
    breaker: CircuitBreaker,
    runtime: Runtime,
    node: Node,
    task: PlannedTask,
    step: int,
    note: Note,
) -> TaskOutcome | None:
    """Ask the breaker for a call; return the failed outcome if it refuses."""
    allowed, left, moved = breaker.before_call(runtime.graph.clock())
    if moved is not None:
        await note(BreakerChanged(step, node.name, task.task_id, moved))
    if allowed:
        return None
    return TaskOutcome(task, error=CircuitOpenError(node.name, left), routable=True)


def _routed(runtime: Runtime, task: PlannedTask, outcome: TaskOutcome) -> TaskOutcome:
    """Give the failure that ends a guarded task to its error routes, as ``run_task`` would."""
    if not outcome.routable or not isinstance(outcome.error, Exception):
        return outcome
    pos = runtime.pos
    values = pos.values if task.payload is None else {**pos.values, **task.payload}
    result, raised = task_failed(runtime, task, outcome.error, values)
    if result is not None:
        return TaskOutcome(task, result=result)
    return TaskOutcome(task, error=raised)


async def _tell(
    breaker: CircuitBreaker,
    outcome: TaskOutcome,
    runtime: Runtime,
    node: Node,
    task: PlannedTask,
    step: int,
    note: Note,
) -> None:
    """Report an attempt's end to the breaker; note the change it causes."""
    if outcome.paused is not None:
        breaker.release()
        return
    moved = breaker.after_call(runtime.graph.clock(), outcome.error)
    if moved is not None:
        await note(BreakerChanged(step, node.name, task.task_id, moved))
