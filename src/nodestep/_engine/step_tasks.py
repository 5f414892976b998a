"""The execute phase: run one superstep's pending tasks and collect how each ended.

Which way a task runs is chosen first (``StepTasks.run``):

* a task of a node with ``@node(cache=...)`` is looked up in the node cache
  (``_engine.node_cache``): a hit is a finished task, and nothing runs;
* a lone task of a plain ``def`` node (or an async one) without a timeout runs inline, in
  the loop's own task (``_engine.tasks`` says why); when nothing else needs doing, the
  loop calls ``run_task`` itself (``StepTasks.direct``), a call less per superstep;
* every other task runs at once with the superstep's others: async nodes in a task group
  (``_engine.backend``), plain ``def`` nodes in the worker threads
  (``_engine.thread_pool``), nodes with a retry policy or a breaker under it
  (``_engine.guarded``).

The tasks that run at once report through the run's inbox (``_engine.inbox``), which also
carries the ``custom`` and ``debug`` events nodes send while they run, so the loop passes
those on as they come. In a superstep with several tasks each finished task is recorded
(``task_finished``) as it ends, so a continuation never runs it again. However a task ran,
the ``"task_updates"`` stream mode gets its update as it finishes.

No exception leaves the task group's body but a cancellation: task errors come back as
outcomes, and the loop's own errors (a timeout, a failed commit) are raised after the group
has closed, so callers see them as they are, not wrapped in an ``ExceptionGroup``.
"""

from __future__ import annotations

import time
from collections.abc import Awaitable
from typing import Protocol, TypeVar

import anyio

from nodestep._engine.backend import TaskGroup, task_group
from nodestep._engine.guarded import GuardedTask
from nodestep._engine.node_cache import NodeCache
from nodestep._engine.results import StreamEvent
from nodestep._engine.runtime import Runtime
from nodestep._engine.step_events import EventSink, debug_values, task_update_event
from nodestep._engine.sync import may_block_loop
from nodestep._engine.tasks import TaskOutcome, raisable, run_task, run_task_in_thread
from nodestep._engine.thread_pool import submit
from nodestep._errors import GraphTimeoutError, StateStoreError
from nodestep._superstep.attempts import BreakerChanged, TaskRetried
from nodestep._superstep.position import PlannedTask
from nodestep._superstep.records import HistoryRecord, TaskFinished

__all__ = ["StepTasks"]

T = TypeVar("T")


class Fail(Protocol):
    """Records a failure of the run (``run_failed``): ``task`` is the failing task, if one
    failed it."""

    def __call__(
        self, error: BaseException, *, task: PlannedTask | None = None
    ) -> Awaitable[None]: ...


