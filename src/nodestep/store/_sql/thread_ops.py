"""The SQL stores' thread management, written once for SQLite and PostgreSQL: list, delete
and prune whole threads.

The operations are ``ops``'s kind (generators of statements, doing no I/O), over the same
tables, and follow the rules of ``nodestep.store._threads``, which every store shares: a
thread's status is what the last of its main branch's records that says one says (each row
keeps that in ``status``, set when it is stored), its activity the ``ts`` of its records and
branch records; prune cuts each branch at a checkpoint ``prune_cut`` chooses. A listing is
one query, filtered, ordered and cut by the database (``ORDER BY updated DESC, thread``,
keyset paging on the cursor), threads of one activity time ordered by their ids' bytes
(``BYTES``), as the other stores order them, whatever the database's collation.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

from nodestep.store._sql.ops import BYTES, LAST_STATUS, Lock, Op, Stmt
from nodestep.store._threads import (
    ThreadInfo,
    ThreadPage,
    ThreadStatus,
    check_listing,
    check_prune,
    decode_cursor,
    encode_cursor,
    prune_cut,
)

__all__ = ["delete_thread", "list_threads", "prune"]

_MANY = 2**62  # more threads than a store can hold

# Each thread with its first and last activity (events and branch records alike), its
# main branch's last sequence and its status (the last main record that says one).
_THREADS = f"""
SELECT a.thread, a.created, a.updated,
    coalesce((SELECT e.seq FROM nodestep_events e
        WHERE e.thread = a.thread AND e.branch = 'main' ORDER BY e.seq DESC LIMIT 1), 0)
        AS last_seq,
    coalesce(({LAST_STATUS.format(t="a.thread", b="'main'")}), 'completed') AS status
FROM (
    SELECT thread, min(ts) AS created, max(ts) AS updated FROM (
        SELECT thread, ts FROM nodestep_events
        UNION ALL SELECT thread, ts FROM nodestep_branches
    ) AS acts GROUP BY thread
) AS a
"""


def list_threads(
    status: ThreadStatus | Sequence[ThreadStatus] | None,
    active_after: float | None,
    active_before: float | None,
    limit: int,
    cursor: str | None,
) -> Op:
    """Return one ``ThreadPage`` of the store's threads.

    Raises:
        GraphConfigError: An argument is out of range, or ``cursor`` is not a cursor.
    """
    wanted = check_listing(status, active_after, active_before, limit)
    after = None if cursor is None else decode_cursor(cursor)
    if wanted is not None and not wanted:  # no status asked for: PostgreSQL has no IN ()
        return ThreadPage([], None)
    where: list[str] = []
    params: list[Any] = []
    if wanted is not None:
        where.append(f"status IN ({', '.join('?' * len(wanted))})")
        params += sorted(wanted)
    if active_after is not None:
        where.append("updated >= ?")
        params.append(float(active_after))
    if active_before is not None:
        where.append("updated < ?")
        params.append(float(active_before))
    if after is not None:
        where.append(f"(updated < ? OR (updated = ? AND thread {BYTES} > ?))")
        params += [after[0], after[0], after[1]]
    query = f"SELECT * FROM ({_THREADS}) AS t"
    if where:
        query += " WHERE " + " AND ".join(where)
    # One row more than the page shows tells whether a page follows; a limit beyond any
    # count (sys.maxsize, say) is cut to one that the databases' 64-bit integers hold.
    rows = yield Stmt(
        f"{query} ORDER BY updated DESC, thread {BYTES} LIMIT ?", (*params, min(limit, _MANY) + 1)
    )
    infos = [
        ThreadInfo(str(t), status, float(c), float(u), int(last)) for t, c, u, last, status in rows
    ]
    page = infos[:limit]
    return ThreadPage(page, encode_cursor(page[-1]) if len(infos) > limit else None)


def delete_thread(thread_id: str) -> Op:
    """Delete every record and branch of a thread; return whether it had any."""
    if not isinstance(thread_id, str):  # no thread has such an id
        return False
    yield Lock(thread_id, tables=True)
    found = yield Stmt(
        "SELECT 1 FROM nodestep_events WHERE thread = ? UNION ALL "
        "SELECT 1 FROM nodestep_branches WHERE thread = ? LIMIT 1",
        (thread_id, thread_id),
    )
    if not found:
        return False
    yield Stmt("DELETE FROM nodestep_events WHERE thread = ?", (thread_id,))
    yield Stmt("DELETE FROM nodestep_branches WHERE thread = ?", (thread_id,))
    return True


def prune(thread_id: str | None, keep_last: int | None, older_than: float | None) -> Op:
    """Drop each selected branch's records before its cut; return how many were dropped.

    Raises:
        GraphConfigError: Neither rule is given, or one is out of range.
    """
    check_prune(keep_last, older_than)
    if thread_id is None:
        yield Lock("*", tables=True)
        branches = yield Stmt("SELECT DISTINCT thread, branch FROM nodestep_events")
    else:
        yield Lock(thread_id, tables=True)
        branches = yield Stmt(
            "SELECT DISTINCT thread, branch FROM nodestep_events WHERE thread = ?", (thread_id,)
        )
    dropped = 0
    for thread, branch in sorted(branches):
        rows = yield Stmt(
            "SELECT seq, ts FROM nodestep_events WHERE thread = ? AND branch = ? "
            "AND kind = 'checkpoint' ORDER BY seq",
            (thread, branch),
        )
        last = yield Stmt(
            "SELECT seq FROM nodestep_events WHERE thread = ? AND branch = ? "
            "ORDER BY seq DESC LIMIT 1",
            (thread, branch),
        )
        pairs = [(int(seq), float(ts)) for seq, ts in rows]
        cut = prune_cut(int(last[0][0]), pairs, keep_last, older_than)
        if cut is None:
            continue
        gone = yield Stmt(
            "DELETE FROM nodestep_events WHERE thread = ? AND branch = ? AND seq < ? RETURNING seq",
            (thread, branch, cut),
        )
        dropped += len(gone)
    return dropped
