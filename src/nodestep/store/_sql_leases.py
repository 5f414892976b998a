"""The SQL stores' lease operations that stand alone: take a branch, give it back.

In the style of ``_sql`` (generators of statements, no I/O); ``_sql`` keeps ``renew``, which
an append uses. Each is one statement in the common case, atomic without a transaction.
"""

from __future__ import annotations

import time

from nodestep.store._leases import Lease, holder_gone, new_lease
from nodestep.store._sql import LEASE, Op, Stmt, lease_of

__all__ = ["acquire", "release"]

_LEASE_COLUMNS = "(thread, branch, id, holder, expires, ttl, pid, host, pid_ns)"
_TAKE = (
    "id = excluded.id, holder = excluded.holder, expires = excluded.expires, "
    "ttl = excluded.ttl, pid = excluded.pid, host = excluded.host, pid_ns = excluded.pid_ns"
)


def acquire(thread_id: str, branch_id: str, holder: str, ttl: float) -> Op:
    """Take the branch for ``holder``, unless another lease of it is current.

    One statement takes a free or expired branch (an upsert whose update happens only if
    the stored lease expired), so taking a lease is one round trip and atomic without a
    transaction; two takers at once are ordered by the primary key. A lease whose holder
    is known to have ended (``_leases.holder_gone``) is replaced only if it is still the one
    looked at (compare and swap).

    Raises:
        ThreadBusyError: another holder's lease has not expired.
    """
    now = time.time()
    lease = new_lease(thread_id, branch_id, holder, ttl, now)
    values = (thread_id, branch_id, lease.id, holder, lease.expires, ttl, lease.pid,
              lease.host, lease.pid_ns)  # fmt: skip
    taken = yield Stmt(
        f"INSERT INTO nodestep_leases {_LEASE_COLUMNS} VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?) "
        f"ON CONFLICT (thread, branch) DO UPDATE SET {_TAKE} WHERE nodestep_leases.expires <= ? "
        f"RETURNING id",
        (*values, now),
    )
    if taken:
        return lease
    rows = yield Stmt(LEASE, (thread_id, branch_id))
    current = lease_of(thread_id, branch_id, rows)
    if current is not None and current.expires > time.time() and not holder_gone(current):
        raise current.busy()
    taken = yield Stmt(
        "UPDATE nodestep_leases SET id = ?, holder = ?, expires = ?, ttl = ?, pid = ?, "
        "host = ?, pid_ns = ? WHERE thread = ? AND branch = ? AND id = ? RETURNING id",
        (*values[2:], thread_id, branch_id, "" if current is None else current.id),
    )
    if taken:
        return lease
    rows = yield Stmt(LEASE, (thread_id, branch_id))  # another taker was first
    current = lease_of(thread_id, branch_id, rows)
    raise (current or lease).busy()


def release(lease: Lease) -> Op:
    """Drop ``lease`` if it is still its branch's current one."""
    yield Stmt(
        "DELETE FROM nodestep_leases WHERE thread = ? AND branch = ? AND id = ?",
        (lease.thread_id, lease.branch_id, lease.id),
    )
