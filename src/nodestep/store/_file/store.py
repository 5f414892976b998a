"""``FilesystemStateStore``: every thread's history in one JSON Lines file.

The store shares its file between threads and processes: opening it, taking its two locks
for each call (``_hold``), catching up with what other processes appended, following a file
put in its place, reopening after a fork, and stopping after a failed flush. It holds the
objects that do the rest, handing them the descriptor: ``IndexedLog`` (the records),
``GroupCommit`` (writes and their flushes) and ``LeaseFile`` (the leases). How the file is
kept, and what it guarantees, is described in ``docs/stores.md``.
"""

from __future__ import annotations

import os
import threading
import weakref
from collections.abc import Iterator, Sequence
from contextlib import contextmanager, suppress
from pathlib import Path

from nodestep._errors import StateStoreError, ThreadConflictError
from nodestep.store import _checks, _codec
from nodestep.store._contract import BranchRecord, Lease, Record, RecordPlace, StateStore
from nodestep.store._file import io, rewrite
from nodestep.store._file.group_commit import GroupCommit
from nodestep.store._file.leases import LeaseFile
from nodestep.store._file.locks import wait_for_file_lock, wait_for_thread_lock
from nodestep.store._file.log import IndexedLog, logger, os_error, signature
from nodestep.store._flush import must_flush
from nodestep.store._threads import ThreadPage, ThreadStatus, check_prune, page_threads

__all__ = ["FilesystemStateStore"]

_SHARED, _EXCLUSIVE = False, True
"""The file lock a call holds (``_hold``): shared to read, exclusive to write."""

# Guards the reopen after a fork. A lock another thread held at fork time stays held in the
# child forever, hence a new one in every child.
_fork_lock = threading.Lock()

# The logs of open files, so that a fork can turn off their stores' lock-free reads in the
# child.
_open_logs: weakref.WeakSet[IndexedLog] = weakref.WeakSet()


# Forks this process descends from; a store opened before the last one reopens its file.
# Cheaper than comparing os.getpid() (a system call) on every call of every store.
_forks = 0


def _after_fork_in_child() -> None:
    global _fork_lock, _forks
    _fork_lock = threading.Lock()
    _forks += 1
    # The lock-free read path takes the store's thread lock, which a parent thread may have
    # held at fork time: the child's first call goes through _hold(), which reopens.
    for log in list(_open_logs):
        log.seen = None


if hasattr(os, "register_at_fork"):
    os.register_at_fork(after_in_child=_after_fork_in_child)


