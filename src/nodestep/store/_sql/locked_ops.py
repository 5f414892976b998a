"""SQLite's appends and leases: the ``ops`` operations a write runs most, as plain functions
on the connection's cursor.

Every SQLite write is one ``BEGIN IMMEDIATE`` transaction, which holds the database's write
lock from its start, so an append's checks (the lease, the branch's last row) are a read
before a plain insert (``_checked_insert``), and a lease is taken by a read and a plain
``INSERT`` or ``UPDATE`` (``acquire_locked``): no one writes in between. The rules are
``ops``' (``append``, ``acquire_and_append``, ``acquire``), whose generators PostgreSQL
runs; the rare branches (a lease renewed near its expiry, a refusal's reads) run those
generators here too, through ``drive``.

Those locked forms (``append_locked``, ``acquire_and_append_locked``, ``acquire_locked``:
SQLite's appends and leases, four or five a turn of W10's agent) are plain functions that
run their statements on the cursor they are given, not generators: a statement's trip
through a generator (its ``Stmt``, a send through each ``yield from``, the
``StopIteration`` that ends the operation) cost W10's agent 35K instructions a turn (1.4%).
"""

from __future__ import annotations

import time
from collections.abc import Sequence
from typing import Any, Protocol

from nodestep._errors import ThreadBusyError, ThreadConflictError
from nodestep.store._contract import Record
from nodestep.store._leases import RENEW_WITHIN, Lease, holder_gone, new_lease
from nodestep.store._sql.ops import (
    BIG_APPEND,
    BY_ID,
    EVENT_COLUMNS,
    HELD,
    LAST_STATUS,
    LEASE,
    LEASE_COLUMNS,
    RELEASE,
    Many,
    Op,
    Rows,
    Stmt,
    lease_of,
    refusal,
    renew,
    rows_of,
    still_held,
    takes_status,
)

__all__ = ["Cursor", "acquire_and_append_locked", "acquire_locked", "append_locked", "drive"]


class Cursor(Protocol):
    """What the locked forms run their statements on: an ``sqlite3.Cursor``."""

    def execute(self, sql: str, parameters: tuple[Any, ...], /) -> Cursor: ...

    def executemany(self, sql: str, seq_of_parameters: Rows, /) -> Cursor: ...

    def fetchall(self) -> list[Any]: ...


def drive(cursor: Cursor, op: Op) -> Any:
    """Run ``op``'s statements on ``cursor`` and return its result (a ``Lock``: nothing to
    do, where a write transaction holds the whole database, as SQLite's)."""
    rows: Any = None  # a generator's first send must be None
    send, execute, stmt_type = op.send, cursor.execute, Stmt
    try:
        while True:
            stmt = send(rows)
            if type(stmt) is stmt_type:
                rows = execute(stmt.sql, stmt.params).fetchall()
            elif isinstance(stmt, Many):
                cursor.executemany(stmt.sql, stmt.rows)
                rows = []
            else:
                rows = []
    except StopIteration as done:
        return done.value


# The insert of ``rows_of(locked=True)``'s rows, which give no request key as 0.
_INSERT_LOCKED = (
    f"INSERT INTO nodestep_events {EVENT_COLUMNS} VALUES (?, ?, ?, ?, ?, nullif(?, 0), ?, ?, ?)"
)
# ``_checked_insert``'s reads (SQLite only): whether the lease holds the branch (``HELD``),
# and the branch's last row: its sequence, id and status.
_LAST_ROW = (
    "SELECT seq, id, status FROM nodestep_events WHERE thread = ? AND branch = ? "
    "ORDER BY seq DESC LIMIT 1"
)
# Numbered parameters: the thread and branch are bound once, not twice (two fewer copies of
# text into SQLite an append, about 2,400 instructions).
_HELD_LAST_ROW = (
    "SELECT seq, id, status, (SELECT 1 FROM nodestep_leases WHERE thread = ?1 AND branch = ?2 "
    "AND id = ?3) FROM nodestep_events WHERE thread = ?1 AND branch = ?2 "
    "ORDER BY seq DESC LIMIT 1"
)


def append_locked(
    cursor: Cursor,
    thread_id: str,
    branch_id: str,
    records: Sequence[Record],
    lines: list[bytes],
    after: int,
    lease: Lease | None,
    give_back: bool,
) -> Lease | None:
    """``append`` on ``cursor``, in a transaction that holds the database's write lock from
    its start (SQLite's ``BEGIN IMMEDIATE``): the checks are a read before a plain insert
    (``_checked_insert``). Returns the lease in force.

    Raises:
        ThreadBusyError: the lease was lost; nothing stored.
        ThreadConflictError: the branch's last sequence is not ``after``; nothing stored.
    """
    if lease is not None and time.time() > lease.expires - RENEW_WITHIN * lease.ttl:
        lease = drive(cursor, renew(lease))
    rows = rows_of(thread_id, branch_id, records, lines, locked=True)
    if not _checked_insert(cursor, thread_id, branch_id, rows, after, None, lease):
        drive(cursor, refusal(thread_id, branch_id, after, lease))
    if give_back and lease is not None:
        cursor.execute(RELEASE, (lease.thread_id, lease.branch_id, lease.id))
    return lease


