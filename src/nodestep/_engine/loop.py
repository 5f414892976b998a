"""The run loop: supersteps until no task is left, each one recorded as history events.

One superstep:

1. **Plan** (done by the previous superstep): the tasks, in scheduling order.
2. **Execute** (``_engine.step_tasks``): every task that has not finished runs on its own
   copy of the state. In a superstep with several tasks, each finished task is recorded
   (``task_finished``) as soon as it ends, so a later call continues without running it
   again.
3. **Update**: the writes merge in scheduling order (node name, then task index), then
   each task's routes resolve on the merged state, and the next superstep is planned from
   them. One ``superstep_completed`` event records it.

The position moves only by the records the loop makes (``HistoryRecord.advance``), stored
or not, so a load of the stored records gives the position the run had. The loop is
written once, async, on anyio; ``invoke`` and ``stream`` drive it from sync code.
"""

from __future__ import annotations

import time
from functools import partial
from typing import Any

import anyio

from nodestep._engine.compiled import CompiledGraph
from nodestep._engine.interrupts import Interrupt
from nodestep._engine.lease import ThreadHold, stopping, take_thread
from nodestep._engine.middleware_nodes import Ending, run_with_hooks
from nodestep._engine.observe import run_watch
from nodestep._engine.positions import load_position
from nodestep._engine.redact import stored_error
from nodestep._engine.request import RunRequest
from nodestep._engine.request_keys import keyed_call
from nodestep._engine.results import FinalEventData, InterruptEventData, StreamEvent
from nodestep._engine.runtime import Runtime
from nodestep._engine.step_events import EventSink, after_step_events
from nodestep._engine.step_tasks import StepTasks
from nodestep._engine.subagents import SubAgents
from nodestep._engine.tasks import TaskOutcome, raisable, run_plain_task, run_task
from nodestep._engine.turns import Turn, open_turn
from nodestep._engine.writer import HistoryWriter
from nodestep._errors import (
    GraphConfigError,
    InvalidUpdateError,
    RunLimitExceededError,
    StateStoreError,
    ThreadBusyError,
    UnknownThreadError,
)
from nodestep._ids import new_id, system_clock
from nodestep._state.json import to_json_value
from nodestep._superstep.merge import merge_results
from nodestep._superstep.position import Failure, PlannedTask, Position, Route, TaskResult
from nodestep._superstep.private import check_private
from nodestep._superstep.records import (
    HistoryRecord,
    RunCompleted,
    RunFailed,
    RunPaused,
    RunStopped,
    SuperstepCompleted,
    TaskFinished,
)
from nodestep.store import StateStore

__all__ = ["execute"]


async def execute(graph: CompiledGraph, req: RunRequest, sink: EventSink) -> StreamEvent:
    """Run the graph for one call, sending the events asked for to ``sink``.

    With a store, the call holds its thread branch from before it reads it until it ends
    (``_engine.lease``), so no other writer's records land between its own; a call whose
    graph remembers the branch's position takes it with its first records, checked
    against that position (``_opened_from_cache``). A call with a
    ``request_key`` the branch already has is a retry (``_engine.request_keys``).

    Returns:
        The terminal event: ``"final"``, or ``"interrupt"`` when the run paused or stopped
        at a breakpoint.

    Raises:
        ThreadBusyError: another writer holds the thread; nothing was stored.
    """
    if graph.middleware:  # the run hooks (``_engine.middleware_nodes``) around the call
        return await run_with_hooks(
            graph.middleware, graph.name, req, partial(_execute, graph, req, sink)
        )
    return await _execute(graph, req, sink)