class StepTasks:
    """Runs each superstep's pending tasks; one object per call, reused every step.

    Args:
        runtime: The call's runtime.
        fail: Records a failure of the run (``run_failed``) before it is raised.
        sink: Where in-step events go.

    Attributes:
        direct: Whether a lone task that may run inline (``inline``) needs nothing else,
            so the loop calls ``run_task`` itself.
    """

    def __init__(self, runtime: Runtime, fail: Fail, sink: EventSink) -> None:
        self.runtime = runtime
        self.fail = fail
        self.sink = sink
        self.cache = NodeCache.of(runtime)
        self.live = "task_updates" in runtime.modes
        # Whether the loop may run a lone inline task itself, saving a call per superstep
        # on the hot path: nothing to look up in a cache, no task_updates event to send.
        self.direct = self.cache is None and not self.live
        # ``inline``'s answer by node: it depends on the run and the node only.
        self._inline: dict[str, bool] = {}

    # -- which way each task runs --------------------------------------------------------

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
            outcomes = await self._run_at_once(pending, step, single_task, spent)
        if cache is not None:
            await self._cache_call(cache.keep(outcomes))
        if single_task and self.live:
            result = outcomes[0].result
            if result is not None:
                await self.sink.send(task_update_event(result, step, self.runtime.run_id))
        return outcomes

    def inline(self, task: PlannedTask) -> bool:
        """Tell whether a lone task may run in the loop's own task (see ``_engine.tasks``)."""
        known = self._inline.get(task.node)
        if known is None:
            known = self._inline[task.node] = self._may_inline(task.node)
        return known

    def plain(self, task: PlannedTask) -> bool:
        """Tell whether a task's node is a plain ``def`` one (``run_plain_task`` runs it)."""
        node = self.runtime.nodes.get(task.node)
        return node is not None and not node.is_async

    def _may_inline(self, name: str) -> bool:
        runtime = self.runtime
        if runtime.in_step_events or runtime.graph.timeout is not None or runtime.path:
            # A subgraph's run shares the loop with its parent's other tasks: a plain
            # ``def`` node inline would stall them, and their task_finished records.
            return False
        node = runtime.nodes.get(name)
        if node is None:
            return True
        if not node.is_async and not may_block_loop():  # an interrupted cell must stop it
            return False
        return not node.guarded and (node.is_async or node.timeout is None)

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
                await self._task_done(outcome, step, single_task)
        rest = [t for t in pending if t.task_id not in answered]
        failed = [o for o in answered.values() if o.error is not None]  # a key that raised
        ran = await self._run_at_once(rest, step, single_task, spent, failed) if rest else []
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

    # -- the tasks that run at once ------------------------------------------------------

    async def _run_at_once(
        self,
        pending: list[PlannedTask],
        step: int,
        single_task: bool,
        spent: float,
        failed: list[TaskOutcome] | None = None,
    ) -> list[TaskOutcome]:
        """Start every task of ``pending``, collect their outcomes in scheduling order.

        ``failed``: the superstep's tasks that failed before any of ``pending`` started
        (their cache key raised), which fail the run before a timeout does.

        Raises:
            GraphTimeoutError: the graph's timeout ran out (``run_failed`` is recorded).
        """
        inbox = self.runtime.inbox
        generation = inbox.open()
        found: list[TaskOutcome | None] = [None] * len(pending)
        error: BaseException | None = None
        try:
            async with task_group() as group:
                self._start(group, generation, pending, step)
                try:
                    if not await self._collect(found, step, single_task, spent):
                        error = self._timeout_error(step)
                except BaseException as raised:
                    if isinstance(raised, anyio.get_cancelled_exc_class()):
                        raise
                    error = raised
                if error is not None:
                    group.cancel()
        finally:
            inbox.close()
        if isinstance(error, GraphTimeoutError):
            error = await self._timed_out(error, pending, found, step, failed or [])
        if error is not None:
            raise error
        return [o for o in found if o is not None]

    async def _timed_out(
        self,
        error: GraphTimeoutError,
        pending: list[PlannedTask],
        found: list[TaskOutcome | None],
        step: int,
        earlier: list[TaskOutcome],
    ) -> BaseException:
        """Record why the run failed when the timeout ran out; return what it raises.

        Why a task's failure comes first: a task that failed (its retries spent) before the
        timeout ran out had failed the run already, and a run without the timeout would
        raise it once the other tasks ended. So the run fails with it, the first in
        scheduling order, as ``run_failed`` records it, whether the other tasks were slow
        or not; a note on it names the tasks the timeout then stopped. With no failed task
        the timeout is the failure.
        """
        rank = {t.task_id: i for i, t in enumerate(self.runtime.pos.tasks)}
        failures = [o for o in (*earlier, *found) if o is not None and o.error is not None]
        failed = min(failures, key=lambda o: rank.get(o.task.task_id, -1), default=None)
        if failed is None or failed.error is None:
            await self.fail(error)
            return error
        await self.fail(failed.error, task=failed.task)
        raised = raisable(failed.error, failed.task)
        unfinished = [t for t, o in zip(pending, found, strict=True) if o is None]
        stopped = ", ".join(f"'{t.task_id}'" for t in unfinished)
        raised.add_note(
            f"Then the graph's timeout={self.runtime.graph.timeout:g}s ran out in step "
            f"{step} and stopped the tasks that had not finished ({stopped}). With a state "
            f"store, invoke(None, thread_id=...) runs them and the failed task again."
        )
        return raised

    def _start(
        self,
        group: TaskGroup,
        generation: int,
        pending: list[PlannedTask],
        step: int,
    ) -> None:
        nodes = self.runtime.nodes
        graph_timeout = self.runtime.graph.timeout
        for index, task in enumerate(pending):
            node = nodes.get(task.node)
            if node is not None and node.guarded:
                lone = len(pending) == 1 and node.timeout is None and graph_timeout is None
                group.start_soon(self._guarded, generation, index, task, step, lone)
            elif node is not None and not node.is_async:
                submit(self._in_thread, generation, index, task, step)
            else:
                group.start_soon(self._on_loop, generation, index, task, step)

    async def _collect(
        self, found: list[TaskOutcome | None], step: int, single_task: bool, spent: float
    ) -> bool:
        """Take outcomes and events until every task reported; ``False`` on a timeout."""
        runtime = self.runtime
        inbox, timeout = runtime.inbox, runtime.graph.timeout
        left = len(found)
        started = time.monotonic()
        while True:
            for kind, payload in inbox.take():
                if kind == "event":
                    await self.sink.send(payload)
                    continue
                if kind == "record":
                    await self._note(payload)
                    continue
                index, outcome = payload
                found[index] = outcome
                left -= 1
                await self._task_done(outcome, step, single_task)
            if not left:
                return True
            budget = None if timeout is None else timeout - spent - (time.monotonic() - started)
            if not await inbox.wait(budget):
                return False

    def _timeout_error(self, step: int) -> GraphTimeoutError:
        graph = self.runtime.graph
        return GraphTimeoutError(
            f"Graph '{graph.name}' spent more than timeout={graph.timeout:g}s inside "
            f"supersteps; it stopped in step {step}. Finished tasks keep their updates: "
            f"with a state store, invoke(None, thread_id=...) continues the superstep."
        )

    def _in_thread(self, generation: int, index: int, task: PlannedTask, step: int) -> None:
        outcome = run_task_in_thread(self.runtime, task, step)
        self.runtime.inbox.post(generation, "done", (index, outcome))

    async def _on_loop(self, generation: int, index: int, task: PlannedTask, step: int) -> None:
        try:
            outcome = await run_task(self.runtime, task, step)
        except (KeyboardInterrupt, SystemExit) as error:
            # Re-raised by the loop itself, in _task_done, outside the task group.
            outcome = TaskOutcome(task, error=error)
        self.runtime.inbox.post(generation, "done", (index, outcome))

    async def _guarded(
        self, generation: int, index: int, task: PlannedTask, step: int, lone: bool
    ) -> None:
        runtime = self.runtime
        inbox = runtime.inbox

        async def note(record: HistoryRecord) -> None:
            inbox.post(generation, "record", (record, task))

        try:
            node = runtime.nodes[task.node]
            outcome = await GuardedTask(runtime, node, task, step, note, lone=lone).run()
        except (KeyboardInterrupt, SystemExit, Exception) as error:
            # Also what the policy's own code raises (a retry_on function, a sleep=): it
            # fails the task, and nothing but a cancellation leaves the task group.
            outcome = TaskOutcome(task, error=error)
        inbox.post(generation, "done", (index, outcome))

    async def _note(self, payload: tuple[HistoryRecord, PlannedTask]) -> None:
        """Store a guarded task's record (``task_retried``, ``breaker_changed``); stream it."""
        record, task = payload
        runtime = self.runtime
        record.advance(runtime.schema, runtime.pos)
        if runtime.writer is not None:
            await runtime.writer.commit([record])
        if "debug" in runtime.modes and isinstance(record, TaskRetried | BreakerChanged):
            data = record.event_data()
            event = StreamEvent("debug", data, task.node, record.step, task.task_id, runtime.run_id)
            await self.sink.send(event)

    async def _task_done(self, outcome: TaskOutcome, step: int, single_task: bool) -> None:
        """Take a finished task: record it (``task_finished``, with several tasks), and send
        its ``debug`` and ``task_updates`` events; re-raise a ``KeyboardInterrupt``."""
        error = outcome.error
        if isinstance(error, KeyboardInterrupt | SystemExit):
            raise error
        result = outcome.result
        if result is None:
            return
        runtime, task = self.runtime, outcome.task
        if not single_task:
            record = TaskFinished(step, result)
            writer = runtime.writer
            if writer is not None and writer.gate is not None:
                await writer.advance_and_commit([record])  # subgraph tasks commit too
            else:
                record.advance(runtime.schema, runtime.pos)
                if writer is not None:
                    await writer.commit([record])
            if "task_updates" in runtime.modes:
                await self.sink.send(task_update_event(result, step, runtime.run_id))
        if "debug" in runtime.modes:
            update = {key: value for key, value, _ in result.writes}
            data = {"type": "node_output", "update": debug_values(runtime.schema, update)}
            event = StreamEvent("debug", data, task.node, step, task.task_id, runtime.run_id)
            await self.sink.send(event)
