"""Which appends must be on the disk when they return, for a store that flushes.

A store that flushes its writes (``FilesystemStateStore(fsync=True)``,
``SQLiteStateStore(synchronous="FULL")``) flushes every append before it returns, except
one that only holds records a run writes before its end: ``run_started``,
``task_finished``, ``superstep_completed``, and the checkpoints and subgraph records
written with them. Those reach the disk with the next flushed append, at the latest the
run's own last record (``run_completed``, ``run_paused``, ``run_failed`` or
``run_stopped``), before the call that runs the graph returns.

What a power cut can then lose: a running call's records after the last flush, never a
record of a call that returned, and never a record without the ones before it (both stores
write in order, and a flush covers everything written before it). A killed process loses
nothing it appended: the records were handed to the operating system.
"""

from __future__ import annotations

from collections.abc import Sequence

from nodestep.store._contract import Record

__all__ = ["must_flush"]

_RUN_PROGRESS = frozenset(
    {"run_started", "task_finished", "superstep_completed", "checkpoint", "subgraph"}
)


def must_flush(records: Sequence[Record]) -> bool:
    """Tell whether an append of ``records`` must be on the disk before it returns.

    Every append must, except one of a run's records before its end (see the module
    docstring). A lone checkpoint (``graph.migrate``) is no run's: it is flushed.
    """
    kinds = {r.get("type") for r in records}
    return not kinds <= _RUN_PROGRESS or kinds == {"checkpoint"}
