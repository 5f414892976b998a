"""Worker threads for plain ``def`` nodes that share a superstep or have a timeout.

``ThreadPoolExecutor.submit`` costs about 9 µs on the submitting thread (a future and a
semaphore per call), and ``anyio.to_thread.run_sync`` more; a superstep that fans out to
fifty plain ``def`` nodes pays that fifty times on the event loop's thread. Tasks here
report back through the run's inbox instead, so a queue put is all a submit needs (see
``docs/performance.md``). A thread is started whenever no worker is idle, up to
``max_workers``; workers then stay for the life of the process.
"""

from __future__ import annotations

import contextlib
import os
import threading
from collections.abc import Callable
from queue import SimpleQueue
from typing import Any

__all__ = ["submit"]


class _WorkerPool:
    """Daemon worker threads fed from one queue."""

    def __init__(self, max_workers: int = 32) -> None:
        self.max_workers = max_workers
        self._queue: SimpleQueue[tuple[Callable[..., Any], tuple[Any, ...]]] = SimpleQueue()
        self._lock = threading.Lock()
        self._idle = 0
        self._threads = 0

    def submit(self, fn: Callable[..., Any], *args: Any) -> None:
        self._queue.put((fn, args))
        with self._lock:
            if self._idle > 0 or self._threads >= self.max_workers:
                self._idle -= 1 if self._idle > 0 else 0
                return
            self._threads += 1
        threading.Thread(target=self._work, name=f"nodestep-{self._threads}", daemon=True).start()

    def _work(self) -> None:
        queue, lock = self._queue, self._lock
        while True:
            fn, args = queue.get()
            # Task wrappers report their own errors through the run's inbox.
            with contextlib.suppress(BaseException):
                fn(*args)
            with lock:
                self._idle += 1


_pool: _WorkerPool | None = None
_pool_lock = threading.Lock()


def submit(fn: Callable[..., Any], *args: Any) -> None:
    """Run ``fn(*args)`` on the shared worker pool (fire and forget)."""
    global _pool
    if _pool is None:
        with _pool_lock:
            if _pool is None:
                _pool = _WorkerPool()
    _pool.submit(fn, *args)


def _forget_pool_after_fork() -> None:
    # A forked child has none of the parent's threads; start a fresh pool on demand.
    global _pool, _pool_lock
    _pool = None
    _pool_lock = threading.Lock()


os.register_at_fork(after_in_child=_forget_pool_after_fork)
