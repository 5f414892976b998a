"""Group commit for ``FilesystemStateStore(fsync=True)``: one flush for many appends.

An append writes its bytes under the store's locks, then leaves the locks and waits, off
the event loop, until a flush covers them. While one flush runs, later appends (other tasks,
other threads of this process) write theirs and wait for the next, which covers them all:
the number of flushes follows the disk's speed, not the number of appends.

Why the wait is off the locks: a flush holding the locks would let no other append write
meanwhile, so every append would pay a whole flush again. Other processes may then read
bytes not yet on the disk, as within this process; any later flush of the file, theirs
included, covers them (``fsync`` flushes the file, not a descriptor's writes).

Which appends wait (``nodestep.store._flush.must_flush``): an append returns once its
records are on the disk, except one that only holds records a run writes before its end.
Those are flushed by the next append that waits, at the latest the run's own last record,
before the call that runs the graph returns. A power loss can then cut a running call's
records after the last flush, never records of a call that returned: the file is a prefix
of what was written, and an acknowledged append has everything before it on the disk.

A failed flush: every append not yet covered fails (none reports success), the store is
stopped (``GroupCommit.stopped``), and the unflushed bytes are cut off the file again when
nothing else was written after or between them; see ``GroupCommit._failed``.
"""

from __future__ import annotations

import os
import threading
from collections.abc import Sequence
from contextlib import suppress
from itertools import pairwise
from pathlib import Path

import anyio
import anyio.to_thread

from nodestep._errors import StateStoreError
from nodestep.store._contract import BranchRecord, Record
from nodestep.store._file import io
from nodestep.store._file.log import FsyncFailed, IndexedLog

__all__ = ["GroupCommit"]


