"""The caller's side: queue a run of a thread, then await or stream what it does.

``RunQueue.submit`` stores a job in the queue (PostgreSQL, through procrastinate) and
returns a ``RunTicket`` at once. The run's outcome is read where every run's outcome is,
in the thread's history, through the graph's state store: a ticket needs no channel back
from the worker, so it works from any process that can reach the queue and the store.
"""

from __future__ import annotations

import asyncio
import uuid
from collections.abc import AsyncIterator
from dataclasses import dataclass
from types import TracebackType
from typing import Any, Literal

import anyio

from nodestep import (
    Graph,
    GraphConfigError,
    GraphExecutionError,
    GraphTimeoutError,
    HistoryEvent,
    Resume,
    StateSnapshot,
    open_store,
)
from nodestep.workers._jobs import RunJob, import_graph
from nodestep.workers._queue_app import (
    TASK_NAME,
    ensure_schema,
    load_procrastinate,
    make_app,
    open_app,
    queue_failure,
)

__all__ = ["RunOutcome", "RunQueue", "RunTicket"]

_ENDS = frozenset({"run_completed", "run_paused", "run_failed", "run_stopped"})
_FINISHED = frozenset({"succeeded", "failed", "cancelled", "aborted"})
"""The queue statuses of a job that will do nothing more."""
_STATUS = {
    "run_completed": "completed",
    "run_paused": "interrupted",
    "run_failed": "failed",
    "run_stopped": "stopped",
}


@dataclass(frozen=True, slots=True)
class RunOutcome:
    """How a queued run ended.

    Attributes:
        status: ``"completed"``, ``"interrupted"`` (paused), ``"failed"`` or ``"stopped"``.
        snapshot: The thread's state at the run's last event (``snapshot.value``,
            ``snapshot.interrupts``, ``snapshot.error_message``...).
        run_id: The id of the run that ended, or ``None`` for a resume or continuation
            queued without a request key (by an older nodestep) whose thread had
            nothing left to run.
    """

    status: Literal["completed", "interrupted", "failed", "stopped"]
    snapshot: StateSnapshot[Any]
    run_id: str | None


