"""``SQLStateStore``: the ``StateStore`` methods of the SQL stores, written once.

Each method checks its arguments, builds an operation of ``ops`` and hands it to the back
end's ``_run``, which runs its statements on a connection: ``SQLiteStateStore`` on
``sqlite3``, in the caller's thread; ``PostgresStateStore`` on psycopg, on the event loop's
own connections or in a worker thread. A back end subclasses ``SQLStateStore`` and
implements ``_run``; what differs between them is only where and how a statement runs.
"""

from __future__ import annotations

from abc import abstractmethod
from collections.abc import Callable, Sequence
from typing import Any

from nodestep._errors import StateStoreError, ThreadConflictError
from nodestep.store._checks import encode_branch, encode_events, encode_pruned
from nodestep.store._codec import LineError, decode_events
from nodestep.store._contract import BranchRecord, Lease, Record, StateStore
from nodestep.store._flush import must_flush
from nodestep.store._sql import locked_ops, ops, thread_ops
from nodestep.store._threads import ThreadPage, ThreadStatus

__all__ = ["READS", "TRANSACTION", "WRITES", "Collision", "SQLStateStore"]

READS = 0
"""An operation that only reads."""
WRITES = 1
"""An operation whose writes are atomic each on its own (one statement, or compare and swap).

SQLite runs it in a write transaction all the same (``BEGIN IMMEDIATE``), so that writers
take turns instead of failing; PostgreSQL runs it without one: one round trip a statement.
"""
TRANSACTION = 2
"""An operation whose statements must be atomic together: one transaction on both."""


class Collision(Exception):
    """The database refused a row whose key another writer stored first."""


