"""Runs through ``nodestep.workers``: queued on PostgreSQL, run by worker processes.

With ``--workers DSN`` the server runs nothing itself: each run it admitted is queued on
the ``RunQueue`` as a job that names the graph by import path and the store by URL, and
the server follows the run's end in the thread's history, where the worker stores it.
Why that is enough for durability: the run's row is stored before its answer, a server
that starts queues every run still pending again, and a job applies its input once (the
run id is its request key) however often it is queued or delivered; a worker killed
mid-run has its job queued again by the other workers (``--stalled-after``). A run that
this server cancels (``runs.cancel``, ``interrupt`` or ``rollback`` of a newer run, a
stream closed with ``on_disconnect="cancel"``) is cancelled in its worker too
(``RunTicket.cancel``).
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from typing import Any

import anyio

from nodestep import Resume
from nodestep.serve._execution import THREAD_WAIT, Executor, paused
from nodestep.serve._registry import RunRow
from nodestep.serve._shapes import interrupt_json, state_values
from nodestep.workers import RunQueue

__all__ = ["QueuedFailure", "WorkerQueue"]


class QueuedFailure(Exception):
    """A queued run that failed in a node; ``kind`` is the node's error type."""

    def __init__(self, kind: str, message: str) -> None:
        super().__init__(message)
        self.kind = kind


class WorkerQueue:
    """Queue the server's runs for workers, and wait for each one's end in the store."""

    def __init__(self, queue: RunQueue, store_url: str, paths: Mapping[str, str]) -> None:
        self._queue = queue
        self._store_url = store_url
        self._paths = dict(paths)

    async def run(
        self, executor: Executor, run: RunRow, emit: Callable[[str, Any], None]
    ) -> tuple[dict[str, Any], bool]:
        """Queue ``run``, wait for its end; return its values and whether it paused.

        Raises:
            QueuedFailure: a node failed (the error is in the thread's history).
        """
        kwargs = run.kwargs
        thread = executor.thread_row(run.thread_id)
        modes = kwargs.get("stream_mode") or []
        modes = [modes] if isinstance(modes, str) else list(modes)
        graph = executor.graph(run.graph_id)
        if kwargs.get("update") is not None:
            edited = await executor.edit(graph, run, thread.branch, modes, emit)
            if edited is not None:
                return edited
        if kwargs.get("resume") is not None:
            kwargs, ended = await executor.unanswerable(graph, run, thread.branch, modes, emit)
            if ended is not None:
                return ended
        graph_input = kwargs.get("graph_input")
        ticket = await self._queue.submit(
            self._paths[run.graph_id],
            run.thread_id,
            graph_input,
            resume=_resume(kwargs.get("resume")),
            branch_id=thread.branch,
            request_key=run.run_id if graph_input is not None else None,
            store=self._store_url,
        )
        try:
            outcome = await ticket.result(timeout=THREAD_WAIT)
        except anyio.get_cancelled_exc_class():
            # A run cancelled by a request stops in its worker too; a server that stops
            # leaves its runs to the workers (the next server follows them).
            if executor.cancelled(run.run_id):
                with anyio.CancelScope(shield=True):
                    await ticket.cancel()
            raise
        snapshot = outcome.snapshot
        if outcome.status == "failed":
            raise QueuedFailure(snapshot.error_type or "Error", snapshot.error_message or "")
        values = state_values(snapshot.value)
        pending = [interrupt_json(i) for i in snapshot.interrupts.values()]
        if outcome.status != "interrupted":
            pending = []
        if "values" in modes:  # a pause's: the state with __interrupt__, as a local run's
            emit("values", paused(values, pending))
        return paused(values, pending), outcome.status == "interrupted"


def _resume(stored: dict[str, Any] | None) -> Resume | None:
    if stored is None:
        return None
    if "answers" in stored:
        return Resume(answers=stored["answers"])
    return Resume(stored["value"])
