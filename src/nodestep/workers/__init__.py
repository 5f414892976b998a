"""Distributed runs: queue runs of stored threads, served by worker processes anywhere.

A run queue (procrastinate, in PostgreSQL) delivers each queued run at least once; the
thread's lease and request keys in the state store make every delivery apply once. See
``docs/workers.md``.
"""

from nodestep._public import publish as _publish
from nodestep.workers._queue import RunOutcome, RunQueue, RunTicket
from nodestep.workers._worker import run_worker

__all__ = ["RunOutcome", "RunQueue", "RunTicket", "run_worker"]

_publish(__name__, __all__, globals())
