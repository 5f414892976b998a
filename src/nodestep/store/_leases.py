"""Leases: one writer per thread branch, and where a store keeps them.

A run takes its branch's lease before it writes anything and renews it while it lives; a
second writer is refused (``ThreadBusyError``) until the lease is released or expires. A
lease expires ``ttl`` seconds after it was taken or last renewed, so the branch of a runner
that crashed is free again after at most ``ttl``.

Why an append needs no store call for its lease (fencing): only the holder renews or
releases a lease, and a lease can be taken over only once it expired, by the clock the
store's processes share (``time.time()``). So while the holder's own copy of the lease has
time left, no one else can hold the branch, and the sequence check of every append does
the rest. ``StateStore.append_leased`` renews a lease that is close to expiry before it
appends, which takes the store's lock; a lease someone else took meanwhile is refused
there (``ThreadBusyError``, ``lost``), and the run can never append again.

``LeaseTable`` keeps leases in memory (the default of ``StateStore``, for a store one
process uses); the file store's ``LeaseFile`` (``nodestep.store._file.leases``) keeps them
next to the history (``<path>.leases``), changed under the history file's exclusive lock,
so every process that opens the history sees them, and the SQL stores in a table. A
process killed while holding one leaves it behind: it is free once it expires, or at once
when its holder is known to have ended (a process of this host and pid namespace that no
longer exists, see ``holder_gone``).
"""

from __future__ import annotations

import os
import socket
from dataclasses import dataclass, replace
from typing import Any

import orjson

from nodestep._errors import ThreadBusyError

__all__ = ["RENEW_WITHIN", "Lease", "LeaseTable", "holder_gone", "lost", "new_lease"]

RENEW_WITHIN = 0.5
"""An append renews its lease first when less than this part of the ttl is left."""

_HOST = socket.gethostname()


def _pid_namespace() -> int:
    """Return the inode of this process's pid namespace (Linux), or 0 where there is none.

    Two processes see each other's pids only in one namespace: two containers may share a
    host name and a history file, and a pid of one means nothing in the other.
    """
    try:
        return os.stat("/proc/self/ns/pid").st_ino
    except OSError:
        return 0


_PID_NS = _pid_namespace()


def holder_gone(lease: Lease) -> bool:
    """Tell whether the process that holds ``lease`` is known to have ended.

    Only a process of this host and pid namespace can tell; for any other, and for a
    process it cannot signal, the lease lasts until it expires. A pid reused by another
    process only delays the takeover until then.
    """
    if lease.host != _HOST or lease.pid_ns != _PID_NS or lease.pid in (0, os.getpid()):
        return False
    try:
        os.kill(lease.pid, 0)
    except ProcessLookupError:
        return True
    except OSError:  # e.g. PermissionError: it exists, as another user's process
        return False
    return False


@dataclass(frozen=True, slots=True)
class Lease:
    """A writer's hold on one thread branch, until ``expires`` unless renewed.

    Attributes:
        id: A random id: the fencing token, which only this holder has.
        thread_id: The thread.
        branch_id: The branch.
        holder: Who holds it: a run id, ``"update_state"`` or ``"migrate"``.
        expires: When it expires, a ``time.time()`` timestamp.
        ttl: Seconds each renewal lasts.
        pid: The holder's process id.
        host: The holder's host name.
        pid_ns: The holder's pid namespace (Linux; 0 elsewhere), which its ``pid`` is of.
    """

    id: str
    thread_id: str
    branch_id: str
    holder: str
    expires: float
    ttl: float
    pid: int = 0
    host: str = ""
    pid_ns: int = 0

    def busy(self, *, waited: float = 0.0) -> ThreadBusyError:
        """Return the error that refuses another writer while this lease is held."""
        return ThreadBusyError(
            self.thread_id,
            self.branch_id,
            self.holder,
            self.expires,
            pid=self.pid,
            host=self.host,
            waited=waited,
        )

    @classmethod
    def from_json(cls, data: dict[str, Any]) -> Lease:
        """Read a lease as the file store keeps it: orjson's form of the dataclass."""
        return cls(
            str(data["id"]),
            str(data["thread_id"]),
            str(data["branch_id"]),
            str(data["holder"]),
            float(data["expires"]),
            float(data["ttl"]),
            int(data["pid"]),
            str(data["host"]),
            int(data["pid_ns"]),
        )


