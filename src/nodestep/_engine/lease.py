"""One writer per thread branch: take the branch's lease, keep it alive, give it back.

A run with a store takes its branch before it reads it and holds it until it ends, so no
other run, ``update_state`` or ``migrate`` writes the branch meanwhile: a second writer is
refused (``ThreadBusyError``) before it writes anything, or waits with
``wait_for_thread=``. A run whose graph remembers the branch's position takes it with its
first records instead, checked against that position (``_engine.loop``), and reads the
branch under the lease only when it moved on. The store keeps the lease
(``StateStore.acquire_lease``, ``acquire_and_append``); a task of
its own renews it every third of its ttl while the run lives, so a run's appends make no
store call for it (see ``nodestep.store._leases`` for why that is safe). A runner that
crashed leaves its lease to expire after at most ``ttl`` seconds; then any process can
continue the thread. A stream its caller left unclosed holds its branch until the event
loop's finalizer closes it; a call meanwhile waits for it (``stopping``).
"""

from __future__ import annotations

import asyncio
import contextvars
import threading
import time
import weakref
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager, suppress

import anyio

from nodestep._engine.backend import RunTask, on_asyncio, shielded
from nodestep._errors import StateStoreError, ThreadBusyError
from nodestep.store import Lease, StateStore

__all__ = [
    "DEFAULT_TTL",
    "STOP_WAIT",
    "StreamMark",
    "ThreadHold",
    "hold_thread",
    "stopping",
    "stream_ended",
    "stream_runs",
    "take_thread",
]

DEFAULT_TTL = 30.0
"""Seconds a run's lease lasts unless renewed: ``Graph(lease_ttl=...)`` sets another."""

_POLL = 0.05
"""Seconds between tries of a caller that waits for a thread, at first; it doubles to 1."""

STOP_WAIT = 5.0
"""Seconds a call waits, without ``wait_for_thread=``, for a left stream's run to stop."""


class StreamMark:
    """A stream's run of a branch, while it runs; ``left`` once its caller dropped the
    stream unclosed (set by the stream's weak reference, which takes no lock: it may fire
    in a garbage collection, inside any code of the thread)."""

    __slots__ = ("left",)

    def __init__(self) -> None:
        self.left = False


# The running streams of this process by branch (store, thread and branch).
_streams: dict[tuple[int, str, str], set[StreamMark]] = {}
_streams_lock = threading.Lock()  # streams of several threads' loops share a store


def stream_runs(store: StateStore, thread_id: str, branch_id: str, mark: StreamMark) -> None:
    """Count ``mark``'s stream as running on the branch until ``stream_ended``."""
    with _streams_lock:
        _streams.setdefault((id(store), thread_id, branch_id), set()).add(mark)


def stream_ended(store: StateStore, thread_id: str, branch_id: str, mark: StreamMark) -> None:
    """Forget ``mark``'s stream: its run has ended."""
    key = (id(store), thread_id, branch_id)
    with _streams_lock:
        marks = _streams.get(key)
        if marks is not None:
            marks.discard(mark)
            if not marks:
                del _streams[key]


def stopping(store: StateStore, thread_id: str, branch_id: str) -> bool:
    """Tell whether a stream of the branch that its caller left unclosed still runs.

    Why: ``async for`` does not close an async generator it leaves (a ``break``, a cancel
    that lands in the loop's body): the event loop's finalizer closes it once it is
    dropped, a few turns of the loop later, and its run holds the branch until then. The
    caller's next call on the branch, made at once, would be refused with
    ``ThreadBusyError`` by a run that is only stopping; ``take_thread`` waits for it.
    """
    with _streams_lock:
        marks = _streams.get((id(store), thread_id, branch_id))
        return marks is not None and any(mark.left for mark in marks)


class ThreadHold:
    """A writer's lease of one branch, renewed in a task of its own until ``release``.

    Attributes:
        store: The store that keeps the lease.
        lease: The lease in force; the writer's appends replace it with its renewals.
        released: Whether the run's last append gave the lease back already.
    """

    def __init__(self, store: StateStore, lease: Lease) -> None:
        self.store = store
        self.lease = lease
        self.released = False  # given back by the run's last append (``append_and_release``)
        self._renewer: RunTask | None = None  # trio
        self._waiting: _Waiting | None = None  # asyncio, until the task is due
        self._task: asyncio.Task[None] | None = None  # asyncio

    def keep_alive(self) -> None:
        """Start renewing the lease every third of its ttl, in a task of its own.

        On asyncio the task starts when the first renewal is due, from one timer per event
        loop for all its runs (``_Waiting``): most runs end before, and a task started and
        cancelled would cost each call two turns of the event loop (about 90 µs, measured on
        a one-step graph). trio has no timer to call back, so there the task starts at once.
        """
        if on_asyncio():
            loop = asyncio.get_running_loop()
            self._waiting = _Waiting.of(loop)
            self._waiting.add(loop, self, self._due())
        else:
            self._renewer = RunTask(self._renew())

    def _start_renewer(self, loop: asyncio.AbstractEventLoop, context: contextvars.Context) -> None:
        self._waiting = None
        self._task = loop.create_task(self._renew(), context=context)

    def _due(self) -> float:
        lease = self.lease
        return max(0.0, lease.expires - lease.ttl * 2 / 3 - time.time())

    async def _renew(self) -> None:
        while True:
            lease = self.lease
            await anyio.sleep(self._due())
            if self.lease is not lease:  # an append renewed it meanwhile
                continue
            try:
                self.lease = await self.store.renew_lease(lease)
            except ThreadBusyError:
                return  # lost: the next append of the run is refused, and says so
            except StateStoreError:
                await anyio.sleep(lease.ttl / 10)  # the store may recover; the append decides

    async def release(self) -> None:
        """Stop renewing, and give the branch back; shielded from cancellation.

        A failure to give it back is left to the lease's expiry: the run's own outcome,
        already decided, is what the caller must see.
        """
        if self._waiting is not None:
            self._waiting.discard(self)
            self._waiting = None
        if self._task is not None:
            # A renewal still running finds its lease released, and is refused.
            self._task.cancel()
        if self._renewer is None and self.released:
            # Nothing left to wait for, so nothing to shield: most runs on asyncio end so
            # (their last append gave the lease back), and a cancel scope is a cost every
            # run would pay for nothing (measured on W10's agent turn).
            return
        with shielded():
            if self._renewer is not None:
                self._renewer.cancel()
                await self._renewer.wait()
            if not self.released:
                with suppress(StateStoreError):
                    await self.store.release_lease(self.lease)


