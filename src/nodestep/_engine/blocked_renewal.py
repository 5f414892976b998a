"""Keep a run's lease alive while a plain ``def`` node blocks the run's event loop.

A lone plain ``def`` task runs inline, on the loop's own thread (``_engine.tasks``), and the
run's lease is renewed by a task of that loop (``_engine.lease``). While such a node runs,
the loop does not turn, so nothing renews the lease: a node that takes longer than the
lease's ttl (a sync model call of 40 s, with the default ttl of 30 s) let the lease
expire, a caller waiting with ``wait_for_thread=`` took the thread over, and the run's
next append was refused (``ThreadBusyError``, ``lost``), its node's work thrown away,
its message blaming a process that did not renew in time.

So while an inline node runs, its run's hold is listed here, and one thread of the process
renews the listed leases when they are due, from an event loop of its own. Listing and
unlisting cost two clock readings and a dict operation; the thread looks at the list every
third of the shortest ttl it was given, and is woken only for a lease that would be
renewed too late by that, so a node that ends quickly, the common case, never wakes it.
"""

from __future__ import annotations

import os
import threading
import time

from nodestep._engine.lease import ThreadHold
from nodestep._engine.sync import call_sync
from nodestep._errors import ThreadBusyError

__all__ = ["blocking", "unblocked"]


class _Renewals:
    """The holds whose loop an inline node blocks, and the thread that renews them.

    Why no lock around ``due``: listing and unlisting happen around every inline node,
    and a dict's item set or pop is atomic. The thread takes ``cond`` to read it whole
    and to sleep; a caller takes it only to wake the thread for an earlier due time. The
    thread marks ``wake`` unknown (infinite) before it reads ``due``, so a hold listed
    while it reads either is in what it read or wakes it.
    """

    def __init__(self) -> None:
        # Each hold's next renewal (time.monotonic()), in a list of one the thread updates
        # in place: setting the key again could list a hold unlisted meanwhile, for good.
        self.due: dict[ThreadHold, list[float]] = {}
        self.cond = threading.Condition(threading.Lock())
        self.wake = float("inf")  # when the thread wakes next
        self.idle = float("inf")  # the longest it sleeps: a third of the shortest ttl seen
        self.thread: threading.Thread | None = None

    def add(self, hold: ThreadHold) -> None:
        lease = hold.lease
        third = lease.ttl / 3
        left = lease.expires - lease.ttl * 2 / 3 - time.time()  # until it is due
        when = time.monotonic() + max(0.0, left)
        self.due[hold] = [when]
        if third < self.idle:
            self.idle = third
        # Woken only if it would look too late: by a third of the ttl after the renewal
        # was due, two thirds before the lease ends. Why the slack: a node of the common
        # kind ends before the thread looks at all, and waking it at every superstep
        # cost a lock, a wake-up and a GIL hand-over, some 25 µs a step.
        # Due already (the loop did not turn to renew it): at once.
        if left <= 0 or when + third < self.wake:  # the thread sleeps past it (or is not started)
            with self.cond:
                if self.thread is None:  # first use (a forked child starts afresh)
                    self.thread = threading.Thread(
                        target=self._serve, name="nodestep-lease-renewal", daemon=True
                    )
                    self.thread.start()
                self.cond.notify()

    def discard(self, hold: ThreadHold) -> None:
        self.due.pop(hold, None)  # the thread, waking, finds nothing due

    def _serve(self) -> None:
        while True:
            with self.cond:
                self.wake = float("inf")
                now = time.monotonic()
                listed = list(self.due.items())
                due = [hold for hold, when in listed if when[0] <= now]
                if not due:
                    soonest = min((when[0] for _, when in listed), default=float("inf"))
                    self.wake = min(soonest, now + self.idle)  # so add() need not wake it
                    self.cond.wait(self.wake - now)
                    continue
            for hold in due:
                self._renew(hold)

    def _renew(self, hold: ThreadHold) -> None:
        lease = hold.lease
        try:
            renewed = call_sync(lambda: hold.store.renew_lease(lease))
        except ThreadBusyError:
            self.discard(hold)  # lost: the run's next append is refused, and says so
            return
        except Exception:  # a StateStoreError, or a store of one's own failing otherwise
            retry = lease.ttl / 10  # the store may recover: try again soon; the append decides
        else:
            retry = renewed.ttl / 3
            if hold.lease is lease:  # else the run appended (and renewed) meanwhile
                hold.lease = renewed
        when = self.due.get(hold)
        if when is not None:  # still blocked: renew again when due
            when[0] = time.monotonic() + retry


_renewals = _Renewals()


def _forget_after_fork() -> None:
    # A forked child has no renewal thread, and a lock its parent's thread held at fork
    # time would stay held: start afresh.
    global _renewals
    _renewals = _Renewals()


os.register_at_fork(after_in_child=_forget_after_fork)


def blocking(hold: ThreadHold | None) -> None:
    """List ``hold`` (a run's, ``None`` for none): its loop's thread will block in a node.

    Call ``unblocked`` with it when the node returns: ``try``/``finally``, not a context
    manager, which would cost the common case of every superstep about a microsecond.
    """
    if hold is not None and not hold.released:
        _renewals.add(hold)


def unblocked(hold: ThreadHold | None) -> None:
    """Unlist ``hold``: its loop's thread runs the loop again."""
    if hold is not None:
        _renewals.discard(hold)