class RunTicket:
    """A queued run: ``await ticket.result()`` or ``async for event in ticket.events()``."""

    def __init__(
        self,
        queue: RunQueue,
        job_id: int,
        job: RunJob,
        graph: Graph[Any],
        after: int,
        store: Any = None,
    ) -> None:
        self.job_id = job_id
        self.job = job
        self._queue = queue
        self._graph = graph
        self._store = store or graph.state_store
        self._after = after  # the branch's last sequence when the job was queued

    async def status(self) -> str:
        """Return the job's queue status: ``todo``, ``doing``, ``succeeded``, ``failed``..."""
        try:
            jobs = await self._queue.app.job_manager.list_jobs_async(id=self.job_id)
        except load_procrastinate().exceptions.AppNotOpen:
            raise GraphConfigError(_not_open(self._queue)) from None
        for found in jobs:
            return str(found.status)
        return "missing"

    async def cancel(self) -> bool:
        """Stop the run, wherever it is.

        A job no worker has taken yet never runs. A running one is cancelled in its worker
        (the queue's database tells the worker at once): its async nodes are cancelled, and
        ``run_stopped`` (reason ``"cancelled"``) is stored where it stopped, so ``result()``
        says ``"stopped"`` and a continuation (``submit(graph, thread_id)``, or
        ``invoke(None, thread_id=...)``) goes on from there. A plain ``def`` node running in
        a worker thread cannot be stopped: it runs to its end, and its result is dropped.
        The worker goes on serving other jobs.

        Returns:
            Whether the job was still waiting or running; ``False`` once it had ended.
        """
        manager = self._queue.app.job_manager
        try:
            return bool(await manager.cancel_job_by_id_async(self.job_id, abort=True))
        except load_procrastinate().exceptions.AppNotOpen:
            raise GraphConfigError(_not_open(self._queue)) from None

    async def result(self, *, timeout: float = 60.0, poll: float = 0.05) -> RunOutcome:
        """Wait for the run to end and return how it ended.

        Raises:
            GraphTimeoutError: it did not end within ``timeout`` seconds (it goes on).
            GraphExecutionError: the job ended without a stored run end: it failed before
                its run started (e.g. a graph that cannot be imported where the worker
                runs), or was cancelled before; its error says which.
        """
        with anyio.move_on_after(timeout):
            while True:
                status = await self.status()
                if status in _FINISHED:
                    outcome = await self._outcome(status)
                    if outcome is not None:
                        return outcome
                    raise GraphExecutionError(self._no_run(status))
                await anyio.sleep(poll)
        raise GraphTimeoutError(
            f"Queued run of thread '{self.job.thread_id}' (job {self.job_id}) did not end "
            f"within {timeout:g} s; it goes on. Wait again, or check that a worker serves "
            f"queue '{self._queue.queue}'."
        )

    def _no_run(self, status: str) -> str:
        where = f"Queued job {self.job_id} on thread '{self.job.thread_id}'"
        if status in ("cancelled", "aborted"):
            return f"{where} was cancelled before its run started: nothing of it ran."
        return f"{where} ended '{status}' without storing a run; see the worker's log for why."

    async def events(
        self, *, timeout: float = 60.0, poll: float = 0.05
    ) -> AsyncIterator[HistoryEvent]:
        """Yield the run's history events as workers store them, ending with its end event.

        A run of input starts at its own ``run_started``. A resume or continuation starts
        at the first event stored after it was queued, so it also shows runs queued
        before it on the same thread that had not run yet.

        Raises:
            GraphTimeoutError: the run did not end within ``timeout`` seconds.
            GraphExecutionError: the job ended without storing a run (cancelled, or failed
                before its run started), as ``result()`` says.
        """
        deadline = anyio.current_time() + timeout
        store = self._store
        assert store is not None  # import_graph refuses graphs without a store
        seen = self._after
        waiting_for_start = self.job.request_key is not None
        ended: HistoryEvent | None = None  # an end event read while the job still ran
        while anyio.current_time() < deadline:
            if waiting_for_start:
                start = await self._start_seq()
                if start is None:
                    status = await self.status()
                    if status not in _FINISHED:
                        await anyio.sleep(poll)
                        continue
                    # The job ended: its run was stored just before, or never will be
                    # (cancelled, or failed before it started), which result() says too.
                    start = await self._start_seq()
                    if start is None:
                        raise GraphExecutionError(self._no_run(status))
                seen, waiting_for_start = start - 1, False
            records = await store.read(self.job.thread_id, self.job.branch_id, start=seen + 1)
            for record in records:
                seen = record["seq"]
                event = HistoryEvent.from_record(record)
                yield event
                if event.type in _ENDS:
                    if await self._ended(event):
                        return
                    ended = event
            if not records and await self.status() in _FINISHED:
                if ended is not None:
                    return  # the job finished after its last end event was read
                if not await store.read(self.job.thread_id, self.job.branch_id, start=seen + 1):
                    return  # cancelled while its worker was gone: the run has no end event
            await anyio.sleep(poll)
        raise GraphTimeoutError(
            f"Queued run of thread '{self.job.thread_id}' (job {self.job_id}) did not end "
            f"within {timeout:g} s; it goes on."
        )

    async def _ended(self, end: HistoryEvent) -> bool:
        """Whether ``end`` ends this job's run: its turn ended, or the job finished."""
        if end.type in ("run_completed", "run_paused") and self.job.request_key is not None:
            return True
        return await self.status() in _FINISHED

    async def _start_seq(self) -> int | None:
        store = self._store
        assert store is not None and self.job.request_key is not None
        return await store.find_request(
            self.job.thread_id, self.job.branch_id, self.job.request_key
        )

    async def _outcome(self, status: str) -> RunOutcome | None:
        """Return how the job's turn ended, read from the thread's history.

        A job's run (input, resume or continuation) is found by its request key, so the
        outcome is its own run's, however often the job was delivered. Its turn ends at the first
        ``run_completed`` or ``run_paused`` after it; a worker that died mid-turn leaves a
        gap, and the run that continued it (another run id) ends it. A failed or stopped
        turn ends at its last end event before the next queued input. A turn cancelled
        while its worker was gone (the job ``aborted``) has no end event: it stopped at its
        last one.
        """
        store = self._store
        assert store is not None
        thread, branch = self.job.thread_id, self.job.branch_id
        start = self._after + 1
        if self.job.request_key is not None:
            found = await self._start_seq()
            if found is None:
                return None
            start = found
        last: dict[str, Any] | None = None
        turn: list[dict[str, Any]] = []
        for record in await store.read(thread, branch, start=start):
            kind = record.get("type")
            if kind == "run_started" and record["seq"] > start and record.get("request"):
                break  # the next queued input: this turn ended before it
            turn.append(record)
            if kind in _ENDS:
                last = record
                if kind in ("run_completed", "run_paused"):
                    break
        if last is None and status == "aborted" and turn and self.job.request_key is not None:
            at = turn[-1]["id"]
            snap = await self._graph.get_state(thread, at, branch_id=branch, state_store=store)
            return RunOutcome("stopped", snap, turn[0].get("run"))
        if last is None:
            if self.job.request_key is not None:
                return None
            snap = await self._graph.get_state(thread, branch_id=branch, state_store=store)
            return RunOutcome("completed", snap, None)
        snap = await self._graph.get_state(thread, last["id"], branch_id=branch, state_store=store)
        return RunOutcome(_STATUS[last["type"]], snap, last.get("run"))  # type: ignore[arg-type]


