"""``FilesystemStateStore``: every thread's history in one JSON Lines file.

The file's line format (header, events, branch records, batch lines) is in
``nodestep.store._jsonl``; indexing, repairing and appending the records of an open file is
``nodestep.store._indexed_log``; taking its locks, ``nodestep.store._locking``. This module
shares the file between threads and processes: opening it, following a file put in its
place, reopening after a fork, and stopping after a failed flush.
"""

from __future__ import annotations

import logging
import os
import threading
import weakref
from collections.abc import Sequence
from contextlib import suppress
from pathlib import Path

from nodestep._errors import StateStoreError, ThreadConflictError
from nodestep.store import _checks, _file_errors, _io
from nodestep.store._contract import BranchRecord, Record, RecordPlace, StateStore
from nodestep.store._file_threads import FileThreads
from nodestep.store._group_commit import GroupCommit, must_wait
from nodestep.store._indexed_log import IndexedLog, signature
from nodestep.store._lease_file import FileLeasing
from nodestep.store._locking import FileLocking, Locked, wait_for_thread_lock

__all__ = ["FilesystemStateStore"]

logger = logging.getLogger(__name__)

# Guards the reopen after a fork. A lock another thread held at fork time stays held in the
# child forever, hence a new one in every child.
_fork_lock = threading.Lock()


# Stores with open files, so that a fork can turn off their lock-free reads in the child.
_open_stores: weakref.WeakSet[FilesystemStateStore] = weakref.WeakSet()


def _after_fork_in_child() -> None:
    global _fork_lock
    _fork_lock = threading.Lock()
    # The lock-free read path takes the store's thread lock, which a parent thread may have
    # held at fork time: the child's first call goes through _locked(), which reopens.
    for store in list(_open_stores):
        store._log.seen = None


if hasattr(os, "register_at_fork"):
    os.register_at_fork(after_in_child=_after_fork_in_child)


