"""The run loop: supersteps until no task is left, each one recorded as history events.

One superstep:

1. **Plan** (done by the previous superstep): the tasks, in scheduling order.
2. **Execute**: every task that has not finished runs on its own copy of the state. In a
   superstep with several tasks, each finished task is recorded (``task_finished``) as soon
   as it ends, so a later call continues without running it again.
3. **Update**: the writes merge in scheduling order (node name, then task index), then
   each task's routes resolve on the merged state, and the next superstep is planned from
   them. One ``superstep_completed`` event records it.

The loop is written once, async; ``invoke`` and ``stream`` drive it on a private loop.
"""

from __future__ import annotations

import time
from collections.abc import AsyncIterator
from typing import TYPE_CHECKING, Any

from nodestep.engine.concurrent import ConcurrentStep
from nodestep.engine.interrupts import Interrupt
from nodestep.engine.results import FinalEventData, InterruptEventData, StreamEvent
from nodestep.engine.runtime import Runtime
from nodestep.engine.step_records import (
    after_step_events,
    finished_record,
    superstep_record,
)
from nodestep.engine.tasks import TaskOutcome, run_task
from nodestep.engine.turns import RunRequest, open_turn
from nodestep.engine.writer import HistoryWriter, load_position
from nodestep.errors import (
    GraphConfigError,
    InvalidUpdateError,
    RunLimitExceededError,
    StateStoreError,
    UnknownThreadError,
)
from nodestep.store.base import Record
from nodestep.superstep.merge import merge_results
from nodestep.superstep.plan import plan_tasks
from nodestep.superstep.position import PlannedTask, Position, Route, TaskResult

if TYPE_CHECKING:
    from nodestep.graph.graph import Graph

__all__ = ["RunRequest", "execute"]


class _Stop(Exception):
    """The run ends here with a terminal event."""

    def __init__(self, event: StreamEvent) -> None:
        self.event = event


async def execute(graph: Graph[Any], req: RunRequest) -> AsyncIterator[StreamEvent]:
    """Run the graph for one call, yielding the events the caller asked for.

    The last event is always the terminal one: ``"final"`` or ``"interrupt"``.
    """
    schema = graph.schema
    store = req.store
    thread_id = req.thread_id
    pos: Position | None = None
    if store is not None:
        if thread_id is None:
            raise GraphConfigError(
                f"Graph '{graph.name}' runs with a state store, so every call needs a "
                f"thread_id, e.g. invoke(input, thread_id='order-42')."
            )
        pos = await load_position(store, schema, thread_id, req.branch_id, cache=graph._positions)
        if pos is None and req.branch_id != "main":
            raise UnknownThreadError(
                f"Thread '{thread_id}' has no branch '{req.branch_id}'. Create it with "
                f"fork(thread_id, from_=event_id, name='{req.branch_id}').",
                thread_id=thread_id,
                branch_id=req.branch_id,
            )
    elif thread_id is None:
        thread_id = graph._new_id().replace("-", "")

    run_id = graph._new_id().replace("-", "")
    pos, records, continuing, new_thread = open_turn(graph, pos, req, run_id)
    writer = None
    if store is not None:
        writer = HistoryWriter(
            store, schema, thread_id, req.branch_id, pos, graph._new_id, graph._clock
        )
        if new_thread:
            records.insert(0, new_thread)
        await writer.commit(records)
    rt = Runtime(
        graph,
        run_id=run_id,
        thread_id=thread_id,
        branch_id=req.branch_id,
        context=req.context,
        modes=req.modes,
        writer=writer,
        pos=pos,
    )
    loop = _Loop(graph, rt, req, continuing)
    try:
        async for event in loop.run():
            yield event
    finally:
        if writer is not None and writer.in_sync:
            graph._positions.put(writer.store, schema, thread_id, req.branch_id, writer.pos)


