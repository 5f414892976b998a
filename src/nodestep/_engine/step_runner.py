"""Run the pending tasks of one superstep: inline, concurrently, or from the node cache.

A lone task of a plain ``def`` node (or an async one) without a timeout runs inline in the
loop's own task (see ``engine.tasks``); several tasks run concurrently
(``engine.concurrent``). Tasks of nodes with ``@node(cache=...)`` are first looked up in
the node cache (``engine.node_cache``): a hit is a finished task without running anything.
The ``"task_updates"`` stream mode gets each task's update here as the task finishes.
"""

from __future__ import annotations

from collections.abc import Awaitable, Callable
from typing import TypeVar

from nodestep._engine.concurrent import ConcurrentStep
from nodestep._engine.node_cache import NodeCache
from nodestep._engine.runtime import Runtime
from nodestep._engine.step_events import EventSink, task_update_event
from nodestep._engine.tasks import TaskOutcome, run_task
from nodestep._errors import StateStoreError
from nodestep._superstep.position import PlannedTask

__all__ = ["StepRunner"]

T = TypeVar("T")


class StepRunner:
    """Runs each superstep's pending tasks; one object per call.

    Args:
        runtime: The call's runtime.
        fail: Records a failure of the run (``run_failed``) before it is raised.
        sink: Where in-step events go.

    Attributes:
        direct: Whether a lone task that may run inline (``inline``) needs nothing else,
            so the loop calls ``run_task`` itself.
    """

    def __init__(
        self,
        runtime: Runtime,
        fail: Callable[[BaseException], Awaitable[None]],
        sink: EventSink,
    ) -> None:
        self.runtime = runtime
        self.sink = sink
        self.fail = fail
        self.concurrent = ConcurrentStep(runtime, fail, sink)
        self.cache = NodeCache.of(runtime)
        self.live = "task_updates" in runtime.modes
        # Whether the loop may run a lone inline task itself, saving a call per superstep
        # on the hot path: nothing to look up in a cache, no task_updates event to send.
        self.direct = self.cache is None and not self.live

    async def run(
        self, pending: list[PlannedTask], step: int, single_task: bool, spent: float
    ) -> list[TaskOutcome]:
        """Run ``pending``; return the outcomes in scheduling order.

        ``spent`` is the time the call already spent inside supersteps, against the graph's
        ``timeout``.

        Raises:
            GraphTimeoutError: the graph's timeout ran out (``run_failed`` is recorded).
            StateStoreError: the node cache cannot read or store an entry, or a result has
                no JSON form (``run_failed`` is recorded).
        """
        cache = self.cache
        answered = {} if cache is None else await self._cache_call(cache.answer(pending))
        if answered:
            outcomes = await self._answered(pending, answered, step, single_task, spent)
        elif single_task and self.inline(pending[0]):
            outcomes = [await run_task(self.runtime, pending[0], step)]
        else:
            outcomes = await self.concurrent.run(pending, step, single_task, spent)
        if cache is not None:
            await self._cache_call(cache.keep(outcomes))
        if single_task and self.live:
            result = outcomes[0].result
            if result is not None:
                await self.sink.send(task_update_event(result, step, self.runtime.run_id))
        return outcomes

    async def _answered(
        self,
        pending: list[PlannedTask],
        answered: dict[str, TaskOutcome],
        step: int,
        single_task: bool,
        spent: float,
    ) -> list[TaskOutcome]:
        """Record the cache's answers, run the other tasks; return every outcome in order."""
        for task in pending:
            outcome = answered.get(task.task_id)
            if outcome is not None and outcome.result is not None:
                await self.concurrent.task_done(outcome, step, single_task)
        rest = [t for t in pending if t.task_id not in answered]
        ran = await self.concurrent.run(rest, step, single_task, spent) if rest else []
        by_task = {o.task.task_id: o for o in ran}
        by_task.update(answered)
        return [by_task[t.task_id] for t in pending]

    async def _cache_call(self, call: Awaitable[T]) -> T:
        """Await a call of the node cache; a store that cannot read or write the entries
        fails the run (``run_failed`` is recorded) rather than leave it unexplained."""
        try:
            return await call
        except StateStoreError as error:
            await self.fail(error)
            raise

    def inline(self, task: PlannedTask) -> bool:
        """Tell whether a lone task may run in the loop's own task (see ``engine.tasks``)."""
        runtime = self.runtime
        if runtime.in_step_events or runtime.graph.timeout is not None or runtime.path:
            # A subgraph's run shares the loop with its parent's other tasks: a plain
            # ``def`` node inline would stall them, and their task_finished records.
            return False
        node = runtime.nodes.get(task.node)
        return node is None or (not node.guarded and (node.is_async or node.timeout is None))