async def _execute(
    graph: CompiledGraph, req: RunRequest, sink: EventSink, ending: Ending | None = None
) -> StreamEvent:
    store = req.store
    if store is None:
        thread_id = req.thread_id if req.thread_id is not None else graph.hex_id()
        return await _run(graph, req, sink, thread_id, None, None, ending=ending)
    thread_id = _stored_thread_id(graph, req)
    run_id = graph.hex_id()
    hold: ThreadHold | None = None
    opened = _opened_from_cache(graph, req, store, thread_id, run_id)
    if opened is not None:
        hold, stored = await _take_opening(graph, req, opened, run_id)
        if not stored:
            opened = None  # the branch moved on, or is busy: read it under the lease
    if hold is None:
        hold = await take_thread(
            store, thread_id, req.branch_id, run_id, graph.lease_ttl, req.wait_for_thread
        )
    try:
        hold.keep_alive()
        if opened is not None:
            return await _run(graph, req, sink, thread_id, None, hold, run_id, opened, ending)
        pos = await _load(graph, req, thread_id)
        if req.request_key is not None:
            keyed = await keyed_call(graph, req, thread_id, pos)
            if isinstance(keyed, StreamEvent):
                return keyed
            req = keyed
        return await _run(graph, req, sink, thread_id, pos, hold, run_id, ending=ending)
    finally:
        await hold.release()


def _opened_from_cache(
    graph: CompiledGraph, req: RunRequest, store: StateStore, thread_id: str, run_id: str
) -> tuple[Turn, HistoryWriter] | None:
    """Open the call's turn from the branch's cached position, before taking the branch.

    Why: a run that knows where its branch stands (its graph wrote it last) can take the
    lease with its first records, in one store call (``HistoryWriter.commit_taking``),
    instead of taking it, reading the branch's last sequence and then appending: on
    SQLite one write transaction and one read less a run (a turn of W10's agent: 5
    transactions → 4). The append is checked against the cached position's sequence
    number, so a branch that moved on meanwhile stores nothing, and the call goes the
    usual way under the lease it took. A branch without a cached position is opened as
    a new thread where ``_may_guess_new`` allows. ``None``: the usual way from the start
    (no position to open from, a ``request_key`` to look up, or a call the position
    refuses, which is then decided again from the stored one).
    """
    if req.request_key is not None:
        return None
    pos = graph.positions.newest(store, graph.schema, thread_id, req.branch_id)
    if pos is None and not _may_guess_new(graph, req, store):
        return None
    try:
        turn = open_turn(graph, pos, req, thread_id, run_id)
    except Exception:  # e.g. ResumeError: the stored position decides, under the lease
        return None
    return turn, _writer(graph, req, store, thread_id, turn, None)


def _may_guess_new(graph: CompiledGraph, req: RunRequest, store: StateStore) -> bool:
    """Whether a call on a branch the graph holds no position of may open it as new.

    Why: a new conversation is the common case of a thread the graph has not seen, and
    opening it as new lets its first records take the lease (one store call, checked
    against an empty branch) where the usual way takes the lease, reads the branch and
    then appends: on SQLite a transaction and a read less a conversation (W10's agent:
    a third of each per turn, in 3-turn conversations). A branch that has records
    (the graph's cache forgot it, or another graph or process wrote it) stores nothing,
    and the call goes on the usual way under the lease it took. Only ``main``, which a
    first input creates (another branch only a fork does), in a store whose history is
    never replaced (as ``PositionCache.newest``), and with the graph's own ids and clock:
    records refused so use up ids and clock readings, which an injected factory or clock
    is there to keep reproducible.
    """
    return (
        req.branch_id == "main"
        and store.generation is None
        and graph.new_id is new_id
        and graph.clock is system_clock
    )


async def _take_opening(
    graph: CompiledGraph, req: RunRequest, opened: tuple[Turn, HistoryWriter], run_id: str
) -> tuple[ThreadHold | None, bool]:
    """Take the branch with the turn's first records; return the hold and if they were stored.

    Raises:
        ThreadBusyError: another writer holds the branch, and the call does not wait.
    """
    turn, writer = opened
    try:
        return await writer.commit_taking(turn.records, run_id, graph.lease_ttl)
    except ThreadBusyError:
        store, thread_id = writer.store, writer.thread_id
        if not req.wait_for_thread and not stopping(store, thread_id, req.branch_id):
            raise
        return None, False  # ``take_thread`` waits for it