class _Waiting:
    """The holds of one asyncio loop whose first renewal is not due yet, under one timer.

    A timer per run, cancelled when the run ends, would stay in the loop's queue of timers
    until the loop turns (asyncio drops cancelled timers only then): a coroutine that
    runs run after run without ever waiting on the loop (every node a plain ``def``, the
    store in the caller's thread) piled one up per run, with a copy of the run's context
    (W10's agent: about 10 objects a turn, never freed). Here a run that ends only leaves
    a dict, and the loop's one timer fires when the earliest renewal is due. Nothing here
    refers to the loop, which keys it weakly: a loop that is gone takes it along.
    """

    def __init__(self) -> None:
        # Each hold's due time (loop.time()) and the context its renewer starts in.
        self.holds: dict[ThreadHold, tuple[float, contextvars.Context]] = {}
        self.timer: asyncio.TimerHandle | None = None
        self.at = float("inf")  # when the timer fires

    @staticmethod
    def of(loop: asyncio.AbstractEventLoop) -> _Waiting:
        waiting = _LOOPS.get(loop)
        if waiting is None:
            with _LOOPS_LOCK:
                waiting = _LOOPS.setdefault(loop, _Waiting())
        return waiting

    def add(self, loop: asyncio.AbstractEventLoop, hold: ThreadHold, delay: float) -> None:
        """Start ``hold``'s renewer in ``delay`` seconds, unless it is discarded first."""
        when = loop.time() + delay
        self.holds[hold] = (when, contextvars.copy_context())
        if when < self.at:  # runs share a ttl: only the first of a quiet loop's runs
            if self.timer is not None:
                self.timer.cancel()
            self.timer = loop.call_at(when, self._fire)
            self.at = when

    def discard(self, hold: ThreadHold) -> None:
        self.holds.pop(hold, None)

    def _fire(self) -> None:
        loop = asyncio.get_running_loop()
        self.timer, self.at = None, float("inf")
        now = loop.time()
        for hold, (when, context) in list(self.holds.items()):
            if when <= now:
                del self.holds[hold]
                hold._start_renewer(loop, context)
        if self.holds:
            self.at = min(when for when, _ in self.holds.values())
            self.timer = loop.call_at(self.at, self._fire)


_LOOPS: weakref.WeakKeyDictionary[asyncio.AbstractEventLoop, _Waiting] = weakref.WeakKeyDictionary()
_LOOPS_LOCK = threading.Lock()  # each loop's thread adds its own; two loops may at once


async def take_thread(
    store: StateStore,
    thread_id: str,
    branch_id: str,
    holder: str,
    ttl: float,
    wait: float | None = None,
) -> ThreadHold:
    """Take the branch for ``holder``; wait up to ``wait`` seconds while another holds it.

    Raises:
        ThreadBusyError: another writer holds the branch (for longer than ``wait``).
    """
    started = time.monotonic()
    pause = _POLL
    while True:
        try:
            # Shielded: a cancel that lands while the store takes the lease (an async
            # PostgreSQL connection whose server committed it) would leave the lease held,
            # by no one, for its ttl. Let in after, the cancel finds the run's hold.
            with shielded():
                lease = await store.acquire_lease(thread_id, branch_id, holder, ttl=ttl)
            return ThreadHold(store, lease)
        except ThreadBusyError as busy:
            waited = time.monotonic() - started
            limit = wait or 0.0
            if stopping(store, thread_id, branch_id):
                limit = max(limit, STOP_WAIT)
            left = limit - waited
            if left <= 0:
                if not wait:
                    raise
                raise busy.again(waited=waited) from busy
            expires = busy.expires
        # Poll: a lease that is given back is not announced. Never past the wait, and
        # never much past the holder's expiry, when the lease can be taken anyway.
        until_free = expires - time.time()
        await anyio.sleep(max(0.001, min(pause, left, until_free if until_free > 0 else pause)))
        pause = min(pause * 2, 1.0)


@asynccontextmanager
async def hold_thread(
    store: StateStore, thread_id: str, branch_id: str, holder: str, ttl: float
) -> AsyncIterator[ThreadHold]:
    """Hold the branch for the body: a thread method that writes, refused while a run holds it.

    Raises:
        ThreadBusyError: another writer holds the branch; nothing is written.
    """
    try:
        hold = await take_thread(store, thread_id, branch_id, holder, ttl)
    except ThreadBusyError as busy:  # a run's advice (wait_for_thread=, request_key) is not ours
        raise busy.again(
            fix=f"Call {holder} again once the thread is free: a run holds it only while it "
            f"runs, and a paused thread is free."
        ) from None
    try:
        yield hold
    finally:
        await hold.release()