class _Loop:
    """One call's supersteps."""

    def __init__(self, graph: Graph[Any], rt: Runtime, req: RunRequest, continuing: bool):
        self.graph = graph
        self.rt = rt
        self.req = req
        self.pos = rt.pos
        self.writer = rt.writer
        self.continuing = continuing
        self.want = req.modes
        self.concurrent = ConcurrentStep(rt, self._fail)
        self.spent = 0.0
        self.last_step = self.pos.step
        self._last_nodes: set[str] = set()

    def _event(self, mode: str, data: Any, **kw: Any) -> StreamEvent:
        return StreamEvent(mode, data, run_id=self.rt.run_id, **kw)

    async def _commit(self, record: Record) -> str | None:
        if self.writer is None:
            return None
        return await self.writer.commit([record])

    async def _fail(self, error: BaseException, *, mergeable: bool = True) -> None:
        pos = self.pos
        pos.status = "running" if mergeable else "blocked"
        await self._commit(
            {
                "type": "run_failed",
                "run": self.rt.run_id,
                "step": pos.step,
                "error": type(error).__name__,
                "message": str(error)[:2000],
                "mergeable": mergeable,
            }
        )

    async def run(self) -> AsyncIterator[StreamEvent]:
        finished = False
        try:
            async for event in self._supersteps():
                yield event
            finished = True
        except _Stop as stop:
            finished = True
            yield stop.event
        except GeneratorExit:
            await self._closed_early()
            raise
        finally:
            if not finished:
                for task in self.concurrent.inflight:
                    task.cancel()

    async def _closed_early(self) -> None:
        # The caller closed the stream: stop the tasks in flight and record where we stand.
        await self.concurrent.cancel()
        if self.pos.tasks:
            await self._commit(
                {
                    "type": "run_stopped",
                    "run": self.rt.run_id,
                    "step": self.pos.step,
                    "reason": "stream_closed",
                }
            )

    async def _supersteps(self) -> AsyncIterator[StreamEvent]:
        graph, rt = self.graph, self.rt
        pos = self.pos
        no_timeout = graph.timeout is None
        steps = 0
        first = True
        while pos.tasks:
            if steps >= graph.max_steps:
                error = RunLimitExceededError(
                    f"Graph '{graph.name}' needed more than max_steps={graph.max_steps} "
                    f"supersteps in one call; it stopped before step {pos.step}. Raise "
                    f"Graph(max_steps=...) if the run is meant to be this long, or check the "
                    f"flow for a loop that never ends. With a state store, invoke(None, "
                    f"thread_id=...) continues it.",
                    graph.max_steps,
                )
                await self._fail(error)
                raise error
            skip_before = first and self.continuing
            first = False
            if not skip_before and self.req.interrupt_before:
                hit = sorted({t.node for t in pos.tasks} & self.req.interrupt_before)
                if hit:
                    await self._breakpoint("interrupt_before", hit)
            step = pos.step
            self.last_step = step
            pending = pos.pending_tasks()
            lone = len(pos.tasks) == 1 and len(pending) == 1
            started = time.monotonic()
            if lone and not rt.in_step_events and no_timeout and self._inline(pending[0]):
                outcomes = [await run_task(rt, pending[0], step)]
            else:
                outcomes = []
                run = self.concurrent.run(pending, step, lone, outcomes, self.spent)
                async for event in run:
                    yield event
            self.spent += time.monotonic() - started
            for event in await self._complete_step(step, outcomes, lone):
                yield event
            steps += 1
            if self.req.interrupt_after and pos.tasks:
                hit = sorted(self._last_nodes & self.req.interrupt_after)
                if hit:
                    await self._breakpoint("interrupt_after", hit)
        pos.status = "idle"
        await self._commit({"type": "run_completed", "run": self.rt.run_id, "step": self.last_step})
        state = self.rt.schema.instance(pos.values)
        yield self._event(
            "final",
            FinalEventData(state, self.rt.thread_id),
            step=self.last_step,
            checkpoint_id=pos.event_id,
        )

    async def _breakpoint(self, reason: str, nodes: list[str]) -> None:
        pos = self.pos
        await self._commit(
            {
                "type": "run_stopped",
                "run": self.rt.run_id,
                "step": pos.step,
                "reason": reason,
                "nodes": nodes,
            }
        )
        raise _Stop(self._interrupt_event({}))

    def _interrupt_event(self, pending: dict[str, Interrupt]) -> StreamEvent:
        pos = self.pos
        data = InterruptEventData(self.rt.schema.instance(pos.values), self.rt.thread_id, pending)
        return self._event("interrupt", data, step=pos.step, checkpoint_id=pos.event_id)

    # -- one superstep --------------------------------------------------------------------

    async def _complete_step(
        self, step: int, outcomes: list[TaskOutcome], lone: bool
    ) -> list[StreamEvent]:
        """Fail, pause or merge the superstep; plan the next; return its after-step events."""
        pos, rt = self.pos, self.rt
        for outcome in outcomes:
            if outcome.error is not None:
                await self._fail(outcome.error)
                raise outcome.error
        paused = [o for o in outcomes if o.paused is not None]
        if paused:
            await self._pause(paused, step)

        results = [outcomes[0].result] if lone else [pos.done[t.task_id] for t in pos.tasks]
        results_: list[TaskResult] = [r for r in results if r is not None]
        try:
            merged = merge_results(rt.schema.channels, pos.values, results_, step)
        except InvalidUpdateError as error:
            await self._fail(error, mergeable=False)
            raise
        try:
            routes = self._routes(results_, merged)
        except Exception as error:
            if lone:
                # Keep the finished task, in the history too, so a continuation (from this
                # process's cache or from the store) resolves its routes again without
                # running it again.
                pos.done[results_[0].task_id] = results_[0]
                await self._commit(finished_record(step, results_[0]))
            await self._fail(error)
            raise
        record = superstep_record(step, results_, routes, lone) if self.writer else None
        pos.values = merged
        pos.tasks = plan_tasks(routes)
        pos.step = step + 1
        pos.status = "running" if pos.tasks else "idle"
        pos.done, pos.interrupts, pos.answers, pos.caches = {}, {}, {}, {}
        checkpoint_id = await self._commit(record) if record is not None else None
        self._last_nodes = {r.node for r in results_}
        return after_step_events(
            self.want, rt.run_id, step, results_, routes, merged, checkpoint_id
        )

    def _inline(self, task: PlannedTask) -> bool:
        """Tell whether a lone task may run on the loop's thread (see ``engine.tasks``)."""
        node = self.rt.nodes.get(task.node)
        return node is None or node.is_async or node.timeout is None

    async def _pause(self, paused: list[TaskOutcome], step: int) -> None:
        pos, rt = self.pos, self.rt
        pending = {o.paused.key: o.paused for o in paused if o.paused is not None}
        try:
            caches = {
                o.task.task_id: rt.cache_json(o.task.task_id, o.cache) for o in paused if o.cache
            }
        except StateStoreError as error:
            await self._fail(error)
            raise
        pos.status = "paused"
        pos.interrupts = {k: i.to_json() for k, i in pending.items()}
        pos.caches = caches
        record: Record = {
            "type": "run_paused",
            "run": rt.run_id,
            "step": step,
            "interrupts": list(pos.interrupts.values()),
        }
        if caches:
            record["caches"] = caches
        await self._commit(record)
        raise _Stop(self._interrupt_event(pending))

    def _routes(self, results: list[TaskResult], merged: dict[str, Any]) -> list[list[Route]]:
        state: Any = None
        out: list[list[Route]] = []
        rt = self.rt
        for result in results:
            if result.node not in rt.nodes:
                # Its routes belong to the superstep; dropping them would lose its successors.
                raise rt.missing_node_error(result.node)
            if result.goto is not None:
                out.append(result.goto)
                continue
            edge = self.graph.edges.get(result.node)
            if isinstance(edge, str):
                out.append([edge])
                continue
            if state is None:
                state = rt.schema.instance(merged)
            out.append(rt.edge_routes(result.node, state))
        return out
