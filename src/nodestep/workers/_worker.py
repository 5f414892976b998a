"""The worker side: run queued runs, and hand the runs of a killed worker to a live one.

The queue delivers a job at least once. What keeps that safe is the store, not the queue:

* every job carries a request key, stored with its run's first record, so a redelivered
  job finds the key in the thread's history and returns, continues or does nothing
  (``request_key`` in the persistence docs) instead of applying its input twice,
  answering the thread's next interrupt with its old answers, or failing a continuation
  its first delivery finished;
* the thread's lease keeps two workers off one thread: a job that finds its thread held
  waits for it (``wait_for_thread``), and is retried later if the wait runs out;
* jobs of one thread carry the thread as their procrastinate ``lock``, so they run one at a
  time, in the order they were queued;
* a job whose run failed on a lost connection to its store (the database restarting,
  say) runs again at once, within the same delivery (``_again_after_outage``): the request
  key makes it continue the run the failed attempt started, or do nothing if that attempt
  stored its end. Not through the queue: a job waiting there for its retry no longer holds
  its thread's lock, and the thread's next job would run before it.

The database restarting does not stop a worker: it records a job's end again until the
database takes it (``_persisting``: a job whose end was never recorded would stay
``doing``, holding its thread's lock, while its worker lives), and starts serving again
after a lost connection ends procrastinate's loop (``run_worker``).

A worker killed mid-superstep stops sending heartbeats. Every worker looks for jobs whose
worker has been silent for ``stalled_after`` seconds and puts them back in the queue; the
job that picks one up waits for the dead run's lease to expire, then continues the thread:
tasks that finished before the kill do not run again.
"""

from __future__ import annotations

import contextlib
import logging
import math
from typing import Any

import anyio

from nodestep import (
    GraphConfigError,
    GraphExecutionError,
    StateStoreError,
    ThreadBusyError,
    ThreadConflictError,
    open_store,
)
from nodestep.workers._jobs import RunJob, import_graph
from nodestep.workers._queue_app import (
    NO_TABLES,
    TASK_NAME,
    has_schema,
    load_procrastinate,
    make_app,
    open_app,
)

__all__ = ["execute", "run_worker"]

logger = logging.getLogger("nodestep.workers")


async def execute(job: RunJob, *, wait_for_thread: float = 60.0) -> None:
    """Run one queued job to its end: completed, paused, or failed in a node.

    The job's request key makes a redelivery count once: the engine finds the key the
    first delivery stored, and returns that run's result, or continues it if unfinished.
    A resume or continuation queued without a key (by an older nodestep: ``submit`` now
    gives every job one) falls back to the thread's status for a resume: not paused means
    an earlier delivery applied it.

    Args:
        job: The queued run.
        wait_for_thread: Seconds to wait while another run holds the thread.

    Raises:
        ThreadBusyError: the thread stayed held; the queue retries the job later.
        GraphExecutionError: a node failed; recorded in the thread's history.
    """
    graph = import_graph(job.graph, stored=job.store is None)
    options: dict[str, Any] = {
        "thread_id": job.thread_id,
        "branch_id": job.branch_id,
        "wait_for_thread": wait_for_thread,
    }
    if job.store is not None:  # a job that names its store (a served graph has none)
        options["state_store"] = _URL_STORES[job.store]
    if job.kind == "input":
        await graph.ainvoke(job.run_input(graph), request_key=job.request_key, **options)
        return
    if job.request_key is not None:
        await graph.ainvoke(None, resume=job.resume(), request_key=job.request_key, **options)
        return
    if job.kind == "resume":  # a job queued before resumes carried keys: the status tells
        snap = await graph.get_state(
            job.thread_id, branch_id=job.branch_id, state_store=options.get("state_store")
        )
        if snap.status != "paused":  # the first delivery resumed it before it died
            if snap.status != "idle":
                await graph.ainvoke(None, **options)
            return
    await graph.ainvoke(None, resume=job.resume(), **options)


_URL_STORES: dict[str, Any] = {}
"""The stores that jobs name by URL, opened once per worker process."""


async def _open_url_store(url: str, opened: dict[int, Any]) -> None:
    """Open the store a job names by ``url``, once per worker process."""
    if url in _URL_STORES:
        return
    store = open_store(url)
    _URL_STORES[url] = store
    opened[id(store)] = store
    aopen = getattr(store, "aopen", None)
    if aopen is not None:
        await aopen()


async def _open_store(path: str, opened: dict[int, Any]) -> None:
    """Open the store of the graph at ``path`` on this event loop, once per store.

    A store with ``aopen`` (``PostgresStateStore``) then serves the worker's runs from an
    async pool on the worker's own loop, with no hop to a worker thread per statement.
    """
    store = import_graph(path).state_store
    aopen = getattr(store, "aopen", None)
    if aopen is None or id(store) in opened:
        return  # the other stores have nothing to open; the worker closes only what it opened
    opened[id(store)] = store
    await aopen()


_OUTAGE = 300.0
"""Seconds a worker keeps trying to record a job's end while the database is unreachable."""


