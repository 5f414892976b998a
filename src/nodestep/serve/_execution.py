"""Run execution: one queue per thread, each run an anyio task of the server process.

A run is stored as ``pending`` before the request that made it is answered; the server's
task for its thread takes the thread's runs one at a time, oldest first, and runs each
through ``Graph.astream`` with the run id as its ``request_key``. Why the key: a server
that is killed mid-run leaves the run ``pending``, and the next server runs it again; the
key makes that a continuation of the same run in the history, never its input twice. The
store's lease on the thread keeps one writer even when several servers share a store.

Several servers on one store: each runs the runs it admitted (and, when it starts, the
runs a previous server left), in the order of the thread's runs across servers: a thread
whose oldest run belongs to another server waits for that run to end. A run of another
server is followed from the stored rows: its ``join`` answers once its row has ended,
with the thread's values.

A run with ``after_seconds`` holds its thread's queue until it is due (a cancel wakes the
queue). A run cancelled with ``rollback`` has its writes undone once it stopped, before
the thread's next run starts (``_roll_back``).
"""

from __future__ import annotations

import logging
import time
from collections import deque
from collections.abc import Callable
from dataclasses import replace
from typing import Any, Protocol

import anyio
from anyio.abc import TaskGroup

from nodestep import (
    Agent,
    Graph,
    NodestepError,
    Resume,
    RunLimitExceededError,
    UnknownThreadError,
)
from nodestep.memory import MemoryStore
from nodestep.serve._events import RunEvents
from nodestep.serve._registry import Registry, RunRow, ThreadRow
from nodestep.serve._shapes import interrupt_json, state_values
from nodestep.serve._stream import emit_event, emit_pause, paused, run_end, sent_text, with_sent
from nodestep.store import StateStore

__all__ = ["FOLLOW_EVERY", "KEPT_RUNS", "THREAD_WAIT", "Executor", "paused"]

_log = logging.getLogger("nodestep.serve")

_ACTIVE = frozenset({"pending", "running"})

KEPT_RUNS = 1000
"""How many ended runs keep their events in memory, for ``join`` and ``join_stream``."""

FOLLOW_EVERY = 0.05
"""Seconds between two reads of the stored rows while following another server's run."""

THREAD_WAIT = 3600.0
"""Seconds a run waits for a thread that a run of another server holds (its lease)."""

_ENGINE_MODES = {
    "values": ("values", "debug"),
    "updates": ("updates",),
    "messages-tuple": ("messages",),
    "messages": ("messages",),
    "custom": ("custom",),
    "debug": ("debug",),
    "events": ("debug", "messages"),
}


class Queue(Protocol):
    """Where runs go with ``--workers``: ``run`` queues one and waits for its end."""

    async def run(
        self, executor: Executor, run: RunRow, emit: Callable[[str, Any], None]
    ) -> tuple[dict[str, Any], bool]:
        """Run ``run`` elsewhere; return its values and whether it paused."""
        ...


