"""Run the task of a node with a retry policy or a circuit breaker: attempts, waits, breaker.

Only nodes with ``retry=`` or ``breaker=`` come here (``Node.guarded``); every other task
runs as before, so they cost nothing. A guarded task always runs as a task of the
superstep's task group (``_engine.step_tasks``), never inline: its waits are awaited on
the event loop, through the graph's ``sleep=``, and a plain ``def`` node's attempts run
in a worker thread one after another. So the graph's ``timeout`` and a cancellation
reach a task while it waits, as while it runs.

Error routes come last: each attempt runs unrouted, so a failure is retried and counted
by the breaker first, and only the failure that ends the task (its last attempt, a
refusal of an open breaker) goes to the node's ``$is_error`` routes. A failure that
finds the breaker open (it opened it, or another run did) is not retried: the task ends
with the ``CircuitOpenError`` the retry would have met after its wait.

An attempt starts from the position the superstep started from: a failed attempt's
writes, private state and ``ctx.cache`` are dropped with it, so a retry never applies
writes twice. A pause (``interrupt``) is not a failure: it ends the task at once.

What happens is sent to ``note`` as records (``task_retried``, ``breaker_changed``); the
superstep's collector stores them in order and streams them.
"""

from __future__ import annotations

from collections.abc import Awaitable, Callable

import anyio.to_thread

from nodestep._engine.runtime import Runtime
from nodestep._engine.tasks import TaskOutcome, route_failure, run_task, run_task_in_thread
from nodestep._errors import CircuitOpenError
from nodestep._flow.nodes import Node
from nodestep._flow.resilience import CircuitBreaker
from nodestep._superstep.attempts import BreakerChanged, TaskRetried
from nodestep._superstep.position import PlannedTask
from nodestep._superstep.records import HistoryRecord

__all__ = ["GuardedTask", "Note"]

Note = Callable[[HistoryRecord], Awaitable[None]]
"""Hands a record to the superstep's collector, which stores it and streams it."""

_SLACK = 1e-6
"""Seconds a wait may end past a retry deadline and still count as ending at it.

Why: a wait that ends exactly at the deadline is allowed, but a clock reads seconds since
the epoch, where a float's step is about 2.4e-7 s, so ``clock() + delay - started`` can
land a few steps past a deadline it meets exactly."""


class GuardedTask:
    """One task of a guarded node, run under the node's retry policy and breaker.

    Args:
        runtime: The call's runtime.
        node: The task's node (``node.guarded``).
        task: The task.
        step: The superstep.
        note: Where the task's records go (``task_retried``, ``breaker_changed``).
        lone: The task is the only one running, and neither the node nor the graph has a
            timeout, so a plain ``def`` node's attempts run on the loop's thread, as a lone
            task without a policy does (a thread hop per attempt would cost more than the
            superstep).
    """

    __slots__ = ("lone", "node", "note", "runtime", "step", "task")

    def __init__(
        self,
        runtime: Runtime,
        node: Node,
        task: PlannedTask,
        step: int,
        note: Note,
        *,
        lone: bool = False,
    ) -> None:
        self.runtime = runtime
        self.node = node
        self.task = task
        self.step = step
        self.note = note
        self.lone = lone

    async def run(self) -> TaskOutcome:
        """Run the task's attempts until one ends it; return how it ended.

        Returns:
            The outcome of the last attempt, or a ``CircuitOpenError`` outcome when the
            breaker refused the call; either one given to the error routes first.
        """
        runtime, node, task = self.runtime, self.node, self.task
        policy, breaker = node.retry, node.breaker
        graph = runtime.graph
        clock = graph.clock
        started = clock()
        attempt = 1
        while True:
            if breaker is not None:
                refused = await self._ask(breaker)
                if refused is not None:
                    return self._routed(refused)
            try:
                outcome = await self._attempt(attempt)
            except BaseException:
                if breaker is not None:  # cancelled: a half-open trial must not stay taken
                    breaker.release()
                raise
            if breaker is not None:
                await self._tell(breaker, outcome)
            error = outcome.error
            if error is None or policy is None or attempt >= policy.attempts:
                return self._routed(outcome)
            if not policy.retries(error):
                return self._routed(outcome)
            if breaker is not None and (left := breaker.open_for(clock())) is not None:
                # This failure, or another run's, opened the breaker: the retry would be
                # refused after its wait, so the task ends now, as that refusal would.
                return self._routed(self._refused(left, error))
            delay = policy.delay(attempt, f"{runtime.run_id}:{task.task_id}")
            if policy.deadline is not None and clock() + delay - started > policy.deadline + _SLACK:
                return self._routed(outcome)
            name, message = runtime.stored_error(error)
            retried = TaskRetried(self.step, node.name, task.task_id, attempt, name, message, delay)
            await self.note(retried)
            await graph.sleep(delay)
            attempt += 1

    async def _attempt(self, attempt: int) -> TaskOutcome:
        """Run one attempt, unrouted: its failure comes back ``routable``."""
        runtime, task, step = self.runtime, self.task, self.step
        if self.node.is_async or self.lone:
            return await run_task(runtime, task, step, attempt, False)
        # A worker thread per attempt; abandoned (left to finish alone) on a cancellation,
        # as the engine's own workers are after a graph timeout.
        return await anyio.to_thread.run_sync(
            run_task_in_thread, runtime, task, step, attempt, False, abandon_on_cancel=True
        )

    async def _ask(self, breaker: CircuitBreaker) -> TaskOutcome | None:
        """Ask the breaker for a call; return the failed outcome if it refuses."""
        allowed, left, moved = breaker.before_call(self.runtime.graph.clock())
        if moved is not None:
            await self.note(BreakerChanged(self.step, self.node.name, self.task.task_id, moved))
        if allowed:
            return None
        return self._refused(left, None)

    def _refused(self, left: float, cause: BaseException | None) -> TaskOutcome:
        """Return the outcome of a call the open breaker refuses, ``cause`` its reason."""
        error = CircuitOpenError(self.node.name, left)
        error.__cause__ = cause
        return TaskOutcome(self.task, error=error, routable=True)

    def _routed(self, outcome: TaskOutcome) -> TaskOutcome:
        """Give the failure that ends the task to its error routes, as ``run_task`` would."""
        if not outcome.routable or not isinstance(outcome.error, Exception):
            return outcome
        task = self.task
        pos = self.runtime.pos
        values = pos.values if task.payload is None else {**pos.values, **task.payload}
        return route_failure(self.runtime, task, outcome.error, values)

    async def _tell(self, breaker: CircuitBreaker, outcome: TaskOutcome) -> None:
        """Report an attempt's end to the breaker; note the change it causes."""
        if outcome.paused is not None:
            breaker.release()
            return
        moved = breaker.after_call(self.runtime.graph.clock(), outcome.error)
        if moved is not None:
            await self.note(BreakerChanged(self.step, self.node.name, self.task.task_id, moved))