class FilesystemStateStore(FileLeasing, FileThreads, FileLocking, StateStore):
    """Keep every thread's history in one JSON Lines file that several processes can share.

    Each record is one line of JSON (serialized with orjson) appended to ``path``; the first
    line is a header, and a file without one is refused. Missing parent directories are
    created.

    Durability: with ``fsync=False`` every record is handed to the operating system before
    ``append`` returns, so it survives the process being killed, but not a power loss. With
    ``fsync=True`` it is also on the disk when ``append`` returns, which survives power loss;
    appends waiting at once share one flush, done off the event loop, and a run's records
    before its last are flushed with it at the latest (``_group_commit``). A failed flush
    fails every append waiting for it, removes them and stops this store object: every later
    call raises ``StateStoreError``, and a new store, which reads the file again, goes on.
    A write cut short by either
    (the last line broken, or part of a several-record append) is cut off when the file is
    next written, and the size cut is added to ``repaired_bytes``. A whole line that is not
    a valid record is never skipped: it raises ``StateStoreError`` naming the file, the line
    and its byte offset.

    Locking and concurrency: each operation locks the file (``fcntl.flock`` on the file on
    Linux and macOS; ``msvcrt`` on ``<path>.lock`` on Windows), shared to read and exclusive
    to write, for the length of the operation only; a thread lock lets threads share one
    store. The async methods never block the event loop's thread on either lock: they try
    both without waiting, and only when another process or thread holds one do they wait
    for it in a worker thread (about 70 µs more), so the loop's other tasks run meanwhile.
    A call cancelled while it waits returns at once and leaves no lock held. The
    constructor waits for the lock on its own thread. Writers are
    optimistic: ``append(after=n)`` raises ``ThreadConflictError``, storing nothing, when
    another writer has appended to that branch since. A process forked from one holding
    the store reopens the file on its first call.

    The file format: new files are written in format version 3, whose lines carry a CRC-32
    checksum, checked when a line is indexed and whenever it is read: a changed byte raises
    ``StateStoreError`` naming the file, line and offset. Versions 1 and 2 are read; a newer
    one is refused, saying to upgrade nodestep. The first write to an older file sets its
    header's version to 3, in place, so older releases refuse it instead of misreading it.

    Read-only mode: ``read_only=True`` opens an existing file only to read it (a file this
    process may not write, or a read-only mount). It never creates, repairs or upgrades the
    file (a torn tail is left, and not read), and every write raises ``StateStoreError``. It
    reads under the shared lock where the system allows one, else without it (a writer's
    append in progress then shows once it is whole).

    The index: the store keeps in memory where each branch's records are (byte offsets by
    sequence number), its checkpoints and its event ids. Each operation reads only the bytes
    other processes appended since the last one, so its cost does not grow with the history.
    ``last_sequence`` takes no lock at all while one ``fstat`` shows the file unchanged.
    Writes are done inline in the async methods, not in a worker thread: an append costs a
    few microseconds, and a hop to a thread about 70.

    Args:
        path: The history file; created, with its header, when missing or empty (unless
            ``read_only``).
        fsync: Flush every append to the disk before returning.
        read_only: Open an existing file only to read it (see above).

    Attributes:
        path: The history file, as an absolute path.
        fsync: Whether appends are flushed to the disk.
        read_only: Whether the store only reads.
        repaired_bytes: Bytes of unfinished writes this store cut off the file's end;
            0 normally.

    Raises:
        StateStoreError: The file cannot be opened (with ``read_only``: it does not exist),
            is not a nodestep history (or of a newer format version), or holds a damaged
            record.
    """

    def __init__(
        self, path: str | os.PathLike[str], *, fsync: bool = False, read_only: bool = False
    ) -> None:
        self.path = Path(os.path.abspath(path))
        self.fsync = fsync
        self.read_only = read_only
        self._poisoned = ""
        self.repaired_bytes = 0
        self._lock = threading.Lock()
        self._fd = -1
        self._lock_fd = -1
        if not read_only:
            try:
                self.path.parent.mkdir(parents=True, exist_ok=True)
            except OSError as e:
                raise self._os_error("create the directory of", e) from e
        self._open()
        try:
            # Index under a shared lock, so other processes' readers go on meanwhile; take
            # the exclusive lock only when there is a header to write or a tail to cut.
            with self._locked(exclusive=False):
                clean = self._log.end > 0 and self._log.size == self._log.end
            if not clean and read_only:
                self._log.leave_tail()  # a read-only store repairs nothing
            elif not clean:
                with self._locked(exclusive=True):
                    pass
        except BaseException:
            self._close_fds()
            raise

    def __repr__(self) -> str:
        return f"FilesystemStateStore({str(self.path)!r})"

    # -- the StateStore methods ---------------------------------------------------------

    async def append(
        self, thread_id: str, branch_id: str, records: Sequence[Record], *, after: int
    ) -> None:
        """Append ``records`` to a branch, atomically, if its last sequence is still ``after``.

        Raises:
            ThreadConflictError: The branch's last sequence is not ``after``; nothing stored.
            StateStoreError: A record is not a valid event of this branch, or the file cannot
                be written; nothing stored.
        """
        self._check_writable("append to", thread_id)
        lines = _checks.encode_events(thread_id, branch_id, records, after + 1, path=str(self.path))
        async with Locked(self, exclusive=True):
            found = self._log.records.last_sequence(thread_id, branch_id)
            if found != after:
                raise ThreadConflictError(thread_id, branch_id, after, found)
            ticket = self._commit.write(self._log, lines, records) if lines else 0
        if ticket and must_wait(records):  # off the locks: see _group_commit
            await self._commit.durable(ticket)

    async def read(
        self, thread_id: str, branch_id: str, *, start: int = 1, stop: int | None = None
    ) -> list[Record]:
        """Return the branch's records with ``start <= seq <= stop`` (``None``: to the end)."""
        async with Locked(self, exclusive=False):
            return self._log.read(
                self._fd, self._log.records.locations(thread_id, branch_id, start, stop)
            )

    async def read_tail(
        self, thread_id: str, branch_id: str, *, at: int | None = None
    ) -> list[Record]:
        """Return the records from the last checkpoint at or before ``at`` through ``at``.

        One lock and one read, instead of the three calls of the default.
        """
        async with Locked(self, exclusive=False):
            return self._log.read(self._fd, self._log.records.tail(thread_id, branch_id, at))

    async def last_sequence(self, thread_id: str, branch_id: str) -> int:
        """Return the sequence number of the branch's last record, or 0 if it has none."""
        if self._log.seen is not None and self._unchanged():
            lock = self._lock
            # acquire(False): never wait (positional: the keyword costs 80 ns more). When
            # another thread holds the lock, take the path that waits off the loop.
            if lock.acquire(False):
                try:
                    return self._log.records.last_sequence(thread_id, branch_id)
                finally:
                    lock.release()
        async with Locked(self, exclusive=False):
            return self._log.records.last_sequence(thread_id, branch_id)

    async def last_checkpoint(
        self, thread_id: str, branch_id: str, *, at_or_before: int | None = None
    ) -> int | None:
        """Return the sequence number of the branch's last ``checkpoint`` record.

        Args:
            thread_id: The thread.
            branch_id: The branch.
            at_or_before: Only consider checkpoints with ``seq <= at_or_before``.
        """
        async with Locked(self, exclusive=False):
            return self._log.records.last_checkpoint(thread_id, branch_id, at_or_before)

    async def locate(self, thread_id: str, event_id: str) -> tuple[str, int] | None:
        """Return ``(branch_id, seq)`` of the record with id ``event_id`` in the thread."""
        async with Locked(self, exclusive=False):
            return self._log.records.locate(thread_id, event_id)

    async def create_branch(self, branch: BranchRecord, first: Sequence[Record]) -> bool:
        """Create a branch and append its first records, atomically.

        Returns:
            ``False``, storing nothing, when the thread already has a branch with that id.
        """
        self._check_writable("fork", branch.thread_id)
        lines = _checks.encode_branch(branch, first, path=str(self.path))
        async with Locked(self, exclusive=True):
            if self._log.records.has_branch(branch.thread_id, branch.id):
                return False
            ticket = self._commit.write(self._log, lines, first, branch)
        if ticket:
            await self._commit.durable(ticket)
        return True

    async def list_branches(self, thread_id: str) -> list[BranchRecord]:
        """Return the thread's forked branches, oldest first."""
        async with Locked(self, exclusive=False):
            return self._log.records.list_branches(thread_id)

    async def describe_record(self, thread_id: str, branch_id: str, seq: int) -> RecordPlace | None:
        """Return the file, line and byte offset of the branch's record ``seq``, or ``None``.

        Counts the lines before it, reading the file up to it: for error messages only.
        """
        async with Locked(self, exclusive=False):
            spans = self._log.records.locations(thread_id, branch_id, seq, seq)
            with suppress(OSError):  # then the caller's error goes out without the place
                if spans:
                    line = self._log.line_at(self._fd, spans[0][0])
                    return RecordPlace(str(self.path), line, spans[0][0])
        return None

    async def aclose(self) -> None:
        """Close the file; the store cannot be used afterwards."""
        await self._commit.adrain()  # what was written is flushed first, off the loop
        if self._pid != os.getpid():
            self._lock = threading.Lock()
        lock = self._lock
        if not lock.acquire(blocking=False):
            await wait_for_thread_lock(lock)
        try:
            self._log.save_index(self._fd)  # what this store appended, for the next open
            self._close_fds()
        finally:
            lock.release()

    # -- opening, locking and catching up ------------------------------------------------

    def _open(self) -> None:
        self._log = IndexedLog(self.path, fsync=self.fsync, persist=not self.read_only)
        self._commit = GroupCommit(self)  # set before a descriptor: _close_fds drains it
        try:
            self._fd = (_io.open_ro if self.read_only else _io.open_rw)(self.path)
            self._lock_fd = _io.open_lock_target(self.path, self._fd, optional=self.read_only)
            st = _io.fstat(self._fd)
        except OSError as e:
            self._close_fds()
            raise self._os_error("open", e) from e
        self._ident = (st.st_dev, st.st_ino)
        # A new object per opened file (StateStore.generation), not the inode, which a
        # file made later may reuse: a graph's cached state of the old file then misses.
        self.generation = object()
        self._pid = os.getpid()
        _open_stores.add(self)
        # A store dropped without aclose() must not keep its descriptors open.
        self._closer = weakref.finalize(self, _close_quietly, {self._fd, self._lock_fd})

    def _close_fds(self) -> None:
        closer = getattr(self, "_closer", None)
        if closer is not None:
            closer.detach()
        self._commit.drain()  # a flush still running or due uses the descriptor
        self._log.seen = None
        _close_quietly({self._fd, self._lock_fd})
        self._fd = self._lock_fd = -1

    def _reopen_after_fork(self) -> None:
        # flock locks belong to the open file, which a fork shares: with the parent's
        # descriptor the child would hold the parent's lock and the parent the child's.
        with _fork_lock:
            if self._pid == os.getpid():
                return
            held = self._lock.locked()  # held by a parent thread: the index may be half-built
            self._lock = threading.Lock()
            closed = self._fd == -1
            self._close_fds()
            if not closed:
                log, ident = self._log, self._ident
                self._open()
                if not held and ident == self._ident:  # the same file: the index still holds
                    self._log = log

    def _unchanged(self) -> bool:
        """Tell whether the file is exactly what the index covers, so the index can answer.

        Nothing new can be read then, so no file lock is needed: the answer is the file as
        it was at the ``fstat``. The test is one ``fstat`` of the open file, cheaper than a
        ``stat`` of the path: its size, link count and change time must be those the last
        locked call saw when its index covered the whole file. An append or a cut changes
        the size. A delete, or another file renamed over the path (a restore, a
        compaction), lowers the open file's link count and sets its change time. Any of
        these takes the locked path, which follows a replaced file.
        """
        try:
            return signature(_io.fstat(self._fd)) == self._log.seen
        except OSError:
            return False

    def _sync(self, exclusive: bool) -> bool:
        """Index what other processes appended; as a writer, also repair the file's end.

        The caller holds the file lock. Returns:
            ``False`` when another file was put at the path: this store now has that file
            open, unlocked and not yet indexed; lock it and call again.
        """
        try:
            st = _io.stat(self.path)
            if (st.st_dev, st.st_ino) != self._ident:
                self._follow_replaced_file()
                return False
            self._log.follow(self._fd, st)
            if exclusive and (st.st_size > self._log.end or self._log.end == 0):
                self._repair(st.st_size)
            return True
        except FileNotFoundError as e:
            raise StateStoreError(
                f"{self.path} was deleted or moved while a store had it open; put the file "
                f"back, or create a new FilesystemStateStore to start a new history.",
                path=str(self.path),
            ) from e
        except OSError as e:
            raise self._os_error("access", e) from e

    def _follow_replaced_file(self) -> None:
        # Another program put a new file at the path (a restore from a backup, say). Locks
        # on the old file exclude no one from the new one: the caller locks the new file.
        _io.unlock(self._lock_fd)
        self._close_fds()
        self._open()

    def _check_writable(self, action: str, thread_id: str) -> None:
        if self.read_only:
            raise _file_errors.read_only(self.path, action, thread_id)

    def _repair(self, size: int) -> None:
        """Cut a torn tail and write a missing header; the caller holds the exclusive lock."""
        end = self._log.end
        cut = self._log.repair(self._fd, size)
        if cut:
            # Only a writer that died mid-write leaves this: live writers hold the lock.
            self.repaired_bytes += cut
            logger.warning(
                "%s: cut off %d bytes at byte %d, left by a write that did not finish "
                "(its records were never acknowledged)",
                self.path,
                cut,
                end,
            )

    def _os_error(self, action: str, error: OSError) -> StateStoreError:
        return _file_errors.os_error(self.path, action, error, read_only=self.read_only)


def _close_quietly(fds: set[int]) -> None:
    for fd in fds - {-1}:
        with suppress(OSError):  # only a descriptor that is gone already fails to close
            _io.close(fd)
