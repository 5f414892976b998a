"""Every raw file operation of the file store, in one place: the I/O seam.

``FilesystemStateStore`` touches its file only through these functions, so a test can make
any of them fail on purpose by setting ``faults`` (a ``FaultPlan``), the way SQLite's test
VFS does. ``faults`` is for tests only; it is ``None`` in normal use and then costs one
comparison per operation.

Locking: on Linux and macOS the data file itself is locked with ``fcntl.flock`` (what
portalocker does on POSIX, called directly because portalocker's checks cost five times the
lock itself). Windows has no shared locks without pywin32, and an ``msvcrt`` lock blocks
reading the locked bytes, so there the store takes an exclusive portalocker (``msvcrt``) lock
on a separate ``<path>.lock`` file for reads and writes alike. ``try_lock`` never waits;
``lock`` waits as long as another holder keeps the lock, so the async store calls it only
from a worker thread. Where neither lock exists (e.g. Python built for WebAssembly), nodestep
still imports, and ``open_rw`` refuses: sharing the file unlocked could corrupt it.
"""

from __future__ import annotations

import errno
import os
import signal
import sys
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import NoReturn

from nodestep._errors import StateStoreError

__all__ = [
    "FaultPlan",
    "close",
    "faults",
    "fstat",
    "fsync",
    "fsync_dir",
    "lock",
    "open_in_place",
    "open_lock_target",
    "open_ro",
    "open_rw",
    "pread",
    "pread_spans",
    "pwrite",
    "stat",
    "truncate",
    "try_lock",
    "unlock",
    "write_all",
]

WINDOWS = sys.platform == "win32"

_ReadFn = Callable[[int, int], bytes]


@dataclass
class FaultPlan:
    """Make the I/O seam fail on purpose; for tests only.

    Attributes:
        fail_op: The operation to fail: ``"open"``, ``"stat"``, ``"fstat"``, ``"pread"``,
            ``"write"``, ``"pwrite"``, ``"fsync"``, ``"fsync_dir"``, ``"truncate"``,
            ``"rename"`` or ``"lock"`` (``try_lock`` and ``lock`` count as ``"lock"``).
        fail_at: Fail the ``fail_at``-th call of ``fail_op`` (1-based) and every later one.
        fail_count: How many calls fail from ``fail_at`` on (``None``: all of them).
        error: The ``errno`` of the ``OSError`` raised.
        write_bytes: When failing a write, really write this many bytes first (a short write).
        crash: Instead of raising, kill this process with ``SIGKILL``, as a crash would.
        skip_locks: Take no locks at all, to prove that a concurrency test can fail.
        log: Every operation done while the plan is set: ``(name, offset, size)``. A
            ``write`` (at the file's size, its offset) is followed by ``written`` once done,
            an ``fsync`` by ``fsynced``: what was written before the one is on the disk
            after the other. A power-loss simulation rebuilds from them what a crash leaves.
    """

    fail_op: str | None = None
    fail_at: int = 1
    fail_count: int | None = None
    error: int = errno.ENOSPC
    write_bytes: int = 0
    crash: bool = False
    skip_locks: bool = False
    log: list[tuple[str, int, int]] = field(default_factory=list)
    _calls: dict[str, int] = field(default_factory=dict)

    def check(self, op: str, offset: int = 0, size: int = 0) -> bool:
        """Log ``op`` and return True when this call of it must fail."""
        self.log.append((op, offset, size))
        if op != self.fail_op:
            return False
        n = self._calls[op] = self._calls.get(op, 0) + 1
        if n < self.fail_at:
            return False
        return self.fail_count is None or n < self.fail_at + self.fail_count

    def reads(self) -> list[tuple[int, int]]:
        """Return ``(offset, size)`` of every ``pread`` logged so far."""
        return [(offset, size) for op, offset, size in self.log if op == "pread"]

    def fail(self) -> NoReturn:
        """Raise the plan's ``OSError``, or kill the process if the plan is a crash."""
        if self.crash:
            os.kill(os.getpid(), signal.SIGKILL)
        raise OSError(self.error, f"{os.strerror(self.error)} (injected by a test)")


faults: FaultPlan | None = None
"""The active ``FaultPlan``; tests set it and reset it to ``None``."""


def _fault(op: str, offset: int = 0, size: int = 0) -> None:
    if faults is not None and faults.check(op, offset, size):
        faults.fail()


def open_rw(path: Path) -> int:
    """Open ``path`` for reading and appending, creating it when missing.

    Raises:
        StateStoreError: this platform has no file lock (checked before the file is made).
    """
    if _no_locks is not None:
        _refuse_unlocked(path, _no_locks)
    _fault("open")
    # O_APPEND: the kernel puts every write at the current end of the file, even when
    # another process appended since we last looked. O_BINARY (Windows): no newline changes.
    flags = os.O_RDWR | os.O_CREAT | os.O_APPEND | getattr(os, "O_BINARY", 0)
    return os.open(path, flags, 0o644)


