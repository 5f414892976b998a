"""The inbox of a superstep: where its tasks report back, from the loop or from worker threads.

Tasks of a superstep with several tasks, and the ``custom`` and ``debug`` events nodes send
while they run, arrive here. A worker thread posts into a deque and wakes the event loop at
most once per drain, so fifty plain ``def`` tasks cost one wake-up of the loop, not fifty.
Waking the loop from a thread goes through anyio's back end (``call_soon_threadsafe`` on
asyncio, the trio token on trio), so the inbox works on both.
"""

from __future__ import annotations

import contextlib
import threading
from collections import deque
from typing import Any

import anyio
import anyio.lowlevel

__all__ = ["Inbox"]


class Inbox:
    """Completions and in-step events of the current superstep, in the order they came."""

    def __init__(self) -> None:
        self.generation = 0
        self._items: deque[tuple[str, Any]] = deque()
        self._lock = threading.Lock()
        self._wake: anyio.Event | None = None
        self._wake_pending = False
        self._token: anyio.lowlevel.EventLoopToken | None = None
        self._loop_thread = 0

    def open(self) -> int:
        """Start collecting for a new superstep; return its generation number."""
        self._token = anyio.lowlevel.current_token()
        self._loop_thread = threading.get_ident()
        self._wake = anyio.Event()
        self._wake_pending = False
        self.generation += 1
        self._items.clear()
        return self.generation

    def close(self) -> None:
        """Stop collecting: posts of tasks still running (threads after a timeout) are dropped."""
        self.generation += 1
        self._wake = None
        self._items.clear()

    def post(self, generation: int, kind: str, payload: Any) -> None:
        """Deliver ``(kind, payload)`` to the loop; safe to call from a worker thread."""
        wake, token = self._wake, self._token
        if generation != self.generation or wake is None or token is None:
            return
        self._items.append((kind, payload))
        if threading.get_ident() == self._loop_thread:
            wake.set()
            return
        with self._lock:
            if self._wake_pending:
                return
            self._wake_pending = True
        with contextlib.suppress(anyio.RunFinishedError):  # the loop is gone: the run is over
            token.backend_class.run_sync_soon(self._set_wake, (), token.native_token)

    def _set_wake(self) -> None:
        # Runs on the loop's thread. It sets the event the loop waits on now, so a post is
        # never lost between a drain and the next wait (``wait`` replaces the event).
        with self._lock:
            self._wake_pending = False
        if self._wake is not None:
            self._wake.set()

    def take(self) -> list[tuple[str, Any]]:
        """Return everything posted since the last call, in order."""
        items = self._items
        out = []
        while items:
            out.append(items.popleft())
        return out

    async def wait(self, timeout: float | None) -> bool:
        """Wait until something is posted; return ``False`` if ``timeout`` seconds pass first.

        Call ``take`` after each wait: a post may have arrived before the wait began.
        """
        wake = self._wake
        if wake is None:
            raise RuntimeError("the inbox is closed")
        if timeout is None:
            await wake.wait()
        else:
            with anyio.move_on_after(max(timeout, 0.0)) as scope:
                await wake.wait()
            if scope.cancelled_caught:
                return False
        self._wake = anyio.Event()
        return True