def _not_open(queue: object) -> str:
    return (
        f"{queue!r} is not open: use it as 'async with RunQueue(dsn) as queue:', and queue "
        f"runs and await their tickets inside that block."
    )


def _check_names(thread_id: Any, branch_id: Any, request_key: Any) -> None:
    """Refuse ids a worker's run would refuse, while the caller can fix them."""
    for name, value, fix in (
        ("thread_id", thread_id, "Name the thread, e.g. thread_id='user-42'."),
        ("branch_id", branch_id, "Leave it out for the main branch, or pass a fork's id."),
        ("request_key", request_key, "Leave it out, or pass the id of the order it handles."),
    ):
        if (value is not None or name != "request_key") and (
            not isinstance(value, str) or not value
        ):
            raise GraphConfigError(f"{name} must be a non-empty string, got {value!r}. {fix}")


class RunQueue:
    """Queue runs of stored threads for workers on any machine (procrastinate on PostgreSQL).

    Use it as ``async with RunQueue(dsn) as queue:``; workers serve it with
    ``python -m nodestep.workers worker DSN`` (see ``docs/workers.md``).

    Args:
        dsn: The queue's PostgreSQL URL (it may be the database of the state store).
        queue: The queue's name; workers serve one or more names.
    """

    def __init__(self, dsn: str, *, queue: str = "nodestep") -> None:
        self.app = make_app(dsn)
        self._dsn = dsn
        self.queue = queue
        self._stores: dict[int, Any] = {}  # stores this queue opened on its loop
        self._by_url: dict[str, Any] = {}  # stores this queue opened by URL
        self._open = False

    def __repr__(self) -> str:
        return f"RunQueue(queue={self.queue!r})"  # not the URL: it may hold a password

    async def __aenter__(self) -> RunQueue:
        try:
            asyncio.get_running_loop()
        except RuntimeError:
            raise GraphConfigError(
                "RunQueue runs on asyncio (procrastinate and psycopg's pool need it); this "
                "event loop is not asyncio. Run the code that queues runs with asyncio.run "
                "or anyio.run(..., backend='asyncio')."
            ) from None
        await open_app(self.app, self._dsn)
        self._open = True
        return self

    async def __aexit__(
        self, kind: type[BaseException] | None, exc: BaseException | None, tb: TracebackType | None
    ) -> None:
        try:
            await self.app.close_async()
        finally:
            owned = [*self._stores.values(), *self._by_url.values()]
            stores = list({id(store): store for store in owned}.values())
            self._stores, self._by_url, self._open = {}, {}, False
            for store in stores:
                await store.aclose()

    def opened(self) -> Any:
        """Return the procrastinate app, refusing a queue used outside ``async with``."""
        if not self._open:
            raise GraphConfigError(_not_open(self))
        return self.app

    async def create_schema(self) -> bool:
        """Create the queue's tables in the database unless they exist; ``True`` if made.

        ``python -m nodestep.workers schema DSN`` does the same ahead of time.
        """
        return await ensure_schema(self.opened())

    async def submit(
        self,
        graph: str,
        thread_id: str,
        input: Any = None,
        *,
        resume: Resume | None = None,
        branch_id: str = "main",
        request_key: str | None = None,
        store: str | None = None,
    ) -> RunTicket:
        """Queue a run of ``thread_id`` on the graph at import path ``graph``.

        With ``input``, a run of new input; with ``resume=Resume(...)``, answers to the
        thread's interrupts; with neither, a continuation (``invoke(None)``). Every job
        carries ``request_key`` (or a new random key), so a redelivery never applies it
        twice. Runs of one thread run one at a time, in the order they were queued.

        ``store`` names, by URL, the state store the run goes on, for a graph that has
        none of its own (a served graph); each worker opens it.

        Raises:
            GraphConfigError: both input and resume, a graph that cannot be imported, an
                id that is not a non-empty string, or a queue not open (``async with``).
            StateUpdateError: ``input`` does not fit the graph's state (a field it does not
                have, a value of the wrong type); nothing was queued.
        """
        _check_names(thread_id, branch_id, request_key)
        self.opened()
        target = import_graph(graph, stored=store is None)
        if input is not None and resume is not None:
            raise GraphConfigError(
                "submit() takes input= or resume=, not both: a run either brings new input "
                "or answers the thread's interrupts."
            )
        fields: dict[str, Any] = {}
        key = request_key or f"queued-{uuid.uuid4()}"
        if input is not None:
            job = RunJob.of_input(
                target, graph, thread_id, branch_id, input, request_key=key, store=store
            )
        elif resume is not None:
            fields = RunJob.resume_fields(resume)
            job = RunJob(
                graph, thread_id, branch_id, "resume", **fields, request_key=key, store=store
            )
        else:
            job = RunJob(graph, thread_id, branch_id, "continue", request_key=key, store=store)
        held = target.state_store if store is None else self._url_store(store)
        assert held is not None
        if id(held) not in self._stores and hasattr(held, "aopen"):
            # PostgresStateStore: the tickets' reads use an async pool on this loop, with
            # no hop to a worker thread per statement
            await held.aopen()
            self._stores[id(held)] = held
        after = 0  # a run of input finds its start by its request key: no read needed
        if job.request_key is None:
            after = await held.last_sequence(thread_id, branch_id)
        job_id = await self._defer(job)
        return RunTicket(self, job_id, job, target, after, held)

    async def _defer(self, job: RunJob) -> int:
        """Put ``job`` in the queue, its thread's runs in order; return its id."""
        lock = f"thread:{len(job.thread_id)}:{job.thread_id}:{job.branch_id}"
        deferrer = self.app.configure_task(TASK_NAME, queue=self.queue, lock=lock)
        try:
            return int(await deferrer.defer_async(**job.to_kwargs()))
        except load_procrastinate().exceptions.ConnectorException as error:
            doing = f"Could not queue the run of thread '{job.thread_id}'"
            raise queue_failure(error, doing, job.request_key) from error

    def _url_store(self, url: str) -> Any:
        """Return the store at ``url``, opened once by this queue (and closed with it)."""
        if url not in self._by_url:
            self._by_url[url] = open_store(url)
        return self._by_url[url]