def open_ro(path: Path) -> int:
    """Open the existing file ``path`` for reading only, for a read-only store.

    Raises:
        StateStoreError: this platform has no file lock.
        OSError: the file is missing or cannot be read (``FileNotFoundError`` ...).
    """
    if _no_locks is not None:
        _refuse_unlocked(path, _no_locks)
    _fault("open")
    return os.open(path, os.O_RDONLY | getattr(os, "O_BINARY", 0))


def open_in_place(path: Path) -> int:
    """Open the existing file ``path`` for writing at chosen offsets (see ``pwrite``)."""
    _fault("open")
    # Not O_APPEND: with it, Linux writes at the file's end whatever offset pwrite is given.
    return os.open(path, os.O_WRONLY | getattr(os, "O_BINARY", 0))


def open_lock_target(path: Path, fd: int, *, optional: bool = False) -> int:
    """Return the descriptor to lock for the data file ``path`` open as ``fd``.

    On Linux and macOS that is ``fd`` itself: ``flock`` needs no write access, so a
    read-only descriptor takes the shared lock too. On Windows it is ``<path>.lock``; when
    that cannot be opened and the lock is ``optional`` (a read-only store), ``-1``: no lock,
    which ``try_lock``, ``lock`` and ``unlock`` then take and release at once.
    """
    if not WINDOWS:
        return fd
    try:
        return open_rw(path.with_name(path.name + ".lock"))
    except OSError:
        if optional:
            return -1
        raise


def close(fd: int) -> None:
    """Close ``fd``."""
    os.close(fd)


def stat(path: str | Path) -> os.stat_result:
    """Return the status of the file now at ``path``."""
    if faults is not None:  # not _fault(): every call of the store stats the file
        _fault("stat")
    return os.stat(path)


def fstat(fd: int) -> os.stat_result:
    """Return the status of the open file ``fd``."""
    _fault("fstat")
    return os.fstat(fd)


def pread(fd: int, size: int, offset: int) -> bytes:
    """Read ``size`` bytes at ``offset``, fewer only at the end of the file."""
    _fault("pread", offset, size)
    if WINDOWS:  # no os.pread there; the store's thread lock guards the shared position
        os.lseek(fd, offset, os.SEEK_SET)
        return _read_all(lambda n, _: os.read(fd, n), size, offset)
    return _read_all(lambda n, at: os.pread(fd, n, at), size, offset)


def pread_spans(fd: int, spans: list[tuple[int, int]]) -> list[bytes]:
    """Return the bytes of each ``(offset, size)`` span, with one ``pread`` per run of them.

    A branch's records are mostly adjacent in the file, so reading a range of them is
    mostly one read.

    Raises:
        OSError: A read failed.
        EOFError: The file ends before a span does; the message says where.
    """
    out: list[bytes] = []
    i, n = 0, len(spans)
    while i < n:
        start, size = spans[i]
        end, j = start + size, i + 1
        while j < n and spans[j][0] == end:
            end += spans[j][1]
            j += 1
        data = pread(fd, end - start, start)
        if len(data) < end - start:
            raise EOFError(f"{start + len(data)} bytes, {end} expected")
        out.extend(data[offset - start : offset - start + size] for offset, size in spans[i:j])
        i = j
    return out


def _read_all(read: _ReadFn, size: int, offset: int) -> bytes:
    data = read(size, offset)
    if len(data) == size or not data:
        return data
    parts = [data]  # a short read is legal for large sizes; keep reading up to EOF
    got = len(data)
    while got < size:
        more = read(size - got, offset + got)
        if not more:
            break
        parts.append(more)
        got += len(more)
    return b"".join(parts)


def write_all(fd: int, data: bytes) -> None:
    """Append all of ``data``: ``os.write`` may write only part of it."""
    plan = faults
    if plan is not None:
        offset = os.fstat(fd).st_size
        if plan.check("write", offset, len(data)):
            if plan.write_bytes:
                os.write(fd, data[: plan.write_bytes])
            plan.fail()
    n = os.write(fd, data)
    if n < len(data):  # a short write, rare: write the rest without copying it
        view = memoryview(data)[n:]
        while view:
            view = view[os.write(fd, view) :]
    if plan is not None:
        plan.log.append(("written", offset, len(data)))


def pwrite(fd: int, data: bytes, offset: int) -> None:
    """Write all of ``data`` at ``offset`` of ``fd``, a descriptor from ``open_in_place``."""
    if faults is not None and faults.check("pwrite", offset, len(data)):
        if faults.write_bytes:
            _pwrite_all(fd, data[: faults.write_bytes], offset)
        faults.fail()
    _pwrite_all(fd, data, offset)