def new_lease(thread_id: str, branch_id: str, holder: str, ttl: float, now: float) -> Lease:
    """Return a new lease of this process, expiring ``ttl`` seconds after ``now``."""
    return Lease(
        os.urandom(16).hex(),
        thread_id,
        branch_id,
        holder,
        now + ttl,
        ttl,
        os.getpid(),
        _HOST,
        _PID_NS,
    )


def lost(lease: Lease, current: Lease | None) -> ThreadBusyError:
    """Return the error for ``lease``, which is no longer its branch's current lease."""
    holder = current if current is not None else lease
    return ThreadBusyError(
        lease.thread_id,
        lease.branch_id,
        holder.holder if current is not None else "",
        holder.expires,
        pid=holder.pid if current is not None else 0,
        host=holder.host if current is not None else "",
        lost=True,
    )


class LeaseTable:
    """The current lease of each branch; the caller holds the store's lock around each call."""

    def __init__(self, *, encoded: bool = False) -> None:
        self.leases: dict[tuple[str, str], Lease] = {}
        self.encoded: dict[tuple[str, str], bytes] = {}
        """With ``encoded``, each lease's JSON, made when it changes: the file store writes
        them all. Without (the other stores' tables, in memory alone), empty: the JSON of
        the memory store's leases cost W10's agent 12K instructions a turn (0.6%)."""
        self._encodes = encoded
        self.pruned_at = 0.0

    def _set(self, key: tuple[str, str], lease: Lease) -> Lease:
        self.leases[key] = lease
        if self._encodes:
            self.encoded[key] = orjson.dumps(lease)
        return lease

    def put(self, lease: Lease) -> None:
        """Keep ``lease`` as its branch's current lease (one read back from a store's file)."""
        self._set((lease.thread_id, lease.branch_id), lease)

    def _drop(self, key: tuple[str, str]) -> None:
        del self.leases[key]
        self.encoded.pop(key, None)

    def acquire(self, thread_id: str, branch_id: str, holder: str, ttl: float, now: float) -> Lease:
        """Take the branch, unless another lease of it is current.

        A lease whose holder process is known to have ended (a crash, a kill) is not
        current, even before it expires: see ``holder_gone``.

        Raises:
            ThreadBusyError: another holder's lease has not expired.
        """
        current = self.leases.get((thread_id, branch_id))
        if current is not None and current.expires > now and not holder_gone(current):
            raise current.busy()
        return self._set((thread_id, branch_id), new_lease(thread_id, branch_id, holder, ttl, now))

    def renew(self, lease: Lease, now: float) -> Lease:
        """Extend ``lease`` by its ttl from ``now``; it may have expired, if no one took it.

        Raises:
            ThreadBusyError: the lease is not the branch's current one any more (``lost``).
        """
        key = (lease.thread_id, lease.branch_id)
        current = self.leases.get(key)
        if current is None or current.id != lease.id:
            raise lost(lease, current)
        return self._set(key, replace(current, expires=now + current.ttl))

    def release(self, lease: Lease) -> bool:
        """Drop ``lease`` if it is still its branch's current one; tell whether it was."""
        key = (lease.thread_id, lease.branch_id)
        current = self.leases.get(key)
        if current is None or current.id != lease.id:
            return False
        self._drop(key)
        return True

    def prune(self, now: float) -> None:
        """Forget leases that expired more than their ttl (and at least a minute) ago.

        Their holders are gone, or were refused: a renewal finds its lease no more, and is
        refused (``lost``), as it would be had another writer taken the branch meanwhile.
        """
        if now - self.pruned_at < _PRUNE_EVERY:  # a look at every lease costs, per write
            return
        self.pruned_at = now
        for key, lease in list(self.leases.items()):
            if lease.expires + max(lease.ttl, 60.0) < now:
                self._drop(key)


_PRUNE_EVERY = 10.0
"""Seconds between looks for long-expired leases to forget."""
