"""Records for store tests: built as the engine builds them, and changed to be invalid.

Part of ``nodestep.testing._conformance``, which exports the helpers; this module needs no
pytest.
"""

from __future__ import annotations

import time
import uuid
from collections.abc import Sequence
from typing import Any

from nodestep.store import BranchRecord, Record

__all__ = ["INVALID_CHANGES", "MISSING", "changed", "checkpoint", "event", "events", "fork", "seqs"]


def event(
    seq: int,
    thread: str = "t1",
    branch: str = "main",
    *,
    type: str = "state_updated",
    **values: Any,
) -> Record:
    """Return a history record with a new id, as the engine would build it.

    Args:
        seq: The record's sequence number in its branch.
        thread: The thread.
        branch: The branch.
        type: The record's type.
        **values: The record's ``values``; ``{"n": seq}`` when none are given.
    """
    return {
        "id": str(uuid.uuid4()),
        "seq": seq,
        "ts": time.time(),
        "thread": thread,
        "branch": branch,
        "type": type,
        "values": values or {"n": seq},
    }


def checkpoint(seq: int, thread: str = "t1", branch: str = "main", **values: Any) -> Record:
    """Return a ``checkpoint`` record; the arguments are those of ``event``."""
    return event(seq, thread, branch, type="checkpoint", **values)


def events(first: int, last: int, thread: str = "t1", branch: str = "main") -> list[Record]:
    """Return ``state_updated`` records with ``seq`` from ``first`` to ``last``, both included."""
    return [event(seq, thread, branch) for seq in range(first, last + 1)]


def fork(thread: str, branch: str, after: Record) -> BranchRecord:
    """Return the record of a branch named ``branch`` of ``thread``, forked after ``after``."""
    return BranchRecord(
        id=branch,
        thread_id=thread,
        parent_id=after["branch"],
        from_event_id=after["id"],
        from_sequence=after["seq"],
        created_at=time.time(),
    )


def seqs(records: Sequence[Record]) -> list[int]:
    """Return the sequence numbers of ``records``, in order."""
    return [r["seq"] for r in records]


MISSING = object()
"""In a change to a record: remove the key."""


def changed(record: Record, change: dict[str, Any]) -> Record:
    """Return ``record`` with ``change`` applied (``MISSING`` values remove their key)."""
    out = {**record, **change}
    return {k: v for k, v in out.items() if v is not MISSING}


# Changes that make the record ``event(3)`` (third of thread t1, branch main) invalid, and
# words the store's error must hold. Both stores check records the same way, before storing.
INVALID_CHANGES: dict[str, tuple[dict[str, Any], str]] = {
    "missing-id": ({"id": MISSING}, "its 'id' must be a string, found no such key"),
    "missing-branch": ({"branch": MISSING}, "its 'branch' must be a string, found no such key"),
    "none-id": ({"id": None}, "its 'id' must be a string, found None"),
    "string-seq": ({"seq": "3"}, "its 'seq' must be an integer, found '3'"),
    "bool-seq": ({"seq": True}, "its 'seq' must be an integer, found True"),
    "string-ts": ({"ts": "now"}, "its 'ts' must be a number, found 'now'"),
    "other-thread": (
        {"thread": "t2"},
        "it belongs to thread 't2', branch 'main', not to thread 't1', branch 'main'",
    ),
    "other-branch": (
        {"branch": "alt"},
        "it belongs to thread 't1', branch 'alt', not to thread 't1', branch 'main'",
    ),
    "seq-gap": ({"seq": 5}, "its seq is 5, but it must be 3"),
    "seq-repeat": ({"seq": 2}, "its seq is 2, but it must be 3"),
    "reserved-type": ({"type": "batch"}, "its type 'batch' is reserved"),
    "int-beyond-64-bits": (
        {"values": {"n": 2**64}},
        r"it is not JSON data \(Integer exceeds 64-bit range\)",
    ),
    "negative-int-beyond-64-bits": ({"values": {"n": -(2**63) - 1}}, "64-bit range"),
    "int-key": ({"values": {1: "one"}}, r"not JSON data \(Dict key must be str\)"),
    "set": ({"values": {"tags": {"a"}}}, r"not JSON data \(Type is not JSON serializable: set\)"),
}
