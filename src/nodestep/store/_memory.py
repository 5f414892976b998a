"""``InMemoryStateStore``: history in the memory of this process."""

from __future__ import annotations

import os
import threading
import weakref
from collections.abc import Sequence

from nodestep._display.text import plural
from nodestep._errors import InternalError, ThreadConflictError
from nodestep.store import _checks
from nodestep.store._codec import decode_events
from nodestep.store._contract import BranchRecord, Record, StateStore
from nodestep.store._index import RecordIndex
from nodestep.store._threads import ThreadPage, ThreadStatus, check_prune, page_threads

__all__ = ["InMemoryStateStore"]


class InMemoryStateStore(StateStore):
    """Keep every thread's history in the memory of this process; it is gone at exit.

    Records are checked and kept encoded exactly as the file store checks and writes them,
    so what a run reads back is never an object some other code still holds and changes,
    and a record one store refuses (a missing key, a wrong ``seq``, an int beyond 64 bits,
    ...) the other refuses too, with the same ``StateStoreError``. Use it in tests and short
    scripts; use ``FilesystemStateStore`` when history must outlive the process.
    """

    def __init__(self) -> None:
        # The index's locations are the encoded lines themselves: dropping a record from
        # the index (delete_thread, prune) frees its line, with no list of lines to mend.
        self._index = RecordIndex()
        self._lock = threading.Lock()
        _stores.add(self)

    def __repr__(self) -> str:
        return f"InMemoryStateStore({plural(len(self._index.threads), 'thread')})"

    def _display_facts(self) -> tuple[str, str, int | None]:
        return "InMemoryStateStore", "this process's memory", len(self._index.threads)

    def _new_lock_after_fork(self) -> None:
        # A forked child keeps its copy of the history, but not the thread that may have
        # held the lock at fork time: held forever, it would hang the child's first call.
        self._lock = threading.Lock()

    async def append(
        self, thread_id: str, branch_id: str, records: Sequence[Record], *, after: int
    ) -> None:
        """Append ``records`` to a branch, atomically, if its last sequence is still ``after``.

        Raises:
            ThreadConflictError: The branch's last sequence is not ``after``; nothing stored.
            StateStoreError: A record is not a valid event of this branch; nothing stored.
        """
        encoded = _checks.encode_events(thread_id, branch_id, records, after + 1)
        with self._lock:
            found = self._index.last_sequence(thread_id, branch_id)
            if found != after:
                raise ThreadConflictError(thread_id, branch_id, after, found)
            self._add(records, encoded)

    async def read(
        self, thread_id: str, branch_id: str, *, start: int = 1, stop: int | None = None
    ) -> list[Record]:
        """Return the branch's records with ``start <= seq <= stop`` (``None``: to the end)."""
        with self._lock:
            lines = self._index.locations(thread_id, branch_id, start, stop)
        return _decoded(lines)

    async def read_tail(
        self, thread_id: str, branch_id: str, *, at: int | None = None
    ) -> list[Record]:
        """Return the records from the last checkpoint at or before ``at`` through ``at``."""
        with self._lock:
            lines = self._index.tail(thread_id, branch_id, at)
        return _decoded(lines)

    async def last_sequence(self, thread_id: str, branch_id: str) -> int:
        """Return the sequence number of the branch's last record, or 0 if it has none."""
        with self._lock:
            return self._index.last_sequence(thread_id, branch_id)

    async def last_record(self, thread_id: str, branch_id: str) -> tuple[int, None]:
        """Return the branch's last sequence number, and no id: this store's histories are
        this process's, and ``delete_thread`` gives it a new ``generation``."""
        with self._lock:
            return self._index.last_sequence(thread_id, branch_id), None

    async def last_checkpoint(
        self, thread_id: str, branch_id: str, *, at_or_before: int | None = None
    ) -> int | None:
        """Return the sequence number of the branch's last ``checkpoint`` record."""
        with self._lock:
            return self._index.last_checkpoint(thread_id, branch_id, at_or_before)

    async def locate(self, thread_id: str, event_id: str) -> tuple[str, int] | None:
        """Return ``(branch_id, seq)`` of the record with id ``event_id`` in the thread."""
        with self._lock:
            return self._index.locate(thread_id, event_id)

    async def create_branch(self, branch: BranchRecord, first: Sequence[Record]) -> bool:
        """Create a branch and append its first records, atomically.

        Returns:
            ``False``, storing nothing, when the thread already has a branch with that id.

        Raises:
            StateStoreError: The branch record is invalid, or a record is not a valid event
                of the branch; nothing stored.
        """
        # The branch record's own line is the file store's; here the index keeps the record.
        encoded = _checks.encode_branch(branch, first)[1:]
        with self._lock:
            if self._index.has_branch(branch.thread_id, branch.id):
                return False
            self._index.add_branch(branch)
            self._add(first, encoded)
            return True

    async def store_pruned(
        self,
        thread_id: str,
        branch_id: str,
        records: Sequence[Record],
        branch: BranchRecord | None = None,
    ) -> None:
        """Store a pruned branch the store does not have: its kept records.

        See ``StateStore.store_pruned``. Indexed as ``prune`` leaves a branch here, and as
        the file store reads one back: a branch whose first sequence is its first record's.
        """
        encoded = _checks.encode_pruned(thread_id, branch_id, records, branch)
        start = {"type": "start", "thread": thread_id, "branch": branch_id}
        with self._lock:
            self._index.check_absent(thread_id, branch_id)
            if branch is not None:
                self._index.add_branch(branch)
            problem = self._index.add_stored({**start, "seq": records[0]["seq"]}, None)
            if problem:  # pragma: no cover - encode_pruned checked what add_stored does
                raise InternalError(f"a checked pruned branch was refused: {problem}")
            self._add(records, encoded)

    async def list_branches(self, thread_id: str) -> list[BranchRecord]:
        """Return the thread's forked branches, oldest first."""
        with self._lock:
            return self._index.list_branches(thread_id)

    async def find_request(self, thread_id: str, branch_id: str, key: str) -> int | None:
        """Return the ``seq`` of the branch's ``run_started`` record with request key ``key``.

        From the index, which the records update as they are stored: no read.
        """
        with self._lock:
            return self._index.find_request(thread_id, branch_id, key)

    async def list_threads(
        self,
        *,
        status: ThreadStatus | Sequence[ThreadStatus] | None = None,
        active_after: float | None = None,
        active_before: float | None = None,
        limit: int = 100,
        cursor: str | None = None,
    ) -> ThreadPage:
        """Return a page of the store's threads, most recent activity first.

        See ``StateStore.list_threads``.
        """
        with self._lock:
            infos = self._index.thread_infos()
        return page_threads(
            infos,
            status=status,
            active_after=active_after,
            active_before=active_before,
            limit=limit,
            cursor=cursor,
        )

    async def delete_thread(self, thread_id: str) -> bool:
        """Delete every record and branch of a thread; return ``False`` if it had none."""
        with self._lock:
            if not self._index.drop_thread(thread_id):
                return False
            # A graph's cached state of the thread must not outlive it: a new history of
            # the same length would look unchanged by its last sequence number alone.
            self.generation = object()
            return True

    async def prune(
        self,
        thread_id: str | None = None,
        *,
        keep_last: int | None = None,
        older_than: float | None = None,
    ) -> int:
        """Drop history before a checkpoint, keeping every branch loadable; return the count.

        See ``StateStore.prune``.
        """
        check_prune(keep_last, older_than)
        with self._lock:
            cuts = self._index.prune_cuts(thread_id, keep_last, older_than)
            return self._index.drop_before(cuts)  # the state at the last record is unchanged

    def _add(self, records: Sequence[Record], encoded: list[bytes]) -> None:
        self._index.add_events(records, encoded)


def _decoded(lines: list[bytes]) -> list[Record]:
    # The lines never left this process's memory since they were written and checked, so
    # their checksums are not checked again (a read took twice as long with them).
    return decode_events(lines, [True] * len(lines), verify=False)


_stores: weakref.WeakSet[InMemoryStateStore] = weakref.WeakSet()


def _after_fork_in_child() -> None:
    for store in list(_stores):
        store._new_lock_after_fork()


os.register_at_fork(after_in_child=_after_fork_in_child)