def _pwrite_all(fd: int, data: bytes, offset: int) -> None:
    view = memoryview(data)
    while view:
        if WINDOWS:  # no os.pwrite there; the descriptor is this call's own
            os.lseek(fd, offset, os.SEEK_SET)
            n = os.write(fd, view)
        else:
            n = os.pwrite(fd, view, offset)
        view, offset = view[n:], offset + n


def fsync(fd: int) -> None:
    """Flush ``fd`` to the storage device."""
    plan = faults
    _fault("fsync")
    os.fsync(fd)
    if plan is not None:
        plan.log.append(("fsynced", 0, 0))


def fsync_dir(path: Path) -> None:
    """Flush the directory ``path``, so a file just created in it survives power loss."""
    _fault("fsync_dir")
    if WINDOWS:  # directories cannot be opened there; NTFS journals the entry itself
        return
    dir_fd = os.open(path, os.O_RDONLY)
    try:
        os.fsync(dir_fd)
    finally:
        os.close(dir_fd)


def rename(source: Path, target: Path) -> None:
    """Rename ``source`` over ``target``, atomically: a crash leaves one or the other."""
    _fault("rename")
    os.replace(source, target)


def truncate(fd: int, size: int) -> None:
    """Cut the file ``fd`` to ``size`` bytes."""
    _fault("truncate", size)
    os.ftruncate(fd, size)


_no_locks: ImportError | None = None  # why this platform cannot lock files; None: it can


def _refuse_unlocked(path: Path, error: ImportError) -> NoReturn:
    module = "portalocker" if WINDOWS else "fcntl"
    fix = (
        "Install it (pip install portalocker; nodestep requires it on Windows), or use "
        if WINDOWS
        else "Use "
    )
    raise StateStoreError(
        f"FilesystemStateStore cannot lock '{path}' on this platform ({sys.platform}): the "
        f"{module} module is missing ({error}). Without a file lock, processes sharing the "
        f"file could corrupt it, so the file store refuses to run here. {fix}"
        f"InMemoryStateStore, or a StateStore of your own that keeps the history in a database.",
        path=str(path),
    ) from error


if sys.platform == "win32":  # pragma: no cover - exercised on Windows only
    try:
        import portalocker
    except ImportError as error:
        _no_locks = error

    def try_lock(fd: int, *, exclusive: bool) -> bool:
        """Lock the lock file ``fd`` if no one else holds it; return whether it did."""
        if fd == -1:  # a read-only store without its lock file
            return True
        if faults is not None:
            if faults.skip_locks:
                return True
            _fault("lock")
        flags = portalocker.LockFlags.EXCLUSIVE | portalocker.LockFlags.NON_BLOCKING
        try:
            portalocker.lock(fd, flags)
        except portalocker.LockException:  # AlreadyLocked, or msvcrt's plain failure
            return False  # a real error shows in the waiting ``lock`` that follows
        return True

    def lock(fd: int, *, exclusive: bool) -> None:
        """Lock the lock file ``fd``; always exclusively (``msvcrt`` has no shared lock)."""
        if fd == -1:  # a read-only store without its lock file
            return
        if faults is not None:
            if faults.skip_locks:
                return
            _fault("lock")
        while True:
            try:
                # msvcrt gives up after ten one-second tries; a writer may hold it longer.
                portalocker.lock(fd, portalocker.LockFlags.EXCLUSIVE)
                return
            except portalocker.AlreadyLocked:
                continue

    def unlock(fd: int) -> None:
        """Release the lock taken by ``lock``."""
        if fd == -1 or (faults is not None and faults.skip_locks):
            return
        portalocker.unlock(fd)

else:
    try:
        import fcntl
    except ImportError as error:  # e.g. Python built for WebAssembly (Emscripten, WASI)
        _no_locks = error
    else:
        _TRY_EX = fcntl.LOCK_EX | fcntl.LOCK_NB
        _TRY_SH = fcntl.LOCK_SH | fcntl.LOCK_NB

    def try_lock(fd: int, *, exclusive: bool) -> bool:
        """Lock the data file ``fd`` if no other holder excludes it; return whether it did."""
        if faults is not None:
            if faults.skip_locks:
                return True
            _fault("lock")
        try:
            fcntl.flock(fd, _TRY_EX if exclusive else _TRY_SH)
        except BlockingIOError:  # EWOULDBLOCK: someone else holds it
            return False
        return True

    def lock(fd: int, *, exclusive: bool) -> None:
        """Lock the data file ``fd``: shared for reading, exclusive for writing; wait for it."""
        if faults is not None:
            if faults.skip_locks:
                return
            _fault("lock")
        fcntl.flock(fd, fcntl.LOCK_EX if exclusive else fcntl.LOCK_SH)

    def unlock(fd: int) -> None:
        """Release the lock taken by ``lock``."""
        if faults is not None and faults.skip_locks:
            return
        fcntl.flock(fd, fcntl.LOCK_UN)