class FilesystemStateStore(StateStore):
    """Keep every thread's history in one JSON Lines file that several processes can share.

    Each record is one line of JSON appended to ``path``, with a checksum; the first line
    is a header, and a file without one is refused. Any number of threads and processes
    may share the file: each call locks it for its own length only, and the async methods
    never block the event loop's thread while another holds it. An append is all or
    nothing, also across a crash, and ``append(after=n)`` stores nothing when another
    writer appended to the branch since. A write cut short by a crash is cut off by the
    next writer; a whole line that is not a valid record is never skipped. Calls cost the
    same however long the history: the store keeps an index of the file (and writes it to
    ``<path>.idx``, so a new store need not read the whole file). ``docs/stores.md``
    describes the format, the locking and these guarantees.

    Args:
        path: The history file; created, with its header and missing parent directories,
            when missing or empty (unless ``read_only``).
        fsync: Flush every append to the disk before it returns, so that it survives a
            power loss. Appends waiting at once share one flush, done off the event loop;
            a run's records before its last are flushed with it at the latest. Without it
            (the default) every record is with the operating system when its append
            returns: it survives the process being killed, not a power loss.
        read_only: Open an existing file only to read it (a file this process may not
            write, or a read-only mount). Such a store never creates, repairs or upgrades
            the file (a torn tail is left, and not read), and every write raises
            ``StateStoreError``.

    Attributes:
        path: The history file, as an absolute path.
        fsync: Whether appends are flushed to the disk.
        read_only: Whether the store only reads.
        repaired_bytes: Bytes of unfinished writes this store cut off the file's end;
            0 normally.
        lease_path: The file that holds the leases of the file's threads.

    Raises:
        StateStoreError: The file cannot be opened (with ``read_only``: it does not exist),
            is not a nodestep history (or of a newer format version), or holds a damaged
            record. Later, any call raises it when the file cannot be read or written, and
            every call after a failed flush (the store stops: a new store reads the file
            again).
    """

    def __init__(
        self, path: str | os.PathLike[str], *, fsync: bool = False, read_only: bool = False
    ) -> None:
        self.path = Path(os.path.abspath(path))
        self._spath = str(self.path)  # stat() takes a str faster than a Path
        self.fsync = fsync
        self.read_only = read_only
        self.repaired_bytes = 0
        self._lock = threading.Lock()  # the thread lock; the file lock is on _lock_fd
        self._fd = self._lock_fd = -1
        self._leases = LeaseFile(self.path)
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

    def _display_facts(self) -> tuple[str, str, int | None]:
        return "FilesystemStateStore", str(self.path), None

    @property
    def lease_path(self) -> Path:
        """The file that holds the leases of this history file's threads."""
        return self._leases.path

    # -- the StateStore methods ---------------------------------------------------------
    # Each call holds both locks from ``_hold`` to ``_release``, the file caught up.

    async def append(
        self, thread_id: str, branch_id: str, records: Sequence[Record], *, after: int
    ) -> None:
        """Append ``records`` to a branch, atomically, if its last sequence is still ``after``.

        Raises:
            ThreadConflictError: The branch's last sequence is not ``after``; nothing stored.
            StateStoreError: A record is not a valid event of this branch, or the file cannot
                be written; nothing stored.
        """
        if self.read_only:
            self._check_writable("append to", thread_id)
        lines = _checks.encode_events(thread_id, branch_id, records, after + 1, path=self._spath)
        if not self._hold_now(_EXCLUSIVE):
            await self._hold(_EXCLUSIVE)
        try:
            found = self._log.records.last_sequence(thread_id, branch_id)
            if found != after:
                raise ThreadConflictError(thread_id, branch_id, after, found)
            ticket = self._commit.write(self._log, lines, records) if lines else 0
        finally:
            self._release()
        if ticket and must_flush(records):  # off the locks: see group_commit
            await self._commit.durable(ticket)

    async def read(
        self, thread_id: str, branch_id: str, *, start: int = 1, stop: int | None = None
    ) -> list[Record]:
        """Return the branch's records with ``start <= seq <= stop`` (``None``: to the end)."""
        await self._hold(_SHARED)
        try:
            log = self._log
            return log.read(self._fd, log.records.locations(thread_id, branch_id, start, stop))
        finally:
            self._release()

    async def read_tail(
        self, thread_id: str, branch_id: str, *, at: int | None = None
    ) -> list[Record]:
        """Return the records from the last checkpoint at or before ``at`` through ``at``.

        One lock and one read, instead of the three calls of the default.
        """
        await self._hold(_SHARED)
        try:
            return self._log.read(self._fd, self._log.records.tail(thread_id, branch_id, at))
        finally:
            self._release()

    async def last_sequence(self, thread_id: str, branch_id: str) -> int:
        """Return the sequence number of the branch's last record, or 0 if it has none."""
        return (await self.last_record(thread_id, branch_id))[0]

    async def last_record(self, thread_id: str, branch_id: str) -> tuple[int, None]:
        """Return the branch's last sequence number, and no id: ``generation`` tells a
        graph's cache of another file at the path, as after ``delete_thread``'s rewrite."""
        if self._log.seen is not None and self._unchanged():
            lock = self._lock
            # acquire(False): never wait (positional: the keyword costs 80 ns more). When
            # another thread holds the lock, take the path that waits off the loop.
            if lock.acquire(False):
                try:
                    return self._log.records.last_sequence(thread_id, branch_id), None
                finally:
                    lock.release()
        await self._hold(_SHARED)
        try:
            return self._log.records.last_sequence(thread_id, branch_id), None
        finally:
            self._release()

    async def last_checkpoint(
        self, thread_id: str, branch_id: str, *, at_or_before: int | None = None
    ) -> int | None:
        """Return the sequence number of the branch's last ``checkpoint`` record.

        Args:
            thread_id: The thread.
            branch_id: The branch.
            at_or_before: Only consider checkpoints with ``seq <= at_or_before``.
        """
        await self._hold(_SHARED)
        try:
            return self._log.records.last_checkpoint(thread_id, branch_id, at_or_before)
        finally:
            self._release()

    async def locate(self, thread_id: str, event_id: str) -> tuple[str, int] | None:
        """Return ``(branch_id, seq)`` of the record with id ``event_id`` in the thread."""
        await self._hold(_SHARED)
        try:
            return self._log.records.locate(thread_id, event_id)
        finally:
            self._release()

    async def create_branch(self, branch: BranchRecord, first: Sequence[Record]) -> bool:
        """Create a branch and append its first records, atomically.

        Returns:
            ``False``, storing nothing, when the thread already has a branch with that id.
        """
        self._check_writable("fork", branch.thread_id)
        lines = _checks.encode_branch(branch, first, path=str(self.path))
        await self._hold(_EXCLUSIVE)
        try:
            if self._log.records.has_branch(branch.thread_id, branch.id):
                return False
            ticket = self._commit.write(self._log, lines, first, branch)
        finally:
            self._release()
        if ticket:
            await self._commit.durable(ticket)
        return True

    async def store_pruned(
        self,
        thread_id: str,
        branch_id: str,
        records: Sequence[Record],
        branch: BranchRecord | None = None,
    ) -> None:
        """Store a pruned branch the file does not have: its kept records.

        See ``StateStore.store_pruned``. Written as ``prune`` writes a pruned branch: the
        file is rewritten (format version 4) with the branch's lines at its end, a
        ``start`` line before its first record. A rewrite, not an append: the version in
        the header must say so before any ``start`` line is in the file, and a rename
        makes both land at once.
        """
        self._check_writable("import", thread_id)
        lines = _checks.encode_pruned(thread_id, branch_id, records, branch, path=str(self.path))
        seq: int = records[0]["seq"]
        head = [] if branch is None else [_codec.encode_branch(branch)]
        start = _codec.start_line(thread_id, branch_id, seq, True)
        await self._hold(_EXCLUSIVE)
        try:
            self._log.records.check_absent(thread_id, branch_id)
            self._rewrite(lambda _: True, {(thread_id, branch_id): seq}, [*head, start, *lines])
        finally:
            self._release()

    async def list_branches(self, thread_id: str) -> list[BranchRecord]:
        """Return the thread's forked branches, oldest first."""
        await self._hold(_SHARED)
        try:
            return self._log.records.list_branches(thread_id)
        finally:
            self._release()

    async def find_request(self, thread_id: str, branch_id: str, key: str) -> int | None:
        """Return the ``seq`` of the branch's ``run_started`` record with request key ``key``.

        From the index, which indexing the file's records keeps: no read of the history.
        """
        await self._hold(_SHARED)
        try:
            return self._log.records.find_request(thread_id, branch_id, key)
        finally:
            self._release()

    async def describe_record(self, thread_id: str, branch_id: str, seq: int) -> RecordPlace | None:
        """Return the file, line and byte offset of the branch's record ``seq``, or ``None``.

        Counts the lines before it, reading the file up to it: for error messages only.
        """
        await self._hold(_SHARED)
        try:
            spans = self._log.records.locations(thread_id, branch_id, seq, seq)
            with suppress(OSError):  # then the caller's error goes out without the place
                if spans:
                    line = self._log.line_at(self._fd, spans[0][0])
                    return RecordPlace(str(self.path), line, spans[0][0])
        finally:
            self._release()
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

    # -- leases, in <path>.leases ---------------------------------------------------------

    async def acquire_lease(
        self, thread_id: str, branch_id: str, holder: str, *, ttl: float
    ) -> Lease:
        """Take the branch for ``holder`` for ``ttl`` seconds; see ``StateStore``.

        Raises:
            ThreadBusyError: another holder's lease is current; nothing changed.
        """
        self._check_writable("take a lease on", thread_id)
        await self._hold(_EXCLUSIVE)
        try:
            return self._leases.acquire(thread_id, branch_id, holder, ttl)
        finally:
            self._release()

    async def renew_lease(self, lease: Lease) -> Lease:
        """Extend ``lease`` by its ttl; see ``StateStore``.

        Raises:
            ThreadBusyError: the lease was lost (``lost``).
        """
        await self._hold(_EXCLUSIVE)
        try:
            return self._leases.renew(lease)
        finally:
            self._release()

    async def release_lease(self, lease: Lease) -> None:
        """Give the branch back, if ``lease`` still holds it; see ``StateStore``."""
        await self._hold(_EXCLUSIVE)
        try:
            self._leases.release(lease)
        finally:
            self._release()

    # -- thread management: a listing from the index, drops by rewriting the file ----------

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

        See ``StateStore.list_threads``; the answer comes from the store's index.
        """
        await self._hold(_SHARED)
        try:
            infos = self._log.records.thread_infos()
        finally:
            self._release()
        return page_threads(
            infos,
            status=status,
            active_after=active_after,
            active_before=active_before,
            limit=limit,
            cursor=cursor,
        )

    async def delete_thread(self, thread_id: str) -> bool:
        """Delete every record and branch of a thread; return ``False`` if it had none.

        The file is rewritten without the thread's lines, so they are gone from the disk
        (see ``nodestep.store._file.rewrite``); a kill during it leaves the old file or the
        new.
        """
        self._check_writable("delete", thread_id)
        await self._hold(_EXCLUSIVE)
        try:
            if not self._log.records.has_thread(thread_id):
                return False

            def keep(record: Record) -> bool:
                return bool(record.get("thread") != thread_id)

            self._rewrite(keep)
        finally:
            self._release()
        return True

    async def prune(
        self,
        thread_id: str | None = None,
        *,
        keep_last: int | None = None,
        older_than: float | None = None,
    ) -> int:
        """Drop history before a checkpoint, keeping every branch loadable; return the count.

        See ``StateStore.prune``. The file is rewritten without the dropped lines, as by
        ``delete_thread``; when nothing is dropped it is left as it is.
        """
        check_prune(keep_last, older_than)
        if thread_id is not None or not self.read_only:
            self._check_writable("prune", "" if thread_id is None else thread_id)
        else:
            raise StateStoreError(
                f"Cannot prune the threads of {self.path}: the store was opened with "
                f"read_only=True, and only reads. Nothing was dropped; open the file with "
                f"FilesystemStateStore(path) to prune it.",
                path=str(self.path),
            )
        await self._hold(_EXCLUSIVE)
        try:
            index = self._log.records
            cuts = index.prune_cuts(thread_id, keep_last, older_than)
            if not cuts:
                return 0
            dropped = sum(cut - index.branches[key].first_seq for key, cut in cuts.items())

            def keep(record: Record) -> bool:
                cut = cuts.get((record["thread"], record["branch"]))
                if cut is None or record["type"] == "branch":
                    return True
                # A start line of an earlier prune makes way for the new one.
                return bool(record["type"] != "start" and record["seq"] >= cut)

            self._rewrite(keep, cuts)
        finally:
            self._release()
        return dropped

    def _rewrite(
        self,
        keep: rewrite.Keep,
        starts: dict[tuple[str, str], int] | None = None,
        extra: list[bytes] | None = None,
    ) -> None:
        """Rewrite the file through ``keep``, ``extra`` lines after; the caller holds the
        exclusive lock.

        The store then has the new file open, and indexes it on its next call.
        """
        try:
            rewrite.rewrite(self.path, self._fd, self._log.end, keep, starts, extra)
        except OSError as e:
            raise StateStoreError(
                f"Cannot rewrite {self.path} without the records to drop: {e.strerror or e} "
                f"(errno {e.errno}). Nothing was dropped: the file is as it was. Free disk "
                f"space (the rewrite needs room for a copy) or check the directory's "
                f"permissions, and try again.",
                path=str(self.path),
            ) from e
        self._log.seen = None  # the next call follows the new file at the path

    # -- holding the file: both locks, the file caught up ---------------------------------

    async def _hold(self, exclusive: bool) -> None:
        """Take the thread lock and the file lock, and catch up with the file; ``_release``.

        Never blocks the event loop's thread: each lock is tried without waiting, which is
        all an uncontended call costs, and one held elsewhere (the thread lock by another
        thread, the file lock by another process) is waited for in a worker thread; a
        cancellation then returns at once and leaves no lock held (see ``locks``). Not an
        ``async with`` object, which would cost an object and two coroutines more on the
        path of every append. On an error nothing is held.
        """
        if self._hold_now(exclusive):
            return
        lock = self._lock
        if not lock.acquire(False):  # never wait (positional: the keyword costs 80 ns more)
            await wait_for_thread_lock(lock)
        while True:
            try:
                self._check_usable()
                fd = self._lock_fd
                try:
                    taken = io.try_lock(fd, exclusive=exclusive)
                except OSError as e:
                    raise self._os_error("lock", e) from e
            except BaseException:
                lock.release()
                raise
            if not taken:
                try:
                    await wait_for_file_lock(lock, fd, exclusive=exclusive)
                except OSError as e:  # the thread lock was given back
                    raise self._os_error("lock", e) from e
            try:
                if self._catch_up(exclusive):
                    return
            except BaseException:
                self._unlock_file()
                lock.release()
                raise

    def _hold_now(self, exclusive: bool) -> bool:
        """Do what ``_hold`` does if no lock is held elsewhere; return whether it did.

        The uncontended case, without a coroutine: the hottest path of the store, which an
        append takes directly. ``False`` holds nothing: ``_hold`` then waits for the locks.
        On an error nothing is held.
        """
        if self._forks != _forks:
            self._reopen_after_fork()
        lock = self._lock
        if not lock.acquire(False):  # positional: the keyword costs 80 ns more
            return False
        try:
            self._check_usable()
            if not io.try_lock(self._lock_fd, exclusive=exclusive):
                lock.release()
                return False
        except OSError as e:
            lock.release()
            raise self._os_error("lock", e) from e
        except BaseException:
            lock.release()
            raise
        try:
            if self._catch_up(exclusive):
                return True
        except BaseException:
            self._unlock_file()
            lock.release()
            raise
        self._unlock_file()  # another file at the path, now open: ``_hold`` locks it
        lock.release()
        return False

    def _release(self) -> None:
        """Give back what ``_hold`` took."""
        try:  # noqa: SIM105 - _unlock_file, inline: every call of the store comes here
            io.unlock(self._lock_fd)
        except OSError:  # only a closed descriptor fails, and closing unlocks
            pass
        self._lock.release()

    @contextmanager
    def _locked(self, *, exclusive: bool) -> Iterator[None]:
        """Hold both locks, the file caught up, waiting on this thread: for the constructor."""
        with self._lock:
            self._check_usable()
            while True:
                try:
                    io.lock(self._lock_fd, exclusive=exclusive)
                except OSError as e:
                    raise self._os_error("lock", e) from e
                try:
                    if self._catch_up(exclusive):
                        break
                except BaseException:
                    self._unlock_file()
                    raise
            try:
                yield
            finally:
                self._unlock_file()

    def _check_usable(self) -> None:
        if self._commit.stopped:
            raise StateStoreError(self._commit.stopped, path=str(self.path))
        if self._fd == -1:
            raise StateStoreError(
                f"The store of {self.path} is closed; create a new FilesystemStateStore "
                f"to use the file again.",
                path=str(self.path),
            )

    def _unlock_file(self) -> None:
        # The descriptor now: a replaced file's was closed (-1), and closing unlocks it.
        # try/except rather than suppress(): every call of the store comes here, and a
        # suppress object cost more than the unlock.
        try:  # noqa: SIM105 - see above: suppress() cost more than the unlock
            io.unlock(self._lock_fd)
        except OSError:  # only a closed descriptor fails, and closing unlocks
            pass

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
            # os.fstat itself but for a test's faults: one call fewer on every get_state.
            st = os.fstat(self._fd) if io.faults is None else io.fstat(self._fd)
        except OSError:
            return False
        return signature(st) == self._log.seen

    def _catch_up(self, exclusive: bool) -> bool:
        """Index what other processes appended; as a writer, also repair the file's end.

        The caller holds the file lock. Returns:
            ``False`` when another file was put at the path: this store now has that file
            open, unlocked and not yet indexed; lock it and call again.
        """
        try:
            st = io.stat(self._spath)
            if st.st_ino != self._ident[1] or st.st_dev != self._ident[0]:
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

    # -- opening the file, and opening it again --------------------------------------------

    def _open(self, stopped: str = "") -> None:
        """Open the file at the path, with a new log and group commit for it.

        Args:
            stopped: Why the store stopped already, for the new group commit to keep.
        """
        self._log = IndexedLog(self.path, fsync=self.fsync, persist=not self.read_only)
        try:
            self._fd = (io.open_ro if self.read_only else io.open_rw)(self.path)
            self._lock_fd = io.open_lock_target(self.path, self._fd, optional=self.read_only)
            st = io.fstat(self._fd)
        except OSError as e:
            _close_quietly({self._fd, self._lock_fd})
            self._fd = self._lock_fd = -1
            raise self._os_error("open", e) from e
        self._commit = GroupCommit(self.path, self._fd, self._lock_fd, self._lock, stopped)
        self._ident = (st.st_dev, st.st_ino)
        # A new object per opened file (StateStore.generation), not the inode, which a
        # file made later may reuse: a graph's cached state of the old file then misses.
        self.generation = object()
        self._pid = os.getpid()
        self._forks = _forks
        _open_logs.add(self._log)
        # A store dropped without aclose() must not keep its descriptors open.
        self._closer = weakref.finalize(self, _close_quietly, {self._fd, self._lock_fd})

    def _close_fds(self) -> None:
        self._closer.detach()
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
                self._open(self._commit.stopped)
                if not held and ident == self._ident:  # the same file: the index still holds
                    self._log = log

    def _follow_replaced_file(self) -> None:
        # Another program put a new file at the path (a restore from a backup, say). Locks
        # on the old file exclude no one from the new one: the caller locks the new file.
        io.unlock(self._lock_fd)
        self._close_fds()
        self._open(self._commit.stopped)

    def _check_writable(self, action: str, thread_id: str) -> None:
        if self.read_only:
            raise StateStoreError(
                f"Cannot {action} thread {thread_id!r}: the store of {self.path} was opened "
                f"with read_only=True, and only reads. Nothing was stored; open the file with "
                f"FilesystemStateStore(path) to write to it.",
                path=str(self.path),
            )

    def _os_error(self, action: str, error: OSError) -> StateStoreError:
        return os_error(self.path, action, error, read_only=self.read_only)


def _close_quietly(fds: set[int]) -> None:
    for fd in fds - {-1}:
        with suppress(OSError):  # only a descriptor that is gone already fails to close
            io.close(fd)
