"""Waiting for a lock held elsewhere without blocking the event loop.

``FilesystemStateStore`` guards its open file with two locks: a thread lock, so threads can
share one store object (a second ``flock`` on the same descriptor would succeed at once),
and the file lock, which other processes see. Its async methods try each lock without
waiting, which is all an uncontended call costs, and only when one is held elsewhere wait
for it here, in a worker thread, so the loop's other tasks run meanwhile, on asyncio and
trio alike: ``wait_for_thread_lock`` and ``wait_for_file_lock``, both built on
``wait_off_loop``, which a cancellation leaves at once and without a lock held.
"""

from __future__ import annotations

import threading
from collections.abc import Callable
from contextlib import suppress
from functools import partial

import anyio
import anyio.to_thread

from nodestep.store._file import io

__all__ = ["wait_for_file_lock", "wait_for_thread_lock", "wait_off_loop"]


async def wait_for_file_lock(lock: threading.Lock, fd: int, *, exclusive: bool) -> None:
    """Take the file lock on ``fd``, which another process holds, the thread lock ``lock`` held.

    On an error or a cancellation ``lock`` is released too: at once, or by the worker once
    it gets the file lock, when it was still waiting. Until then other calls on the store
    wait as well, as they would behind any call holding the store.

    Raises:
        OSError: The file lock failed; ``lock`` was released.
    """

    def give_up(taken: bool) -> None:
        # The thread lock stays held while the worker may still lock ``fd``: another
        # thread's flock on the same descriptor would succeed at once.
        if taken:
            with suppress(OSError):  # only a closed descriptor fails
                io.unlock(fd)
        lock.release()

    # A private limiter: the tasks waiting for the thread lock held here may hold every
    # token of the loop's default limiter.
    await wait_off_loop(
        partial(io.lock, fd, exclusive=exclusive), give_up, anyio.CapacityLimiter(1)
    )


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