class GroupCommit:
    """The writes and flushes of one open history file, shared by the appends that wait.

    Writes get tickets in the order they are written (``written``); ``flushed`` is the last
    ticket a finished flush covers. A flush covers the tickets given out before it starts.
    ``cond`` guards the counters; the flush itself runs without it. The store makes one
    for each file it opens, and ``drain``s it before it closes the file.

    Args:
        path: The history file, named in errors.
        fd: Its descriptor, which the store appends through.
        lock_fd: The descriptor its file lock is taken on (``fd`` but on Windows).
        lock: The store's thread lock: a failed flush takes it, and the file lock, to cut
            the bytes no flush covered.
        stopped: Why the store stopped already (a failed flush of the file it had open
            before this one), or ``""``.

    Attributes:
        stopped: Why the store stopped, after a failed flush; ``""`` while it runs. The
            store refuses every call once it is set.
    """

    def __init__(
        self, path: Path, fd: int, lock_fd: int, lock: threading.Lock, stopped: str = ""
    ) -> None:
        self.path = path
        self.fd = fd
        self.lock_fd = lock_fd
        self.lock = lock
        self.stopped = stopped
        self.pid = os.getpid()
        self.cond = threading.Condition(threading.Lock())
        self.written = 0  # the last ticket given out
        self.flushed = 0  # the last ticket on the disk
        self.flushing = False
        self.failed: OSError | None = None
        self.closing = False
        # (ticket, start, end) of each write not yet flushed: what a failed flush cuts.
        self.unflushed: list[tuple[int, int, int]] = []
        # Per event loop (its thread), the task waiting in a worker; the others wait on it.
        self.leaders: dict[int, anyio.Event] = {}

    def write(
        self,
        log: IndexedLog,
        lines: list[bytes],
        events: Sequence[Record],
        branch: BranchRecord | None = None,
    ) -> int:
        """Append ``lines`` to the file and index them in ``log`` (see ``IndexedLog.append``).

        The caller holds the store's locks, so tickets follow the order in the file.

        Returns:
            The ticket to pass to ``durable``; 0 without ``fsync`` (nothing to wait for).

        Raises:
            StateStoreError: Nothing was stored: the write failed, or the flush of an
                upgraded header did (which stops the store).
        """
        fd = self.fd
        try:
            start, end = log.append(fd, lines, events, branch)
        except FsyncFailed as e:
            raise self.stop(e.error) from e.error
        if not log.fsync:
            return 0
        with self.cond:
            ticket = self.written = self.written + 1
            self.unflushed.append((ticket, start, end))
            return ticket

    def stop(self, error: OSError) -> StateStoreError:
        """Stop the store after the failed flush ``error``; return the error to raise.

        After a failed fsync the kernel may already have dropped the dirty pages and will
        report later fsyncs as fine, so the store can no longer vouch for the file: it
        refuses every later call, and a new store re-reads the file from the disk.
        """
        if not self.stopped:
            self.stopped = _stopped_after_fsync(self.path, error)
        return StateStoreError(self.stopped, path=str(self.path))

    async def durable(self, ticket: int) -> None:
        """Return once a flush covered ``ticket``; never blocks the event loop.

        Shielded from cancellation: the bytes are written already, and an append that
        returns must have them on the disk; a flush takes a fraction of a millisecond.

        Raises:
            StateStoreError: The flush failed (this one or an earlier one of this file);
                the store is stopped.
        """
        with anyio.CancelScope(shield=True):
            while self.flushed < ticket and self.failed is None:
                key = threading.get_ident()
                waiting = self.leaders.get(key)
                if waiting is not None:  # another task of this loop waits in a worker
                    await waiting.wait()
                    continue
                done = self.leaders[key] = anyio.Event()
                try:
                    await anyio.to_thread.run_sync(
                        self._flush_through, ticket, limiter=anyio.CapacityLimiter(1)
                    )
                except FsyncFailed:
                    break
                finally:
                    del self.leaders[key]
                    done.set()
        if self.flushed < ticket and self.failed is not None:
            raise self.stop(self.failed) from self.failed

    def drain(self) -> None:
        """Flush what was written and not yet flushed, on this thread (for closing).

        Errors are kept in ``failed``: the appends that wait for these bytes report them.
        """
        if self.pid != os.getpid():  # a fork's copy: the parent's flushes are not ours
            return
        with self.cond:
            self.closing = True
            target = self.written
        if self.flushed < target and self.failed is None:
            with suppress(FsyncFailed):  # kept in ``failed``, for the waiting appends
                self._flush_through(target)

    async def adrain(self) -> None:
        """``drain`` off the event loop, for ``aclose``."""
        if self.flushed < self.written and self.failed is None:
            with anyio.CancelScope(shield=True):
                await anyio.to_thread.run_sync(self.drain, limiter=anyio.CapacityLimiter(1))

    def _flush_through(self, ticket: int) -> None:
        """Block until a flush covers ``ticket``, flushing when no one else does."""
        cond = self.cond
        with cond:
            while self.flushing:
                cond.wait()
            if self.flushed >= ticket:
                return
            if self.failed is not None:
                raise FsyncFailed(self.failed)
            self.flushing = True
            target = self.written
        try:
            io.fsync(self.fd)
        except OSError as e:
            self._failed(e)
            raise FsyncFailed(e) from e
        with cond:
            self.flushed = target
            self.flushing = False
            self.unflushed = [w for w in self.unflushed if w[0] > target]
            cond.notify_all()

    def _failed(self, error: OSError) -> None:
        """Stop the store, cut the unflushed bytes when that is safe, wake every waiter.

        After a failed fsync the kernel may have dropped the dirty pages and report later
        flushes as fine, so nothing written since the last good flush can be vouched for.
        The cut takes both locks. It is skipped when another process wrote after or between
        these bytes (a cut would take its records too): then the records stay in the file,
        reported as failed, and the next store reads them as they are on the disk.
        """
        self.stop(error)
        lock = self.lock
        # Not a plain acquire: ``drain`` may hold the thread lock while waiting for this.
        taken = False
        while not self.closing and not (taken := lock.acquire(timeout=0.01)):
            pass
        try:
            # Not closing, under the thread lock: the store still has this file open, so
            # the descriptors are this file's (a number reused by a file opened since is not).
            if taken and not self.closing:
                self._cut()
        finally:
            if taken:
                lock.release()
            with self.cond:
                self.failed = error
                self.flushing = False
                self.cond.notify_all()

    def _cut(self) -> None:
        writes = self.unflushed
        if not writes or any(a[2] != b[1] for a, b in pairwise(writes)):
            return
        try:
            io.lock(self.lock_fd, exclusive=True)
        except OSError:
            return  # the store stops anyway; a new one reads what is on the disk
        try:
            if io.fstat(self.fd).st_size == writes[-1][2]:
                io.truncate(self.fd, writes[0][1])
        except OSError:  # as above: a new store reads only whole records
            return
        finally:
            with suppress(OSError):  # only a closed descriptor fails, and closing unlocks
                io.unlock(self.lock_fd)


def _stopped_after_fsync(path: Path, error: OSError) -> str:
    """Return why a store stopped after a failed flush; every later call raises it."""
    what = f"{error.strerror or error} (errno {error.errno})"
    return (
        f"The store of {path} stopped after fsync failed ({what}); the appends that waited "
        f"for that flush were not stored (each of them raised this error, and what they "
        f"wrote was cut off again where no other process wrote after it). Check the disk, "
        f"then create a new FilesystemStateStore for the file: it reads the file again."
    )