class Executor:
    """Runs the stored runs of every thread; the app's lifespan holds its task group."""

    def __init__(
        self,
        graphs: dict[str, Graph[Any]],
        store: StateStore,
        registry: Registry,
        memory: MemoryStore | None = None,
        agents: dict[str, Agent] | None = None,
    ) -> None:
        self._graphs = graphs
        self._agents = agents or {}
        self._store = store
        self._memory = memory
        # With --workers: the queue, the store's URL and each graph's import path.
        self.queue: Queue | None = None
        self._registry = registry
        self._group: TaskGroup | None = None
        self._draining: set[str] = set()
        self._scopes: dict[str, anyio.CancelScope] = {}
        self.events: dict[str, RunEvents] = {}
        # The runs this server executes: those it admitted, and those left when it started.
        self._mine: set[str] = set()
        self._followed: set[str] = set()
        # The events of ended runs are kept for late joins, the most recent KEPT_RUNS only.
        self._ended: deque[str] = deque()
        # Runs whose end could not be stored: not run again by this server (a restart does).
        self._failed: set[str] = set()
        # Runs cancelled with action="rollback": their writes are undone when they stop.
        self._rollbacks: set[str] = set()
        # Threads whose queue waits for a run's after_seconds: set to wake it early.
        self._waiting: dict[str, anyio.Event] = {}
        # Ended runs of deleted threads (stateless runs), by run id, for a late join.
        self._kept: dict[str, RunRow] = {}
        # Why in memory only: a run's context is call-time data (keys, a user's session)
        # that nodestep never stores; a run continued by the next server runs without it.
        self.contexts: dict[str, dict[str, Any] | None] = {}

    def events_of(self, run_id: str) -> RunEvents:
        """Return a run's events (an empty, open list for a run not seen yet)."""
        return self.events.setdefault(run_id, RunEvents())

    def start(self, group: TaskGroup) -> None:
        """Take the task group runs start in, and continue the runs a server left."""
        self._group = group
        for run in self._registry.unfinished():
            self.submit(run)

    def thread_row(self, thread_id: str) -> ThreadRow:
        """Return the row of a thread a run of this server runs on."""
        return self._registry.threads[thread_id]

    def graph(self, graph_id: str) -> Graph[Any]:
        """Return the served graph named ``graph_id``."""
        return self._graphs[graph_id]

    def is_mine(self, run_id: str) -> bool:
        """Return whether this server executes the run (else another server does)."""
        return run_id in self._mine

    def follow(self, run: RunRow) -> RunEvents:
        """Return a run's events; for another server's run, end them when its row ends."""
        events = self.events_of(run.run_id)
        if run.run_id in self._mine or run.run_id in self._followed or events.finished.is_set():
            return events
        if self._group is None:
            return events
        self._followed.add(run.run_id)
        events.add("metadata", {"run_id": run.run_id, "attempt": 1})
        self._group.start_soon(self._follow, run, events)
        return events

    async def _follow(self, run: RunRow, events: RunEvents) -> None:
        try:
            while (row := self._registry.runs.get(run.run_id)) is not None and (
                row.status in ("pending", "running")
            ):
                await anyio.sleep(FOLLOW_EVERY)
                await self._registry.load()
            thread = self._registry.threads.get(run.thread_id)
            result: dict[str, Any] = {}
            if row is not None and row.status == "error" and thread and thread.error:
                result = {"__error__": thread.error}
                events.add("error", thread.error)
            elif thread is not None and row is not None:
                snapshot = await self._graphs[run.graph_id].get_state(
                    run.thread_id, branch_id=thread.branch, state_store=self._store
                )
                result = state_values(snapshot.value)
                events.add("values", result)
            events.end(result)
        finally:
            self._followed.discard(run.run_id)

    def submit(self, run: RunRow) -> RunEvents:
        """Queue a stored run on its thread; return its events."""
        self._mine.add(run.run_id)
        events = self.events.setdefault(run.run_id, RunEvents())
        if run.thread_id not in self._draining and self._group is not None:
            self._draining.add(run.thread_id)
            self._group.start_soon(self._drain, run.thread_id)
        return events

    def cancel(self, run_id: str, *, rollback: bool = False) -> bool:
        """Cancel a running run; return whether it was running here.

        ``rollback``: once it stops, undo its writes and delete its row (see ``_roll_back``).
        """
        scope = self._scopes.get(run_id)
        if scope is not None:
            if rollback:
                self._rollbacks.add(run_id)
            scope.cancel()
        return scope is not None

    def wake(self, thread_id: str) -> None:
        """Wake the thread's queue if it waits for a run's time: that run may be gone."""
        if (waiting := self._waiting.pop(thread_id, None)) is not None:
            waiting.set()

    def kept_run(self, run_id: str) -> RunRow | None:
        """Return an ended run whose thread was deleted with it (a stateless run), while
        its events are kept: a client that lost the connection may still join it."""
        return self._kept.get(run_id)

    def cancelled(self, run_id: str) -> bool:
        """Tell whether ``run_id``, running here, was cancelled by a request (``cancel``),
        not by the server stopping (which cancels the scopes around the run's own)."""
        scope = self._scopes.get(run_id)
        return scope is not None and scope.cancel_called

    async def _drain(self, thread_id: str) -> None:
        try:
            # No read of the rows before the first run: admitting it stored it after every
            # row before it, so the thread's older runs are known here already. A run that
            # waited behind others is checked afresh: another server may have cancelled it.
            first = True
            while runs := self._queued(thread_id):
                if not first and not (runs := await self._queued_afresh(thread_id)):
                    return
                first = False
                if runs[0].run_id in self._mine and (delay := _due(runs[0]) - time.time()) > 0:
                    await self._wait_due(thread_id, delay)  # after_seconds: then read afresh
                elif runs[0].run_id in self._mine:
                    await self._run(runs[0])
                else:  # another server's run goes first: wait for its row to end
                    await anyio.sleep(FOLLOW_EVERY)
                    await self._registry.load()
        finally:
            self._draining.discard(thread_id)

    async def _wait_due(self, thread_id: str, delay: float) -> None:
        """Wait ``delay`` seconds for the thread's next run, or until ``wake``."""
        waiting = self._waiting[thread_id] = anyio.Event()
        with anyio.move_on_after(delay):
            await waiting.wait()
        self._waiting.pop(thread_id, None)

    def _queued(self, thread_id: str) -> list[RunRow]:
        """Return the thread's active runs if one of them is this server's, else ``[]``."""
        for run_id in list(self._mine):  # ended elsewhere (cancelled, deleted) before it ran
            row = self._registry.runs.get(run_id)
            ended = row is None or (row.thread_id == thread_id and row.status not in _ACTIVE)
            if ended and run_id not in self._scopes:
                self._mine.discard(run_id)
                if not (events := self.events_of(run_id)).finished.is_set():
                    events.end({})  # else the cancel ended them, with the thread's values
        runs = [r for r in self._registry.active_runs(thread_id) if r.run_id not in self._failed]
        return runs if any(r.run_id in self._mine for r in runs) else []

    async def _queued_afresh(self, thread_id: str) -> list[RunRow]:
        await self._registry.load()
        return self._queued(thread_id)

    async def _run(self, run: RunRow) -> None:
        events = self.events.setdefault(run.run_id, RunEvents())
        events.add("metadata", {"run_id": run.run_id, "attempt": 1})
        # Shown, not stored: a stored run stays "pending" until it ends, so that a server
        # killed meanwhile leaves it for the next one to run.
        self._registry.remember(replace(run, status="running", updated_at=time.time()))
        result: dict[str, Any] = {}
        status, thread_status, error = "success", "idle", None
        started: tuple[str, int] | None = None  # the branch and its last record, for a rollback
        with anyio.CancelScope() as scope:
            self._scopes[run.run_id] = scope
            try:
                branch = self._registry.threads[run.thread_id].branch
                started = branch, await self._store.last_sequence(run.thread_id, branch)
                if self.queue is not None:
                    result, paused = await self.queue.run(self, run, events.add)
                else:
                    result, paused = await self._stream(run, events.add)
                if paused:
                    thread_status = "interrupted"
            except Exception as failure:  # a node's own error ends the run, not the server
                status = "error"
                result, error, thread_status = await self._run_failed(run, failure, started, events)
            finally:
                del self._scopes[run.run_id]
                self.contexts.pop(run.run_id, None)
        rollback = run.run_id in self._rollbacks
        self._rollbacks.discard(run.run_id)
        with anyio.CancelScope(shield=True):
            try:
                restored = None
                if scope.cancel_called:
                    status = "interrupted"
                    if rollback:
                        if started is None:  # stopped before it read: it wrote nothing
                            branch = self._registry.threads[run.thread_id].branch
                            started = branch, await self._store.last_sequence(run.thread_id, branch)
                        shown, thread_status = await self._roll_back(run, *started)
                        restored = started[0], shown
                    else:
                        thread_status = await self._stopped_status(run)
                await self._finish(run, status, thread_status, error, restored)
                if scope.cancel_called:  # as LangGraph answers a join: the thread's values
                    result = await self.values(run.graph_id, run.thread_id)
            except Exception:  # the store failed: the run stays pending, and a restart reruns it
                _log.exception("could not store the end of run %s", run.run_id)
                self._failed.add(run.run_id)
                self._registry.remember(run)  # as stored: pending
        events.end(result)
        self._mine.discard(run.run_id)
        self._ended.append(run.run_id)
        if run.temporary:  # as it ended: a client reconnecting asks its status first
            self._kept[run.run_id] = replace(run, status=status, updated_at=time.time())
        while len(self._ended) > KEPT_RUNS:
            ended = self._ended.popleft()
            self.events.pop(ended, None)
            self._kept.pop(ended, None)

    async def _stopped_status(self, run: RunRow) -> str:
        """Return the status of a cancelled run's thread: ``interrupted`` while tasks wait
        at its head (the superstep the run left unfinished, or an interrupt), else ``idle``.

        Why by the waiting tasks, as LangGraph's server sets it: the thread then reads as
        its state shows it, as after an ``update_state``, and a run without input goes on.
        """
        thread = self._registry.threads.get(run.thread_id)
        if thread is None or run.temporary:
            return "idle"
        try:
            snapshot = await self._graphs[run.graph_id].get_state(
                run.thread_id, branch_id=thread.branch, state_store=self._store
            )
        except UnknownThreadError:
            return "idle"
        return "interrupted" if snapshot.next else "idle"

    async def values(self, graph_id: str, thread_id: str) -> dict[str, Any]:
        """Return the values the thread shows now (``{}`` for a thread with no history)."""
        thread = self._registry.threads.get(thread_id)
        if thread is None:
            return {}
        try:
            snapshot = await self._graphs[graph_id].get_state(
                thread_id, branch_id=thread.branch, state_store=self._store
            )
        except UnknownThreadError:
            return {}
        return state_values(snapshot.value)

    async def _roll_back(self, run: RunRow, branch: str, before: int) -> tuple[str, str]:
        """Undo what a cancelled run wrote on ``branch`` after its record ``before``;
        return the branch the thread shows now and the thread's status.

        Why a fork rather than a deletion: a history is append-only (forks and time travel
        point into it), so the thread moves to a new branch forked at the record the run
        started from, and reads as it stood before the run; the run's records stay on the
        branch it leaves. A thread the run started (no record before it) holds only that
        run's records, and they are deleted, as LangGraph deletes a rolled back run's
        checkpoints. A thread that a newer run's ``checkpoint_id`` moved to a fork while
        this one stopped stays there: the run's records are on a branch it no longer shows.
        """
        graph = self._graphs[run.graph_id]
        moved = self._registry.threads.get(run.thread_id)
        if moved is not None and moved.branch != branch:
            return moved.branch, "idle"  # "busy" while that newer run waits (``_finish``)
        if await self._store.last_sequence(run.thread_id, branch) == before:
            shown = branch  # it wrote nothing
        elif before == 0:
            await graph.delete_thread(run.thread_id, state_store=self._store)
            return branch, "idle"
        else:
            at = await self._store.read(run.thread_id, branch, start=before, stop=before)
            fork = await graph.fork(
                run.thread_id, from_=at[-1]["id"], branch_id=branch, state_store=self._store
            )
            shown = fork.id
        try:
            snapshot = await graph.get_state(
                run.thread_id, branch_id=shown, state_store=self._store
            )
        except UnknownThreadError:
            return shown, "idle"
        return shown, "interrupted" if snapshot.interrupts else "idle"

    async def _run_failed(
        self, run: RunRow, failure: Exception, started: tuple[str, int] | None, events: RunEvents
    ) -> tuple[dict[str, Any], dict[str, Any] | None, str]:
        """Record a run's failure; return its result, the error the thread keeps, and the
        thread's status."""
        kind = getattr(failure, "kind", type(failure).__name__)  # a worker's: its own
        error = {"error": kind, "message": str(failure)}
        if isinstance(failure, RunLimitExceededError):
            error = _recursion_error(failure.max_steps)
        await self._agent_failed(run, f"{kind}: {failure}", started)
        events.add("error", error)
        if await self._still_waits(run, started):  # the error is the run's alone
            return {"__error__": error}, None, "interrupted"
        return {"__error__": error}, error, "error"

    async def _still_waits(self, run: RunRow, started: tuple[str, int] | None) -> bool:
        """Tell whether a failed run wrote nothing on a thread where interrupts wait.

        Such a run was refused before anything ran (new input on a paused thread): the
        thread waits for its answers as before, so it stays ``interrupted``, where a client
        that lists the threads waiting for a person finds it.
        """
        if started is None:
            return False
        branch, before = started
        try:
            if await self._store.last_sequence(run.thread_id, branch) != before:
                return False
            snapshot = await self._graphs[run.graph_id].get_state(
                run.thread_id, branch_id=branch, state_store=self._store
            )
        except NodestepError:  # no history, or the store failed: the run's error stands
            return False
        return bool(snapshot.interrupts)

    async def _agent_failed(
        self, run: RunRow, message: str, started: tuple[str, int] | None
    ) -> None:
        """Record an Agent's failed run in its nodes' records, as its ``step`` does
        (``message``: ``"<ErrorType>: <error>"``; ``started``: the branch and its last
        record when the run began).

        A run that wrote no record was refused before anything ran (a message sent to a
        paused conversation): as a refused ``step``, it records nothing. Why it matters:
        the nodes still "running" are then the paused ones, and recording the failure
        would mark them failed and drop the input they wait with.
        """
        agent = self._agents.get(run.graph_id)
        thread = self._registry.threads.get(run.thread_id)
        if agent is None or thread is None:
            return
        try:
            if started is not None:
                branch, before = started
                if await self._store.last_sequence(run.thread_id, branch) == before:
                    return
            await agent.record_failure(
                run.thread_id,
                message,
                context=self.contexts.get(run.run_id),
                branch_id=thread.branch,
                state_store=self._store,
            )
        except Exception:  # as a step: the records say running until the next step
            _log.exception("could not record the failure of run %s", run.run_id)

    async def _finish(
        self,
        run: RunRow,
        status: str,
        thread_status: str,
        error: dict[str, Any] | None,
        restored: tuple[str, str] | None = None,
    ) -> None:
        """Store the run's end (``restored``: after a rollback, the branch the run ran on and
        the one the thread shows instead; the run's row goes)."""
        if run.temporary:
            await self._graphs[run.graph_id].delete_thread(run.thread_id, state_store=self._store)

        def ended() -> list[RunRow | ThreadRow | tuple[str, str]]:
            # New rows, never the registry's own: a row changes only once it is stored.
            now = time.time()
            stored = self._registry.runs.get(run.run_id)
            # A cancel stored by another server while the run ran here stands.
            end = "interrupted" if stored and stored.status == "interrupted" else status
            changes: list[RunRow | ThreadRow | tuple[str, str]] = [
                ("run", run.run_id) if restored else replace(run, status=end, updated_at=now)
            ]
            thread = self._registry.threads.get(run.thread_id)
            if run.temporary:
                changes.append(("thread", run.thread_id))
            elif thread is not None:
                others = self._registry.active_runs(run.thread_id)
                busy = any(r.run_id != run.run_id for r in others)
                shown = "busy" if busy else thread_status
                # Unless a newer run's checkpoint_id has moved the thread to a fork since.
                branch = restored[1] if restored and thread.branch == restored[0] else thread.branch
                changes.append(
                    replace(thread, status=shown, error=error, branch=branch, updated_at=now)
                )
            return changes

        await self._registry.update(ended)

    async def _stream(
        self, run: RunRow, emit: Callable[[str, Any], None]
    ) -> tuple[dict[str, Any], bool]:
        graph = self._graphs[run.graph_id]
        kwargs = run.kwargs
        modes = _modes(kwargs.get("stream_mode", ["values"]))
        engine_modes = sorted({m for mode in modes for m in _ENGINE_MODES[mode]})
        thread = self._registry.threads[run.thread_id]
        shown_first = "values" not in modes
        chat = getattr(graph.schema.cls, "chat_messages", None)  # an Agent's conversation
        if kwargs.get("update") is not None:  # command.update: an edit, then the run goes on
            edited = await self.edit(graph, run, thread.branch, modes, emit)
            if edited is not None:
                return edited
        if kwargs.get("resume") is not None:
            kwargs, ended = await self.unanswerable(graph, run, thread.branch, modes, emit)
            if ended is not None:
                return ended
        sent = sent_text(self._agents.get(run.graph_id), kwargs.get("graph_input"))
        async for event in graph.astream(
            kwargs.get("graph_input"),
            stream_mode=engine_modes,
            subgraphs=bool(kwargs.get("stream_subgraphs")),
            thread_id=run.thread_id,
            branch_id=thread.branch,
            state_store=self._store,
            **_options(graph, kwargs, self.contexts.get(run.run_id), self._memory),
        ):
            if not shown_first and event.mode in ("final", "interrupt") and event.path is None:
                # No node ran (a pause before the first one): the state with the input
                # applied is still the first values event, as LangGraph sends it.
                shown_first = True
                emit("values", with_sent(state_values(event.data.state, chat), sent, chat))
            if event.mode == "final" and event.path is None:
                return state_values(event.data.state), False
            if event.mode == "interrupt" and event.path is None:
                pending = [interrupt_json(i) for i in event.data.interrupts.values()]
                emit_pause(event.data.state, pending, modes, emit, chat)
                return paused(state_values(event.data.state), pending), True
            first = event.mode == "debug" and event.path is None
            if not shown_first and first and event.data["type"] == "node_input":
                shown_first = True
                emit("values", with_sent(state_values(event.data["state"], chat), sent, chat))
            emit_event(event, modes, emit, run, chat)
        raise AssertionError("a nodestep stream ends with a final or interrupt event")

    async def edit(
        self,
        graph: Graph[Any],
        run: RunRow,
        branch: str,
        modes: list[str],
        emit: Callable[[str, Any], None],
    ) -> tuple[dict[str, Any], bool] | None:
        """Apply ``command.update``; return the run's end if nothing is left to run.

        Why an end here: a thread whose last run completed (or that waits for an answer)
        has nothing to continue, so the edit is the whole run, as in LangGraph.
        """
        kwargs = run.kwargs
        await graph.update_state(
            run.thread_id, kwargs["update"], branch_id=branch, state_store=self._store
        )
        if kwargs.get("resume") is not None or kwargs.get("graph_input") is not None:
            return None
        snapshot = await graph.get_state(run.thread_id, branch_id=branch, state_store=self._store)
        if snapshot.status not in ("idle", "paused"):
            return None
        return run_end(snapshot, modes, emit)

    async def unanswerable(
        self,
        graph: Graph[Any],
        run: RunRow,
        branch: str,
        modes: list[str],
        emit: Callable[[str, Any], None],
    ) -> tuple[dict[str, Any], tuple[dict[str, Any], bool] | None]:
        """Return the run's kwargs without ``resume`` when nothing waits for an answer,
        and the run's end when nothing is left to run either.

        Why not an error: LangGraph runs a ``command.resume`` on a thread with no pending
        interrupt as a run without input, which ends at once on a thread whose last run
        completed; a client that resumes twice (a retry, two tabs) must not put the
        thread in ``error``. Why at run time and not when the run is admitted: a resume
        queued behind a run that is about to pause answers that pause.
        """
        kwargs = run.kwargs
        try:
            snapshot = await graph.get_state(
                run.thread_id, branch_id=branch, state_store=self._store
            )
        except UnknownThreadError:
            return kwargs, ({}, False)
        if snapshot.interrupts:
            return kwargs, None
        if snapshot.status != "idle":  # an unfinished superstep: the run continues it
            return kwargs | {"resume": None}, None
        return kwargs, run_end(snapshot, modes, emit)