def _connection_lost(error: BaseException) -> bool:
    """Tell whether procrastinate's ``error`` came from a lost or refused connection."""
    import psycopg

    cause = error.__cause__
    return isinstance(cause, psycopg.OperationalError) or isinstance(error, OSError)


def _persisting(app: Any) -> None:
    """Make ``app``'s worker record a job's end (or retry) again while the database is away.

    procrastinate records it once; if the database is restarting at that moment the job
    stays ``doing`` although it ended, and, its worker being alive, nothing puts it back:
    its thread's later jobs wait behind its lock for ever. Recording it again is safe: an
    attempt that failed stored nothing, and one whose answer was lost leaves the job
    finished, which the next attempt finds (an error that is not a lost connection), and
    then stops.
    """
    procrastinate = load_procrastinate()
    manager = app.job_manager
    for name in ("finish_job", "retry_job"):
        record = getattr(manager, name)

        async def again(*args: Any, _record: Any = record, **kwargs: Any) -> Any:
            deadline = anyio.current_time() + _OUTAGE
            tries = 0
            while True:
                try:
                    return await _record(*args, **kwargs)
                except procrastinate.exceptions.ConnectorException as error:
                    lost = _connection_lost(error)
                    if tries and not lost:
                        return None  # the lost answer of an earlier try: it is recorded
                    if not lost or anyio.current_time() > deadline:
                        raise
                tries += 1
                await anyio.sleep(min(0.1 * 2**tries, 2.0))

        setattr(manager, name, again)  # this app's own manager, made by make_app


def _register(app: Any, wait_for_thread: float, retry_wait: float, opened: dict[int, Any]) -> None:
    """Register the ``nodestep.run`` task on ``app``."""
    procrastinate = load_procrastinate()
    strategy = procrastinate.RetryStrategy(
        max_attempts=1000,
        wait=retry_wait,
        retry_exceptions={ThreadBusyError, ConnectionError, OSError},
    )

    @app.task(name=TASK_NAME, pass_context=True, retry=strategy)  # type: ignore[untyped-decorator]
    async def run(context: Any, **kwargs: Any) -> None:
        job = RunJob.from_kwargs(kwargs)
        if job.store is not None:
            await _open_url_store(job.store, opened)
        else:
            await _open_store(job.graph, opened)
        try:
            await _again_after_outage(job, wait_for_thread)
        except GraphExecutionError:
            # The failure is in the thread's history; retrying the job would not change
            # the node's mind, and invoke(None) continues it when the user decides to.
            logger.info("queued run of thread %r failed in a node", kwargs.get("thread_id"))
            raise


def _outage(error: BaseException) -> bool:
    """Tell whether a run's ``error`` came from a lost connection to its store.

    A conflict counts too: an append whose answer was lost, retried by the store, meets
    itself. Other store errors (a damaged record, say) would fail again: they go on up.
    """
    import psycopg

    if isinstance(error, ThreadBusyError) or not isinstance(error, StateStoreError):
        return False
    if isinstance(error, ThreadConflictError):
        return True
    cause: BaseException | None = error
    for _ in range(4):  # the chain of a store error is short: ours, then psycopg's
        cause = cause.__cause__ or cause.__context__ if cause is not None else None
        if isinstance(cause, psycopg.OperationalError | ConnectionError):
            return True
    return False


async def _again_after_outage(job: RunJob, wait_for_thread: float) -> None:
    """``execute`` the job; after a lost store connection, again, for up to ``_OUTAGE`` s."""
    deadline = anyio.current_time() + _OUTAGE
    tries = 0
    while True:
        try:
            await execute(job, wait_for_thread=wait_for_thread)
            return
        except StateStoreError as error:
            if not _outage(error) or anyio.current_time() > deadline:
                raise
            tries += 1
            logger.warning("run of thread %r lost its store (%s); again", job.thread_id, error)
        await anyio.sleep(min(0.1 * 2**tries, 2.0))


async def _recover_stalled(
    app: Any, queue: str, stalled_after: float, every: float
) -> None:  # pragma: no cover - runs until the worker stops; the kill test covers it
    """Put back the jobs of workers silent for ``stalled_after`` seconds, every ``every``."""
    while True:
        await anyio.sleep(every)
        with contextlib.suppress(Exception):  # the next round tries again
            jobs = await app.job_manager.get_stalled_jobs(
                queue=queue, task_name=TASK_NAME, seconds_since_heartbeat=stalled_after
            )
            cancelled = set(await app.job_manager.list_jobs_to_abort_async(queue=queue))
            for job in jobs:
                with contextlib.suppress(Exception):  # another worker was first
                    if job.id in cancelled:
                        # Cancelled while its worker was gone: it ends aborted, as its
                        # worker would have ended it (procrastinate's retry would say
                        # "failed", which a ticket reads as a failure).
                        status = load_procrastinate().jobs.Status.ABORTED
                        await app.job_manager.finish_job(job, status, delete_job=False)
                        logger.warning("job %s of a silent worker was cancelled", job.id)
                        continue
                    await app.job_manager.retry_job(job)
                    logger.warning("job %s of a silent worker is queued again", job.id)


