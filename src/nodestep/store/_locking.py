"""Locking the file store's history file, shared by threads and processes, from async code.

``FilesystemStateStore`` guards its open file with two locks: a thread lock, so threads can
share one store object (a second ``flock`` on the same descriptor would succeed at once),
and the file lock, which other processes see. ``FileLocking``, a base class of the store,
takes both. The async methods take them through ``Locked``, which never blocks the event
loop's thread: it tries each lock without waiting, which is all an uncontended call costs,
and only when one is held elsewhere waits for it in a worker thread (``wait_off_loop``),
so the loop's other tasks run meanwhile, on asyncio and trio alike. The constructor, which
is sync, waits on its own thread (``FileLocking._locked``).
"""

from __future__ import annotations

import os
import threading
from collections.abc import Callable, Iterator
from contextlib import contextmanager, suppress
from functools import partial
from pathlib import Path
from types import TracebackType

import anyio
import anyio.to_thread

from nodestep._errors import StateStoreError
from nodestep.store import _io

__all__ = ["FileLocking", "Locked", "wait_for_thread_lock", "wait_off_loop"]


class FileLocking:
    """Taking the locks of an open history file: the half of the store that does it.

    The store sets the attributes, and provides the three methods that raise here.
    """

    path: Path
    _lock: threading.Lock  # the thread lock
    _lock_fd: int  # the descriptor the file lock is taken on; -1 when closed
    _fd: int  # the data file's descriptor; -1 when closed
    _pid: int  # the process that opened the descriptors
    _poisoned: str  # why the store stopped, or ""

    def _reopen_after_fork(self) -> None:
        raise NotImplementedError

    def _sync(self, exclusive: bool) -> bool:
        """Catch up with the locked file; ``False``: lock the file now at the path, retry."""
        raise NotImplementedError

    def _os_error(self, action: str, error: OSError) -> StateStoreError:
        raise NotImplementedError

    @contextmanager
    def _locked(self, *, exclusive: bool) -> Iterator[None]:
        """Hold both locks, the file caught up, waiting on this thread: for the constructor.

        The async methods use ``Locked``, which never waits on the event loop's thread.
        """
        with self._lock:
            self._check_usable()
            while True:
                try:
                    _io.lock(self._lock_fd, exclusive=exclusive)
                except OSError as e:
                    raise self._os_error("lock", e) from e
                try:
                    if self._sync(exclusive):
                        break
                except BaseException:
                    self._unlock_file()
                    raise
            try:
                yield
            finally:
                self._unlock_file()

    def _check_usable(self) -> None:
        if self._poisoned:
            raise StateStoreError(self._poisoned, path=str(self.path))
        if self._fd == -1:
            raise StateStoreError(
                f"The store of {self.path} is closed; create a new FilesystemStateStore "
                f"to use the file again.",
                path=str(self.path),
            )

    def _unlock_file(self) -> None:
        # The descriptor now: a replaced file's was closed (-1), and closing unlocks it.
        with suppress(OSError):  # only a closed descriptor fails, and closing unlocks
            _io.unlock(self._lock_fd)


class Locked:
    """``async with Locked(store, exclusive=...)``: hold both locks, the file caught up.

    A lock held elsewhere (the thread lock by another thread, the file lock by another
    process) is waited for in a worker thread; see ``wait_off_loop`` for what a
    cancellation then does.
    """

    __slots__ = ("_exclusive", "_lock", "_store")

    def __init__(self, store: FileLocking, *, exclusive: bool) -> None:
        self._store = store
        self._exclusive = exclusive

    async def __aenter__(self) -> None:
        store = self._store
        if store._pid != os.getpid():
            store._reopen_after_fork()
        lock = self._lock = store._lock
        if not lock.acquire(False):  # never wait (positional: the keyword costs 80 ns more)
            await wait_for_thread_lock(lock)
        while True:
            try:
                store._check_usable()
                fd, exclusive = store._lock_fd, self._exclusive
                try:
                    taken = _io.try_lock(fd, exclusive=exclusive)
                except OSError as e:
                    raise store._os_error("lock", e) from e
            except BaseException:
                lock.release()
                raise
            if not taken:
                await self._wait_for_file(fd)
            try:
                if store._sync(exclusive):
                    return
            except BaseException:
                store._unlock_file()
                lock.release()
                raise

    async def _wait_for_file(self, fd: int) -> None:
        """Wait for the file lock off the loop, the thread lock held.

        On an error or a cancellation the thread lock is released too: at once, or by the
        worker once it gets the file lock, when it was still waiting. Until then other
        calls on this store wait as well, as they would behind any call holding the store.
        """
        lock = self._lock

        def give_up(taken: bool) -> None:
            # The thread lock stays held while the worker may still lock ``fd``: another
            # thread's flock on the same descriptor would succeed at once.
            if taken:
                with suppress(OSError):  # only a closed descriptor fails
                    _io.unlock(fd)
            lock.release()

        try:
            # A private limiter: the tasks waiting for the thread lock held here may hold
            # every token of the loop's default limiter.
            await wait_off_loop(
                partial(_io.lock, fd, exclusive=self._exclusive), give_up, anyio.CapacityLimiter(1)
            )
        except OSError as e:  # give_up has run
            raise self._store._os_error("lock", e) from e

    async def __aexit__(
        self,
        exc_type: type[BaseException] | None,
        exc: BaseException | None,
        tb: TracebackType | None,
    ) -> None:
        self._store._unlock_file()
        self._lock.release()


async def wait_for_thread_lock(lock: threading.Lock) -> None:
    """Take ``lock``, which another thread holds, without blocking the event loop."""

    def give_up(taken: bool) -> None:
        if taken:
            lock.release()

    await wait_off_loop(lock.acquire, give_up)


async def wait_off_loop(
    acquire: Callable[[], object],
    give_up: Callable[[bool], object],
    limiter: anyio.CapacityLimiter | None = None,
) -> None:
    """Call ``acquire``, which blocks until it takes a lock, in a worker thread.

    Returns once ``acquire`` returned. When this raises instead (``acquire`` raised, or the
    caller was cancelled), ``give_up(taken)`` runs exactly once, ``taken`` telling whether
    ``acquire`` got the lock. It runs here, or in the worker when the caller was cancelled
    while the worker still waits, right after the worker's ``acquire`` returns.

    Why the wait can be cancelled: ``anyio.to_thread.run_sync`` is shielded by default, so a
    timeout or cancel scope of the caller would wait as long as another process holds the
    lock. Abandoning the worker instead lets the caller go at once; the state below, changed
    only under ``mutex``, decides whether the caller or the worker gives the lock back, so
    it is given back once, whenever the worker gets it. A worker that anyio never started
    (cancelled before it ran) takes nothing, and the caller gives up for it.
    """
    mutex = threading.Lock()
    state = "queued"  # then "waiting", "taken" or "failed"; "abandoned" once the caller left

    def work() -> None:
        nonlocal state
        with mutex:
            if state == "abandoned":
                return
            state = "waiting"
        try:
            acquire()
        except BaseException:
            with mutex:
                left, state = state == "abandoned", "failed"
            if not left:
                raise
            give_up(False)  # no one is left to tell about the error
            return
        with mutex:
            left, state = state == "abandoned", "taken"
        if left:
            give_up(True)

    try:
        await anyio.to_thread.run_sync(work, abandon_on_cancel=True, limiter=limiter)
    except BaseException:
        with mutex:
            was = state
            if was in ("queued", "waiting"):
                state = "abandoned"
        if was != "waiting":  # "waiting": the worker gives up when its acquire returns
            give_up(was == "taken")
        raise