def _recursion_error(max_steps: int) -> dict[str, Any]:
    """Return the error of a run that reached its superstep limit, as LangGraph names it.

    Why LangGraph's name: a client of its SDK tells this failure by ``GraphRecursionError``.
    """
    limit = max_steps + 1
    return {
        "error": "GraphRecursionError",
        "message": (
            f"Recursion limit of {limit} reached: the run needed more than {max_steps} "
            f"supersteps (a recursion_limit of n runs n - 1) and stopped before the next "
            f"one. Send a higher config.recursion_limit if the run is meant to be this "
            f"long, or check the graph for a loop that never ends; a run without input "
            f"continues it."
        ),
    }


def _due(run: RunRow) -> float:
    """Return when the run may start: ``after_seconds`` after it was created."""
    after = run.kwargs.get("after_seconds")
    return run.created_at + after if isinstance(after, int | float) else 0.0


def _modes(stream_mode: Any) -> list[str]:
    return [stream_mode] if isinstance(stream_mode, str) else list(stream_mode)


def _options(
    graph: Graph[Any],
    kwargs: dict[str, Any],
    context: dict[str, Any] | None,
    memory: MemoryStore | None,
) -> dict[str, Any]:
    options: dict[str, Any] = {}
    if memory is not None:  # the nodes' ctx.memory is the store the /store endpoints serve
        options["memory"] = memory
    if kwargs.get("graph_input") is not None and kwargs.get("keyed", True):
        options["request_key"] = kwargs["run_id"]
    if kwargs.get("resume") is not None:
        resume = kwargs["resume"]
        options["resume"] = (
            Resume(answers=resume["answers"]) if "answers" in resume else Resume(resume["value"])
        )
    for name in ("interrupt_before", "interrupt_after"):
        nodes = kwargs.get(name)
        if nodes:
            options[name] = list(graph.nodes) if nodes == "*" else nodes
    if context is not None:
        options["context"] = context
    limit = (kwargs.get("config") or {}).get("recursion_limit")
    if limit is not None:  # LangGraph counts one step more (see _run_request.recursion_limit)
        options["max_steps"] = limit - 1
    options["wait_for_thread"] = THREAD_WAIT
    return options