async def _serve(app: Any, options: dict[str, Any], retry_wait: float) -> None:
    """Run procrastinate's worker loop; after a lost database connection, again."""
    procrastinate = load_procrastinate()
    while True:
        try:
            await app.run_worker_async(**options)
            return
        except procrastinate.exceptions.ConnectorException as error:
            if not _connection_lost(error):
                raise
            # The database went away (a restart): serve again once it is back. The jobs
            # this worker held are put back by _recover_stalled.
            logger.warning("lost the queue's database (%s); serving again", error)
            await anyio.sleep(retry_wait)


def _check_settings(
    concurrency: Any, heartbeat: Any, stalled_after: Any, wait_for_thread: Any, retry_wait: Any
) -> None:
    """Refuse settings that would make a worker serve nothing, or take live workers' jobs."""
    if isinstance(concurrency, bool) or not isinstance(concurrency, int) or concurrency < 1:
        raise GraphConfigError(
            f"concurrency (--concurrency) is how many jobs a worker runs at once, got "
            f"{concurrency!r}; pass a whole number of 1 or more."
        )
    for name, value, zero in (
        ("heartbeat", heartbeat, False),
        ("stalled_after", stalled_after, False),
        ("wait_for_thread", wait_for_thread, True),
        ("retry_wait", retry_wait, True),
    ):
        number = isinstance(value, int | float) and not isinstance(value, bool)
        if not number or not math.isfinite(value) or value < 0 or (value == 0 and not zero):
            flag = "" if name == "retry_wait" else f" (--{name.replace('_', '-')})"
            least = "of 0 or more" if zero else "above 0"
            raise GraphConfigError(
                f"{name}{flag} must be a number of seconds {least}, got {value!r}."
            )
    if stalled_after <= heartbeat:
        raise GraphConfigError(
            f"stalled_after (--stalled-after) is {stalled_after:g} s, not more than heartbeat "
            f"(--heartbeat) {heartbeat:g} s: every worker would look dead between two beats, "
            f"and its jobs run again elsewhere. Make it a few beats long (the defaults are "
            f"10 and 30)."
        )


async def _open_queue(app: Any, dsn: str) -> None:
    """Open ``app`` on the queue's database, which must hold the queue's tables."""
    await open_app(app, dsn)
    if not await has_schema(app):
        await app.close_async()
        raise GraphConfigError(f"A worker cannot serve the queue: {NO_TABLES}.")


async def run_worker(
    dsn: str,
    *,
    queue: str = "nodestep",
    concurrency: int = 1,
    heartbeat: float = 10.0,
    stalled_after: float = 30.0,
    wait_for_thread: float = 60.0,
    retry_wait: float = 1.0,
    graphs: tuple[str, ...] = (),
    install_signal_handlers: bool = True,
) -> None:
    """Serve queued runs until the process is stopped (SIGINT/SIGTERM end it gracefully).

    Args:
        dsn: The queue's PostgreSQL URL.
        queue: The queue's name.
        concurrency: Jobs this process runs at once.
        heartbeat: Seconds between this worker's heartbeats.
        stalled_after: Seconds of a worker's silence after which its jobs are queued again.
        wait_for_thread: Seconds a job waits for a thread another run holds.
        retry_wait: Seconds before a job refused by a held thread is tried again.
        graphs: Graph paths to import at start, so a bad path fails now, not at a job.
        install_signal_handlers: Stop gracefully on SIGINT/SIGTERM (the command line);
            ``False`` for a worker run as a task of a bigger program, which cancels it.

    Raises:
        GraphConfigError: a setting out of range (``concurrency`` below 1, a negative or
            non-finite number of seconds, ``stalled_after`` not above ``heartbeat``), a
            ``graphs`` path that cannot be imported, or a queue that cannot be reached.
    """
    _check_settings(concurrency, heartbeat, stalled_after, wait_for_thread, retry_wait)
    for path in graphs:
        import_graph(path)
    app = make_app(dsn)
    opened: dict[int, Any] = {}
    _register(app, wait_for_thread, retry_wait, opened)
    _persisting(app)
    await _open_queue(app, dsn)
    try:
        async with anyio.create_task_group() as tasks:
            for path in graphs:
                await _open_store(path, opened)
            tasks.start_soon(_recover_stalled, app, queue, stalled_after, max(heartbeat, 0.2))
            options = {
                "queues": [queue],
                "concurrency": concurrency,
                "update_heartbeat_interval": heartbeat,
                "stalled_worker_timeout": stalled_after,
                "wait": True,
                "install_signal_handlers": install_signal_handlers,
            }
            await _serve(app, options, retry_wait)
            tasks.cancel_scope.cancel()
    finally:
        with anyio.CancelScope(shield=True):
            await app.close_async()
            for store in opened.values():
                await store.aclose()
            _URL_STORES.clear()