async def _run(
    graph: CompiledGraph,
    req: RunRequest,
    sink: EventSink,
    thread_id: str,
    pos: Position | None,
    hold: ThreadHold | None,
    run_id: str | None = None,
    opened: tuple[Turn, HistoryWriter] | None = None,
    ending: Ending | None = None,
) -> StreamEvent:
    """Open the call's turn, store its first records, and run its supersteps.

    ``opened``: the turn and its writer, its first records already stored (taken with the
    lease, ``_opened_from_cache``). ``ending``: the run hooks called before the run
    completes (``_engine.middleware_nodes``).
    """
    run_id = run_id or graph.hex_id()
    writer: HistoryWriter | None = None
    if opened is None:
        turn = open_turn(graph, pos, req, thread_id, run_id)
    else:
        turn, writer = opened
    watch = run_watch(graph.name, thread_id, req.branch_id, run_id)
    if watch is not None:
        watch.masked = partial(stored_error, context=req.context, redact=graph.redact)
        watch.started(turn.continuing)
    if req.store is not None and writer is None:
        writer = _writer(graph, req, req.store, thread_id, turn, hold)
        try:
            await writer.commit(turn.records)
        except BaseException as error:
            if watch is not None:
                watch.raised(error)
            raise
    if writer is not None:
        writer.may_pipe = not req.modes  # a stream's events wait for their records' answers
    runtime = Runtime(graph, req, run_id=run_id, thread_id=thread_id, writer=writer, pos=turn.pos)
    runtime.agents = SubAgents(runtime, execute)
    if watch is not None:
        runtime.watch, watch.masked = watch, runtime.stored_error
    try:
        event = await RunLoop(runtime, req, turn.continuing, sink, ending).run()
    except BaseException as error:
        if writer is not None:
            await writer.settle(error)
        if watch is not None:
            watch.raised(error)
        raise
    else:
        if writer is not None:
            await writer.settle()
        if watch is not None:
            watch.ended("completed" if event.mode == "final" else "paused")
        return event
    finally:
        if writer is not None and writer.in_sync:
            graph.positions.put(writer.store, graph.schema, thread_id, req.branch_id, writer.pos)


def _writer(
    graph: CompiledGraph,
    req: RunRequest,
    store: StateStore,
    thread_id: str,
    turn: Turn,
    hold: ThreadHold | None,
) -> HistoryWriter:
    """Return the writer of the call's records in ``store``."""
    return HistoryWriter(
        store,
        graph.schema,
        thread_id,
        req.branch_id,
        turn.pos,
        graph.new_id,
        graph.clock,
        hold,
        req.request_key,  # None for a keyed retry: its key is stored (``keyed_call``)
    )


def _stored_thread_id(graph: CompiledGraph, req: RunRequest) -> str:
    """Return the call's thread id, which a call with a store must give.

    Raises:
        GraphConfigError: the call has no ``thread_id``.
    """
    if req.thread_id is None:
        raise GraphConfigError(
            f"Graph '{graph.name}' runs with a state store, so every call needs a "
            f"thread_id, e.g. invoke(input, thread_id='order-42')."
        )
    return req.thread_id


async def _load(graph: CompiledGraph, req: RunRequest, thread_id: str) -> Position | None:
    """Return the thread's stored position (``None``: no history).

    Raises:
        UnknownThreadError: the call names a branch the thread does not have.
    """
    store = req.store
    if store is None:  # pragma: no cover - only calls with a store load
        return None
    pos = await load_position(store, graph.schema, thread_id, req.branch_id, cache=graph.positions)
    if pos is None and req.branch_id != "main":
        raise UnknownThreadError(
            f"Thread '{thread_id}' has no branch '{req.branch_id}'. Create it with "
            f"fork(thread_id, from_=event_id, name='{req.branch_id}').",
            thread_id=thread_id,
            branch_id=req.branch_id,
        )
    return pos


