"""``InMemoryStateStore``: history in the memory of this process."""

from __future__ import annotations

import threading
from collections.abc import Sequence

import orjson

from nodestep.errors import ThreadConflictError
from nodestep.store.base import BranchRecord, Record, StateStore
from nodestep.store.index import RecordIndex

__all__ = ["InMemoryStateStore"]


class InMemoryStateStore(StateStore):
    """Keep every thread's history in the memory of this process; it is gone at exit.

    Records are kept encoded as JSON, as the file store keeps them, so what a run reads back
    is never an object some other code still holds and changes. Use it in tests and short
    scripts; use ``FilesystemStateStore`` when history must outlive the process.
    """

    def __init__(self) -> None:
        self._lines: list[bytes] = []
        self._index = RecordIndex()
        self._lock = threading.Lock()

    async def append(
        self, thread_id: str, branch_id: str, records: Sequence[Record], *, after: int
    ) -> None:
        encoded = [orjson.dumps(r) for r in records]
        with self._lock:
            found = self._index.last_sequence(thread_id, branch_id)
            if found != after:
                raise ThreadConflictError(thread_id, branch_id, after, found)
            for record, line in zip(records, encoded, strict=True):
                self._index.add_event(record, len(self._lines))
                self._lines.append(line)

    async def read(
        self, thread_id: str, branch_id: str, *, start: int = 1, stop: int | None = None
    ) -> list[Record]:
        with self._lock:
            lines = [
                self._lines[i] for i in self._index.locations(thread_id, branch_id, start, stop)
            ]
        return [orjson.loads(line) for line in lines]

    async def last_sequence(self, thread_id: str, branch_id: str) -> int:
        with self._lock:
            return self._index.last_sequence(thread_id, branch_id)

    async def last_checkpoint(
        self, thread_id: str, branch_id: str, *, at_or_before: int | None = None
    ) -> int | None:
        with self._lock:
            return self._index.last_checkpoint(thread_id, branch_id, at_or_before)

    async def locate(self, thread_id: str, event_id: str) -> tuple[str, int] | None:
        with self._lock:
            return self._index.locate(thread_id, event_id)

    async def create_branch(self, branch: BranchRecord, first: Sequence[Record]) -> bool:
        encoded = [orjson.dumps(r) for r in first]
        with self._lock:
            if self._index.has_branch(branch.thread_id, branch.id):
                return False
            self._index.add_branch(branch)
            for record, line in zip(first, encoded, strict=True):
                self._index.add_event(record, len(self._lines))
                self._lines.append(line)
            return True

    async def list_branches(self, thread_id: str) -> list[BranchRecord]:
        with self._lock:
            return self._index.list_branches(thread_id)
