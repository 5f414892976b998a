"""Run the pending tasks of one superstep concurrently and collect how each ended.

Async nodes run as asyncio tasks; plain ``def`` nodes run in the worker pool. Both report
through the run's inbox (see ``Runtime.open_inbox``), which also carries the ``custom`` and
``debug`` events nodes send while they run, so the loop can stream them as they come. In a
superstep with several tasks each finished task is recorded as it ends.
"""

from __future__ import annotations

import asyncio
import time
from collections.abc import AsyncIterator, Awaitable, Callable
from typing import Any

from nodestep.engine.results import StreamEvent
from nodestep.engine.runtime import Runtime
from nodestep.engine.step_records import finished_record, update_dict
from nodestep.engine.tasks import TaskOutcome, run_task, run_task_in_thread, submit
from nodestep.errors import GraphTimeoutError
from nodestep.superstep.position import PlannedTask

__all__ = ["ConcurrentStep"]


class ConcurrentStep:
    """Runs a superstep's pending tasks at once; one object per call, reused every step.

    Args:
        rt: The call's runtime.
        fail: Records a failure of the run (``run_failed``) before it is raised.
    """

    def __init__(self, rt: Runtime, fail: Callable[[BaseException], Awaitable[None]]) -> None:
        self.rt = rt
        self.graph = rt.graph
        self.pos = rt.pos
        self.writer = rt.writer
        self.want = rt.modes
        self.fail = fail
        self.inflight: list[asyncio.Future[None]] = []

    def _event(self, mode: str, data: Any, **kw: Any) -> StreamEvent:
        return StreamEvent(mode, data, run_id=self.rt.run_id, **kw)

    async def cancel(self) -> None:
        """Cancel the async tasks still running and wait for them to stop."""
        inflight, self.inflight = self.inflight, []
        for future in inflight:
            future.cancel()
        if inflight:
            await asyncio.wait(inflight)

    async def run(
        self,
        pending: list[PlannedTask],
        step: int,
        lone: bool,
        outcomes: list[TaskOutcome],
        spent: float,
    ) -> AsyncIterator[StreamEvent]:
        """Run ``pending``; yield in-step events; put the outcomes, in order, in ``outcomes``.

        ``spent`` is the time the call already spent inside supersteps, against the graph's
        ``timeout``.
        """
        rt, graph = self.rt, self.graph
        generation = rt.open_inbox()
        found: list[TaskOutcome | None] = [None] * len(pending)
        self.inflight = []
        for index, task in enumerate(pending):
            node = rt.nodes.get(task.node)
            if node is not None and not node.is_async:
                submit(self._in_thread, generation, index, task, step)
            else:
                coro = self._on_loop(generation, index, task, step)
                self.inflight.append(asyncio.ensure_future(coro))
        left = len(pending)
        budget = None if graph.timeout is None else graph.timeout - spent
        started = time.monotonic()
        try:
            while left:
                items = rt.take()
                if not items:
                    await self._wait(budget, started, step)
                    continue
                for kind, payload in items:
                    if kind == "event":
                        yield payload
                        continue
                    index, outcome = payload
                    found[index] = outcome
                    left -= 1
                    event = await self._task_done(outcome, step, lone)
                    if event is not None:
                        yield event
            for kind, payload in rt.take():
                if kind == "event":
                    yield payload
        finally:
            rt.close_inbox()
            for future in self.inflight:
                future.cancel()
            self.inflight = []
        outcomes.extend(o for o in found if o is not None)

    async def _wait(self, budget: float | None, started: float, step: int) -> None:
        wake = self.rt.wake
        assert wake is not None
        if budget is None:
            await wake.wait()
        else:
            remaining = max(budget - (time.monotonic() - started), 0.0)
            try:
                async with asyncio.timeout(remaining):
                    await wake.wait()
            except TimeoutError:
                graph = self.graph
                error = GraphTimeoutError(
                    f"Graph '{graph.name}' spent more than timeout={graph.timeout:g}s inside "
                    f"supersteps; it stopped in step {step}. Finished tasks keep their updates: "
                    f"with a state store, invoke(None, thread_id=...) continues the superstep."
                )
                await self.fail(error)
                raise error from None
        wake.clear()

    def _in_thread(self, generation: int, index: int, task: PlannedTask, step: int) -> None:
        outcome = run_task_in_thread(self.rt, task, step)
        self.rt.post(generation, "done", (index, outcome))

    async def _on_loop(self, generation: int, index: int, task: PlannedTask, step: int) -> None:
        try:
            outcome = await run_task(self.rt, task, step)
        except (KeyboardInterrupt, SystemExit) as error:
            # Re-raised by the loop itself, on its own coroutine, in _task_done.
            outcome = TaskOutcome(task, error=error)
        self.rt.post(generation, "done", (index, outcome))

    async def _task_done(self, outcome: TaskOutcome, step: int, lone: bool) -> StreamEvent | None:
        error = outcome.error
        if isinstance(error, KeyboardInterrupt | SystemExit):
            raise error
        result = outcome.result
        if result is None:
            return None
        task = outcome.task
        if not lone:
            self.pos.done[task.task_id] = result
            if self.writer is not None:
                await self.writer.commit([finished_record(step, result)])
        if "debug" in self.want:
            data = {"type": "node_output", "update": update_dict(result)}
            return self._event("debug", data, node=task.node, step=step, task_id=task.task_id)
        return None
