"""One writer per thread branch: take the branch's lease, keep it alive, give it back.

A run with a store takes its branch before it reads it and holds it until it ends, so no
other run, ``update_state`` or ``migrate`` writes the branch meanwhile: a second writer is
refused (``ThreadBusyError``) before it writes anything, or waits with
``wait_for_thread=``. The store keeps the lease (``StateStore.acquire_lease``); a task of
its own renews it every third of its ttl while the run lives, so a run's appends make no
store call for it (see ``nodestep.store._leases`` for why that is safe). A runner that
crashed leaves its lease to expire after at most ``ttl`` seconds; then any process can
continue the thread.
"""

from __future__ import annotations

import asyncio
import time
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager, suppress

import anyio

from nodestep._engine.backend import RunTask, on_asyncio
from nodestep._errors import StateStoreError, ThreadBusyError
from nodestep.store import Lease, StateStore

__all__ = ["DEFAULT_TTL", "ThreadHold", "hold_thread", "take_thread"]

DEFAULT_TTL = 30.0
"""Seconds a run's lease lasts unless renewed: ``Graph(lease_ttl=...)`` sets another."""

_POLL = 0.05
"""Seconds between tries of a caller that waits for a thread, at first; it doubles to 1."""


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
        self._timer: asyncio.TimerHandle | None = None  # asyncio, until the task is due
        self._task: asyncio.Task[None] | None = None  # asyncio

    def keep_alive(self) -> None:
        """Start renewing the lease every third of its ttl, in a task of its own.

        On asyncio the task starts when the first renewal is due, from a timer: most runs
        end before, and a task started and cancelled would cost each call two turns of the
        event loop (about 90 µs, measured on a one-step graph). trio has no timer to call
        back, so there the task starts at once.
        """
        if on_asyncio():
            loop = asyncio.get_running_loop()
            self._timer = loop.call_later(self._due(), self._start_renewer, loop)
        else:
            self._renewer = RunTask(self._renew())

    def _start_renewer(self, loop: asyncio.AbstractEventLoop) -> None:
        self._timer = None
        self._task = loop.create_task(self._renew())

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
        with anyio.CancelScope(shield=True):
            if self._timer is not None:
                self._timer.cancel()
            if self._task is not None:
                # A renewal still running finds its lease released, and is refused.
                self._task.cancel()
            if self._renewer is not None:
                self._renewer.cancel()
                await self._renewer.wait()
            if not self.released:
                with suppress(StateStoreError):
                    await self.store.release_lease(self.lease)


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
            lease = await store.acquire_lease(thread_id, branch_id, holder, ttl=ttl)
            return ThreadHold(store, lease)
        except ThreadBusyError as busy:
            waited = time.monotonic() - started
            left = (wait or 0.0) - waited
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
    hold = await take_thread(store, thread_id, branch_id, holder, ttl)
    try:
        yield hold
    finally:
        await hold.release()