class RunLoop:
    """One call's supersteps.

    ``ending``, when given, is called when the run is about to complete, before
    ``run_completed`` is stored; what it raises fails the run (``_end``).
    """

    def __init__(
        self,
        runtime: Runtime,
        req: RunRequest,
        continuing: bool,
        sink: EventSink,
        ending: Ending | None = None,
    ):
        self.runtime = runtime
        runtime.sink = sink
        self.graph = runtime.graph
        self.schema = runtime.schema
        self.req = req
        self.pos = runtime.pos
        self.continuing = continuing
        self.sink = sink
        self.tasks = StepTasks(runtime, self._fail, sink)
        self.spent = 0.0
        self.last_step = self.pos.step
        self.completed = False  # ``run_completed`` recorded
        self.ending = ending

    async def run(self) -> StreamEvent:
        """Run supersteps until the run completes, pauses or stops; return its last event.

        A cancellation from outside (a cancel scope, a closed stream) records
        ``run_stopped`` before it propagates, so the unfinished superstep can be continued.
        """
        try:
            return await self._supersteps()
        except anyio.get_cancelled_exc_class():
            with anyio.CancelScope(shield=True):
                await self._stopped(self.sink.stop_reason)
            raise

    async def _record(self, record: HistoryRecord) -> str | None:
        """Advance the position with ``record``, then store it; return its event id."""
        record.advance(self.schema, self.pos)
        writer = self.runtime.writer
        return None if writer is None else await writer.commit([record])

    async def _fail(
        self, error: BaseException, *, mergeable: bool = True, task: PlannedTask | None = None
    ) -> None:
        """Record ``run_failed``: ``task`` is the failing task, ``None`` for the superstep.

        The stored message has the context's secrets masked and passed the graph's
        ``redact=`` (see ``_engine.redact``); ``error`` itself is left as it is.
        """
        runtime = self.runtime
        name, message = runtime.stored_error(error)
        run_id, step = runtime.run_id, self.pos.step
        node, task_id = (None, None) if task is None else (task.node, task.task_id)
        failure = Failure(step, name, message, node, task_id)
        await self._record(RunFailed(run_id, failure, mergeable))

    async def _stopped(self, reason: str) -> None:
        writer = self.runtime.writer
        if self.pos.tasks and (writer is None or writer.in_sync):
            await self._record(RunStopped(self.runtime.run_id, self.pos.step, reason))

    async def _supersteps(self) -> StreamEvent:
        pos, graph, runtime = self.pos, self.graph, self.runtime
        before, after = self.req.interrupt_before, self.req.interrupt_after
        timed = graph.timeout is not None
        watch = runtime.watch
        limit = self.req.max_steps or graph.max_steps
        steps = 0
        while pos.tasks:
            if steps >= limit:
                error = self._limit_error()
                await self._fail(error)
                raise error
            if before and not (steps == 0 and self.continuing):
                hit = sorted({t.node for t in pos.tasks} & before)
                if hit:
                    return await self._breakpoint("interrupt_before", hit)
            step = self.last_step = pos.step
            if steps == 0 and self.continuing:
                await self._check_nodes()
            pending = pos.pending_tasks() if pos.done else pos.tasks
            single_task = len(pending) == 1 and len(pos.tasks) == 1
            if watch is not None:
                watch.superstep(step, [t.node for t in pending])
            started = time.monotonic() if timed else 0.0
            runner = self.tasks
            done: TaskResult | TaskOutcome | None = None
            if single_task and runner.direct and runner.inline(pending[0]):  # the common case
                task = pending[0]
                if runner.plain(task):  # no coroutine for a plain ``def`` node
                    done = run_plain_task(runtime, task, step)
                else:
                    done = await run_task(runtime, task, step)
                outcomes = [done] if isinstance(done, TaskOutcome) else []
            else:
                outcomes = await runner.run(pending, step, single_task, self.spent)
            if timed:  # the graph's timeout counts time inside supersteps only
                self.spent += time.monotonic() - started
            results: list[TaskResult] | StreamEvent
            if isinstance(done, TaskResult):  # no outcome, no ``_results`` coroutine
                results = [done]
            elif single_task and outcomes[0].result is not None:
                results = [outcomes[0].result]
            else:
                results = await self._results(step, outcomes, single_task)
            if not isinstance(results, list):
                return results  # paused
            stored = await self._complete_step(step, results, single_task)
            if watch is not None:
                watch.step_done(step, stored or pos.event_id)
            steps += 1
            if after and pos.tasks:
                hit = sorted({r.node for r in results} & after)
                if hit:
                    return await self._breakpoint("interrupt_after", hit)
        if not self.completed:  # else stored with the last superstep (``_complete_step``)
            await self._end()
        data = FinalEventData(self.schema.instance(pos.values), runtime.thread_id)
        return self._terminal("final", data, self.last_step)

    async def _end(self) -> None:
        """Call the run's end hooks (``ending``), then record ``run_completed``.

        A hook that raises fails the run instead: ``run_failed`` records its error, with
        no task left to run, so ``invoke(None, thread_id=...)`` ends the run again.
        """
        if self.ending is not None:
            try:
                await self.ending(self.schema.instance(self.pos.values), self.runtime.thread_id)
            except Exception as error:
                await self._fail(error)
                raise
        await self._record(RunCompleted(self.runtime.run_id, self.last_step))

    def _limit_error(self) -> RunLimitExceededError:
        graph, limit = self.graph, self.req.max_steps
        where = "Graph(max_steps=...)" if limit is None else "the call's max_steps="
        limit = limit or graph.max_steps
        return RunLimitExceededError(
            f"Graph '{graph.name}' needed more than max_steps={limit} "
            f"supersteps in one call; it stopped before step {self.pos.step}. Raise "
            f"{where} if the run is meant to be this long, or check the "
            f"flow for a loop that never ends. With a state store, invoke(None, "
            f"thread_id=...) continues it.",
            limit,
        )

    def _terminal(self, mode: str, data: Any, step: int) -> StreamEvent:
        run_id = self.runtime.run_id
        return StreamEvent(mode, data, step=step, run_id=run_id, checkpoint_id=self.pos.event_id)

    async def _breakpoint(self, reason: str, nodes: list[str]) -> StreamEvent:
        pos = self.pos
        await self._record(RunStopped(self.runtime.run_id, pos.step, reason, nodes))
        return self._interrupt_event({})

    def _interrupt_event(self, pending: dict[str, Interrupt]) -> StreamEvent:
        pos = self.pos
        state = self.schema.instance(pos.values)
        return self._terminal(
            "interrupt", InterruptEventData(state, self.runtime.thread_id, pending), pos.step
        )

    # -- one superstep --------------------------------------------------------------------

    async def _results(
        self, step: int, outcomes: list[TaskOutcome], single_task: bool
    ) -> list[TaskResult] | StreamEvent:
        """Return the superstep's results in scheduling order, or pause, or fail.

        Returns:
            The results, or the terminal event when tasks paused.

        Raises:
            BaseException: the first task error in scheduling order (``run_failed`` is
                recorded first).
        """
        if single_task:
            outcome = outcomes[0]
            if outcome.result is not None:
                return [outcome.result]
        for outcome in outcomes:
            if outcome.error is not None:
                await self._fail(outcome.error, task=outcome.task)
                raise raisable(outcome.error, outcome.task)
        paused = [o for o in outcomes if o.paused is not None]
        if paused:
            return await self._pause(paused, step)
        pos = self.pos
        return [pos.done[t.task_id] for t in pos.tasks]

    async def _complete_step(
        self, step: int, results: list[TaskResult], single_task: bool
    ) -> str | None:
        """Merge the superstep, resolve its routes, plan the next; send its events.

        Returns the stored ``superstep_completed``'s id (``None`` without a store): after
        the run's last superstep ``pos`` already stands at its ``run_completed``.
        """
        pos = self.pos
        try:
            merged = merge_results(self.schema.channels, pos.values, results, step)
            if not single_task:
                check_private(results, step)
        except InvalidUpdateError as error:
            await self._fail(error, mergeable=False)
            raise
        try:
            routes = self._routes(results, merged)
        except Exception as error:
            await self._routes_failed(step, results, single_task, error)
            raise
        if single_task:  # the common case, without the loops below
            task_id = results[0].task_id
            record = SuperstepCompleted(step, {task_id: routes[0]}, {task_id: results[0]}, merged)
        else:
            by_task = {r.task_id: rs for r, rs in zip(results, routes, strict=True)}
            record = SuperstepCompleted(step, by_task, {}, merged)
        # ``_record``, inline: one coroutine less on every superstep
        record.advance(self.schema, pos)
        runtime = self.runtime
        writer = runtime.writer
        if writer is None:
            checkpoint_id = None
        elif pos.tasks or writer.hold is None or self.ending is not None:
            # A subgraph's writer holds no lease; run hooks come before ``run_completed``.
            checkpoint_id = await writer.commit([record])
        else:  # the run's last superstep: stored with its ``run_completed`` and the release
            completed = RunCompleted(runtime.run_id, step)
            completed.advance(self.schema, pos)
            checkpoint_id = await writer.commit_last([record, completed])
            self.completed = True
        if runtime.modes:
            for event in after_step_events(
                runtime.modes,
                runtime.run_id,
                step,
                results,
                routes,
                merged,
                checkpoint_id,
                runtime.schema,
            ):
                await self.sink.send(event)
        return checkpoint_id

    async def _check_nodes(self) -> None:
        """Refuse a stored superstep that names a node the graph no longer has.

        Why before any task runs: a finished task's routes, or a pending task, of that node
        would fail the superstep only after its other tasks ran, their side effects done
        for a superstep that cannot end. Only a stored superstep can name such a node; a
        planned one names the graph's own.
        """
        nodes = self.runtime.nodes
        missing = next((t.node for t in self.pos.tasks if t.node not in nodes), None)
        if missing is not None:
            error = self.runtime.missing_node_error(missing)
            await self._fail(error)
            raise error

    async def _routes_failed(
        self, step: int, results: list[TaskResult], single_task: bool, error: Exception
    ) -> None:
        """Record that the superstep's routes could not be resolved (``error``)."""
        if single_task:
            # Keep the finished task, in the history too, so a continuation (from this
            # process's cache or from the store) resolves its routes again without
            # running it again.
            await self._record(TaskFinished(step, results[0]))
            await self._fail(error, task=self.pos.tasks[0])
        else:
            await self._fail(error)

    async def _pause(self, paused: list[TaskOutcome], step: int) -> StreamEvent:
        runtime = self.runtime
        pending = {i.key: i for o in paused if o.paused is not None for i in (o.paused, *o.more)}
        try:  # a paused task's ctx.cache is stored with the pause, as JSON data
            caches = {
                o.task.task_id: dict(
                    to_json_value(o.cache, what=f"ctx.cache of task '{o.task.task_id}'")
                )
                for o in paused
                if o.cache
            }
        except StateStoreError as error:
            await self._fail(error)
            raise
        interrupts = {key: i.to_json() for key, i in pending.items()}
        await self._record(RunPaused(runtime.run_id, step, interrupts, caches))
        return self._interrupt_event(pending)

    def _routes(self, results: list[TaskResult], merged: dict[str, Any]) -> list[list[Route]]:
        state: Any = None
        out: list[list[Route]] = []
        runtime = self.runtime
        static = runtime.router.static
        for result in results:
            if result.node not in runtime.nodes:
                # Its routes belong to the superstep; dropping them would lose its successors.
                raise runtime.missing_node_error(result.node)
            if result.goto is not None:
                out.append(result.goto)
                continue
            routes = static.get(result.node)
            if routes is not None:  # an edge that does not look at the state
                out.append(routes.copy())
                continue
            if state is None:
                state = self.schema.instance(merged)
            out.append(runtime.router.edge_routes(result.node, state, result))
        return out