def acquire_and_append_locked(
    cursor: Cursor,
    thread_id: str,
    branch_id: str,
    holder: str,
    ttl: float,
    records: Sequence[Record],
    lines: list[bytes],
    after: int,
    after_id: str | None,
) -> tuple[Lease, bool]:
    """``acquire_and_append`` on ``cursor``, as ``append_locked`` runs ``append``.

    Raises:
        ThreadBusyError: another holder's lease has not expired.
    """
    lease = acquire_locked(cursor, thread_id, branch_id, holder, ttl)
    if after_id is None or len(records) > BIG_APPEND:
        try:
            append_locked(cursor, thread_id, branch_id, records, lines, after, lease, False)
        except ThreadBusyError:
            raise
        except ThreadConflictError:
            return lease, False  # the branch moved on
        return lease, True
    rows = rows_of(thread_id, branch_id, records, lines, locked=True)
    stored = _checked_insert(cursor, thread_id, branch_id, rows, after, after_id, lease)
    if len(stored) == len(rows):
        return lease, True
    drive(cursor, still_held(thread_id, branch_id, lease))
    # As ``append_following``: the records may be there, by id, from a first try.
    mine = cursor.execute(BY_ID, (thread_id, rows[0][3])).fetchall()
    return lease, bool(mine)


def _checked_insert(
    cursor: Cursor,
    thread_id: str,
    branch_id: str,
    rows: Rows,
    after: int,
    after_id: str | None,
    lease: Lease | None,
) -> Rows:
    """Insert ``rows`` if the branch ends at ``after`` (of id ``after_id``, if given) and
    ``lease`` holds it; return the rows stored, ``[]`` when refused (nothing stored).

    The checks of ``_append_small`` and ``chained_append``, for a transaction that holds
    the database's write lock from before its first read (SQLite's ``BEGIN IMMEDIATE``):
    no one can write between the read and the insert, so the checks need not be in the
    insert's statement. On SQLite the read and the insert take 36 us of CPU an append of
    W10's agent (14 + 22) where the one statement (its VALUES co-routine, subqueries and
    RETURNING) took 56: 80 us a turn of four appends.
    """
    execute = cursor.execute
    if lease is None:
        found = execute(_LAST_ROW, (thread_id, branch_id)).fetchall()
    else:  # both checks in one read; a branch without rows gives no row: the lease alone
        found = execute(_HELD_LAST_ROW, (thread_id, branch_id, lease.id)).fetchall()
        held = found[0][3] if found else execute(HELD, (thread_id, branch_id, lease.id)).fetchall()
        if not held:
            return []
    last, last_id, status = found[0][:3] if found else (0, None, None)
    if last != after or (after_id is not None and last_id != after_id):
        return []
    if takes_status(rows):
        if status is None and last:  # trailing rows an older nodestep wrote without one
            found = execute(LAST_STATUS.format(t="?", b="?"), (thread_id, branch_id)).fetchall()
            status = found[0][0] if found else None
        rows = [row if row[8] is not None else (*row[:8], status) for row in rows]
    cursor.executemany(_INSERT_LOCKED, rows)
    return rows


_PUT_LEASE = f"INSERT INTO nodestep_leases {LEASE_COLUMNS} VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?)"
_RETAKE_LEASE = (
    "UPDATE nodestep_leases SET id = ?, holder = ?, expires = ?, ttl = ?, pid = ?, host = ?, "
    "pid_ns = ? WHERE thread = ? AND branch = ?"
)


def acquire_locked(
    cursor: Cursor, thread_id: str, branch_id: str, holder: str, ttl: float
) -> Lease:
    """``acquire`` on ``cursor``, in a transaction that holds the database's write lock from
    its start (SQLite's ``BEGIN IMMEDIATE``): a read of the branch's lease, then a plain
    insert, or an update of an expired one (or one whose holder ended). No one writes in
    between.

    Why not ``acquire``'s upsert: its ``RETURNING`` (which a plain insert does without)
    makes SQLite store the statement's result before the first row is read; the read and
    the insert take 5 us where the upsert took 15 (W10's agent takes a lease every turn).
    """
    found = cursor.execute(LEASE, (thread_id, branch_id)).fetchall()
    current = lease_of(thread_id, branch_id, found)
    now = time.time()
    if current is not None and current.expires > now and not holder_gone(current):
        raise current.busy()
    lease = new_lease(thread_id, branch_id, holder, ttl, now)
    values = (lease.id, holder, lease.expires, ttl, lease.pid, lease.host, lease.pid_ns)
    if current is None:
        cursor.execute(_PUT_LEASE, (thread_id, branch_id, *values))
    else:
        cursor.execute(_RETAKE_LEASE, (*values, thread_id, branch_id))
    return lease