class SQLStateStore(StateStore):
    """The methods every SQL store shares, over the back end's ``_run``.

    Args:
        where: The database as messages name it: a path, or a dsn without its password.
    """

    _locked_writes = False
    """Whether ``_run`` holds the database's write lock from the start of every write
    (SQLite's ``BEGIN IMMEDIATE``): appends and leases then run as ``locked_ops``'
    functions (``_run_locked``), whose checks are a read before a plain insert, where
    otherwise they are in the statement that inserts (``ops``)."""

    _flushes = False
    """Whether ``_run`` heeds its ``flush`` (SQLite under ``synchronous="FULL"``): an
    append asks ``must_flush`` only then, which goes through every record."""

    def __init__(self, where: str) -> None:
        self._where = where

    @abstractmethod
    async def _run(self, op: ops.Op, access: int = READS, *, flush: bool = True) -> Any:
        """Run ``op``'s statements and return its result.

        Args:
            op: The operation.
            access: ``READS``, ``WRITES`` or ``TRANSACTION``: how the back end must run it.
            flush: Whether a write must be on the disk when this returns, where the store
                flushes its commits (SQLite under ``synchronous="FULL"``). ``False``: a
                run's records before its end, and leases; the next flushed commit covers
                them (``nodestep.store._flush``). PostgreSQL commits every write alike.

        Raises:
            Collision: A row's key was stored first by another writer.
            StateStoreError: The database cannot be reached, read or written.
        """

    async def _run_locked(self, call: Callable[..., Any], *args: Any, flush: bool) -> Any:
        """Return ``call(cursor, *args)`` run in a write transaction that holds the
        database's write lock from its start; only where ``_locked_writes``.

        Raises:
            StateStoreError: The database cannot be reached, read or written.
        """
        raise NotImplementedError(f"{type(self).__name__} runs no locked writes")

    async def append(
        self, thread_id: str, branch_id: str, records: Sequence[Record], *, after: int
    ) -> None:
        """Append ``records`` to a branch, atomically, if its last sequence is still ``after``.

        Raises:
            ThreadConflictError: The branch's last sequence is not ``after``; nothing stored.
            StateStoreError: A record is not a valid event of this branch, or the database
                cannot be written; nothing stored.
        """
        lines = encode_events(thread_id, branch_id, records, after + 1)
        await self._append(thread_id, branch_id, records, lines, after, None)

    async def append_leased(self, lease: Lease, records: Sequence[Record], *, after: int) -> Lease:
        """Append as the lease's holder: its fencing token is checked by the append itself.

        Raises:
            ThreadBusyError: the lease was lost; nothing stored.
            ThreadConflictError: the branch's last sequence is not ``after``; nothing stored.
        """
        t, b = lease.thread_id, lease.branch_id
        lines = encode_events(t, b, records, after + 1)
        found: Lease = await self._append(t, b, records, lines, after, lease)
        return found

    async def append_and_release(
        self, lease: Lease, records: Sequence[Record], *, after: int
    ) -> None:
        """Append as the lease's holder and drop the lease, in one transaction.

        A run's last append: the records are stored and the lease dropped together, or
        neither (a process killed in between leaves both undone, and its lease expires).
        SQLite runs it as one ``BEGIN IMMEDIATE`` transaction; PostgreSQL keeps the
        default, two statements without a transaction (one would cost two round trips more).

        Raises:
            ThreadBusyError: the lease was lost; nothing stored.
            ThreadConflictError: the branch's last sequence is not ``after``; nothing stored.
            StateStoreError: the records cannot be written; nothing stored.
        """
        t, b = lease.thread_id, lease.branch_id
        lines = encode_events(t, b, records, after + 1)
        await self._append(t, b, records, lines, after, lease, give_back=True)

    async def acquire_and_append(
        self,
        thread_id: str,
        branch_id: str,
        holder: str,
        records: Sequence[Record],
        *,
        ttl: float,
        after: int,
        after_id: str | None = None,
    ) -> tuple[Lease, bool]:
        """Take the branch and append a run's first records as its holder, in one transaction.

        The lease is taken and the records stored together, or, when the branch's last
        record is no longer ``after`` (of id ``after_id``), the lease alone (nothing
        stored). SQLite runs it as one ``BEGIN IMMEDIATE`` transaction where the two calls
        were two; PostgreSQL makes two statements.

        Raises:
            ThreadBusyError: another holder's lease has not expired; nothing changed.
            StateStoreError: the records cannot be written; nothing changed.
        """
        lines = encode_events(thread_id, branch_id, records, after + 1)
        flush = not self._flushes or must_flush(records)
        taken: tuple[Lease, bool]
        if self._locked_writes:
            taken = await self._run_locked(
                locked_ops.acquire_and_append_locked, thread_id, branch_id, holder, ttl, records,
                lines, after, after_id, flush=flush,
            )  # fmt: skip
            return taken
        op = ops.acquire_and_append(
            thread_id, branch_id, holder, ttl, records, lines, after, after_id
        )
        access = TRANSACTION if len(records) > ops.BIG_APPEND else WRITES
        taken = await self._run(op, access, flush=flush)
        return taken

    async def _append(
        self,
        thread_id: str,
        branch_id: str,
        records: Sequence[Record],
        lines: list[bytes],
        after: int,
        lease: Lease | None,
        give_back: bool = False,
    ) -> Any:
        flush = not self._flushes or must_flush(records)
        if self._locked_writes:
            return await self._run_locked(
                locked_ops.append_locked, thread_id, branch_id, records, lines, after, lease,
                give_back, flush=flush,
            )  # fmt: skip
        op = ops.append(thread_id, branch_id, records, lines, after, lease, give_back)
        access = TRANSACTION if len(records) > ops.BIG_APPEND else WRITES
        try:
            return await self._run(op, access, flush=flush)
        except Collision:
            # Another writer stored the same sequence between our check and our insert.
            found = await self.last_sequence(thread_id, branch_id)
            raise ThreadConflictError(thread_id, branch_id, after, found) from None

    async def read(
        self, thread_id: str, branch_id: str, *, start: int = 1, stop: int | None = None
    ) -> list[Record]:
        """Return the branch's records with ``start <= seq <= stop`` (``None``: to the end)."""
        lines = await self._run(ops.read(thread_id, branch_id, start, stop))
        return self._decode(lines, thread_id, branch_id)

    async def read_tail(
        self, thread_id: str, branch_id: str, *, at: int | None = None
    ) -> list[Record]:
        """Return the records from the last checkpoint at or before ``at`` through ``at``."""
        lines = await self._run(ops.read_tail(thread_id, branch_id, at))
        return self._decode(lines, thread_id, branch_id)

    def _decode(self, lines: Sequence[bytes], thread_id: str, branch_id: str) -> list[Record]:
        """Return the records of stored lines, checking each checksum and their numbering.

        Why the numbering: a damaged database page can lose rows without any error from the
        database (a page whose cell count was cut, say), which would give a silently shorter
        history. A branch's records are numbered without gaps, so a read of consecutive
        records that skips a number has lost some: it is refused, naming the numbers.

        Raises:
            StateStoreError: A line is damaged (changed outside nodestep), or records are
                missing between two that were read; it names the record or the numbers.
        """
        try:
            records = decode_events(lines, [True] * len(lines))
        except LineError as e:
            raise StateStoreError(
                f"{self._where}: a record of thread {thread_id!r}, branch {branch_id!r} (the "
                f"{_ordinal(e.line + 1)} of this read) is damaged: {e}. It was changed outside "
                f"nodestep; restore the database from a backup, or export the thread's good "
                f"records."
            ) from e
        if records and records[-1]["seq"] - records[0]["seq"] != len(records) - 1:
            raise self._gap(records, thread_id, branch_id)
        return records

    def _gap(self, records: list[Record], thread_id: str, branch_id: str) -> StateStoreError:
        """Return the error for a read whose records skip a sequence number."""
        expected = records[0]["seq"]
        for record in records:
            if record["seq"] != expected:
                break
            expected += 1
        return StateStoreError(
            f"{self._where}: thread {thread_id!r}, branch {branch_id!r} is missing records: "
            f"after seq {expected - 1} the next record read is seq {record['seq']}, expected "
            f"seq {expected}. The database lost rows (a damaged page?); nothing of this read "
            f"is used. Check the database (SQLiteStateStore.check_integrity(), or the "
            f"server's own checks) and restore it from a backup."
        )

    async def last_sequence(self, thread_id: str, branch_id: str) -> int:
        """Return the sequence number of the branch's last record, or 0 if it has none."""
        found: int = await self._run(ops.last_sequence(thread_id, branch_id))
        return found

    async def last_record(self, thread_id: str, branch_id: str) -> tuple[int, str | None]:
        """Return the branch's last sequence number and its record's id, in one lookup."""
        found: tuple[int, str | None] = await self._run(ops.last_record(thread_id, branch_id))
        return found

    async def last_checkpoint(
        self, thread_id: str, branch_id: str, *, at_or_before: int | None = None
    ) -> int | None:
        """Return the sequence number of the branch's last ``checkpoint`` record."""
        found: int | None = await self._run(ops.last_checkpoint(thread_id, branch_id, at_or_before))
        return found

    async def locate(self, thread_id: str, event_id: str) -> tuple[str, int] | None:
        """Return ``(branch_id, seq)`` of the record with id ``event_id`` in the thread."""
        found: tuple[str, int] | None = await self._run(ops.locate(thread_id, event_id))
        return found

    async def create_branch(self, branch: BranchRecord, first: Sequence[Record]) -> bool:
        """Create a branch and append its first records, atomically.

        Returns:
            ``False``, storing nothing, when the thread already has a branch with that id.

        Raises:
            StateStoreError: The branch record or a first record is invalid; nothing stored.
        """
        lines = encode_branch(branch, first)[1:]  # the branch's own line: a row of its own
        made: bool = await self._run(ops.create_branch(branch, first, lines), TRANSACTION)
        return made

    async def store_pruned(
        self,
        thread_id: str,
        branch_id: str,
        records: Sequence[Record],
        branch: BranchRecord | None = None,
    ) -> None:
        """Store a pruned branch the database does not have: its kept records.

        See ``StateStore.store_pruned``. Kept as ``prune`` leaves a branch here: its rows
        start at the first kept record's ``seq``.
        """
        lines = encode_pruned(thread_id, branch_id, records, branch)
        await self._run(ops.store_pruned(thread_id, branch_id, records, lines, branch), TRANSACTION)

    async def list_branches(self, thread_id: str) -> list[BranchRecord]:
        """Return the thread's forked branches, oldest first."""
        found: list[BranchRecord] = await self._run(ops.list_branches(thread_id))
        return found

    async def find_request(self, thread_id: str, branch_id: str, key: str) -> int | None:
        """Return the ``seq`` of the branch's ``run_started`` record with request key ``key``."""
        found: int | None = await self._run(ops.find_request(thread_id, branch_id, key))
        return found

    # -- leases: rows of nodestep_leases, which every client of the database sees ----------
    # Never flushed on their own: a lease matters only while its holder runs, and a power
    # cut ends every holder (a lease row that outlives one expires, as a crashed holder's).

    async def acquire_lease(
        self, thread_id: str, branch_id: str, holder: str, *, ttl: float
    ) -> Lease:
        """Take the branch for ``holder`` for ``ttl`` seconds, for every client of the database.

        Raises:
            ThreadBusyError: another holder's lease has not expired; nothing changed.
        """
        lease: Lease
        if self._locked_writes:
            lease = await self._run_locked(
                locked_ops.acquire_locked, thread_id, branch_id, holder, ttl, flush=False
            )
            return lease
        lease = await self._run(ops.acquire(thread_id, branch_id, holder, ttl), WRITES, flush=False)
        return lease

    async def renew_lease(self, lease: Lease) -> Lease:
        """Extend ``lease`` by its ttl from now, and return the renewed lease.

        Raises:
            ThreadBusyError: the lease is not the branch's current one any more (``lost``).
        """
        renewed: Lease = await self._run(ops.renew(lease), WRITES, flush=False)
        return renewed

    async def release_lease(self, lease: Lease) -> None:
        """Give the branch back, if ``lease`` still holds it; else do nothing."""
        await self._run(ops.release(lease), WRITES, flush=False)

    # -- thread management (the rules: nodestep.store._threads) ----------------------------

    async def list_threads(
        self,
        *,
        status: ThreadStatus | Sequence[ThreadStatus] | None = None,
        active_after: float | None = None,
        active_before: float | None = None,
        limit: int = 100,
        cursor: str | None = None,
    ) -> ThreadPage:
        """Return one page of the store's threads, most recent activity first.

        Raises:
            GraphConfigError: An argument is out of range, or ``cursor`` is not a cursor.
        """
        op = thread_ops.list_threads(status, active_after, active_before, limit, cursor)
        page: ThreadPage = await self._run(op)
        return page

    async def delete_thread(self, thread_id: str) -> bool:
        """Delete every record and branch of a thread; return ``False`` if it had none."""
        deleted: bool = await self._run(thread_ops.delete_thread(thread_id), TRANSACTION)
        return deleted

    async def prune(
        self,
        thread_id: str | None = None,
        *,
        keep_last: int | None = None,
        older_than: float | None = None,
    ) -> int:
        """Drop old records of a thread (or of every thread); return how many were dropped.

        Each branch keeps its records from a checkpoint on, so it still loads (see
        ``nodestep.store.prune_cut``).

        Raises:
            GraphConfigError: Neither rule is given, or one is out of range.
        """
        op = thread_ops.prune(thread_id, keep_last, older_than)
        dropped: int = await self._run(op, TRANSACTION)
        return dropped


def _ordinal(n: int) -> str:
    """Return ``n`` as an English ordinal: 1st, 2nd, 3rd, 4th, 11th, 12th, 13th, 21st."""
    suffix = "th" if n % 100 in (11, 12, 13) else {1: "st", 2: "nd", 3: "rd"}.get(n % 10, "th")
    return f"{n}{suffix}"
