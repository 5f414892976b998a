"""The SQL stores' operations, written once for SQLite and PostgreSQL, doing no I/O.

Each operation is a generator: it yields the statements it needs (``Stmt``, ``Many``,
``Lock``), is sent back each one's rows, and returns its result; the back ends
(``sqlite``, ``postgres``) drive them. So the checks that make an append safe (the lease's
fencing token, the branch's last sequence) are written once, in the statement that appends;
or, where every write transaction holds the database from its start (SQLite), in a read
just before a plain insert (``locked_ops``).

Statements use ``?`` placeholders and ``BYTES`` to order text by its bytes; the PostgreSQL
driver turns them into ``%s`` and ``COLLATE "C"``. A record is kept as its history-file
line (``_codec.encode_event``, with its checksum), so the SQL stores hold records in
exactly the JSON the file store writes, and a read checks each checksum.

The tables (``nodestep_`` names): ``events`` (one row a record, primary key ``(thread,
branch, seq)``, so a sequence can never be written twice), ``branches`` (forks, in the order
they were made), ``leases`` (the current lease of each branch) and ``meta`` (the schema
version).

Each row keeps what its record says of its thread's status (``status``, set when it is
stored; ``nodestep.store._threads``), which the thread management of ``thread_ops`` reads.
"""

from __future__ import annotations

import time
from collections.abc import Generator, Sequence
from dataclasses import dataclass, replace
from typing import Any

from nodestep._errors import StateStoreError, ThreadBusyError, ThreadConflictError
from nodestep.store._contract import REQUEST_KEY, BranchRecord, Record, missing_checkpoint
from nodestep.store._leases import RENEW_WITHIN, Lease, holder_gone, lost, new_lease
from nodestep.store._threads import ThreadStatus, status_after

__all__ = [
    "BIG_APPEND",
    "BYTES",
    "LAST_STATUS",
    "SCHEMA_VERSION",
    "Lock",
    "Many",
    "Op",
    "Stmt",
    "acquire",
    "acquire_and_append",
    "append",
    "append_following",
    "chained_append",
    "create_branch",
    "damaged_version",
    "find_request",
    "last_checkpoint",
    "last_record",
    "last_sequence",
    "list_branches",
    "locate",
    "read",
    "read_tail",
    "refusal",
    "release",
    "renew",
    "rows_of",
    "store_pruned",
    "version_of",
]

SCHEMA_VERSION = 1
"""The version of the tables this nodestep writes; ``meta`` holds the database's."""


def version_of(value: object) -> int | None:
    """Return the schema version a ``meta`` row holds, or ``None`` for a damaged one.

    nodestep writes a version as its decimal digits, from 1 up; anything else (``'x'``,
    ``''``, ``'-1'``) was written by something else, and no version can be told from it.
    """
    text = str(value)
    if not (text.isascii() and text.isdigit()) or int(text) < 1:
        return None
    return int(text)


def damaged_version(where: str, value: object) -> str:
    """Return the message for a ``meta`` row whose schema version cannot be read."""
    return (
        f"{where}: its schema version (table nodestep_meta, key 'schema') is {value!r}, not "
        f"a version number (nodestep writes {SCHEMA_VERSION} there), so nodestep cannot tell "
        f"whether it may read the tables. Something other than nodestep changed the row: "
        f"if the tables are nodestep's and otherwise whole, set it back with \"UPDATE "
        f"nodestep_meta SET value = '{SCHEMA_VERSION}' WHERE key = 'schema'\"; otherwise "
        f"restore the database from a backup."
    )


BIG_APPEND = 1000
"""Records an append stores with one statement; a bigger one needs a transaction."""

BYTES = "COLLATE BINARY"
"""Order text by its bytes (UTF-8: by code points, as Python compares strings), as every
store orders ids. It is SQLite's default; the PostgreSQL driver turns it into
``COLLATE "C"``, as a database's own collation (``en_US.utf8``, say) orders by a language's
rules, which differ by database and by C library version."""
_FAR = 2**62  # a sequence number beyond any branch's: "to the end"


# Stmt and Many are not frozen, though nothing changes one once made: a frozen dataclass's
# __init__ sets each field through object.__setattr__, 0.9 us a statement against 0.25,
# and an append makes two (W10's agent: ten a turn).
@dataclass(slots=True)
class Stmt:
    """One statement; the driver sends back its rows (``[]`` for a statement without)."""

    sql: str
    params: tuple[Any, ...] = ()


@dataclass(slots=True)
class Many:
    """One statement run for each tuple of ``rows`` (``executemany``); it gives no rows."""

    sql: str
    rows: list[tuple[Any, ...]]


@dataclass(frozen=True, slots=True)
class Lock:
    """Hold ``key`` until the transaction ends: PostgreSQL's advisory lock.

    SQLite's drivers skip it: their write transactions (``BEGIN IMMEDIATE``) already hold
    the whole database. In PostgreSQL it makes two writers of one branch take turns, so a
    check and the write after it see no one else's write between them. ``tables``: lock
    the event and branch tables against every write instead (prune, delete), which the
    appends, one statement each, take no advisory lock for.
    """

    key: str
    tables: bool = False


Rows = list[tuple[Any, ...]]
Op = Generator[Stmt | Many | Lock, Rows, Any]
"""An operation: yields statements, is sent their rows, returns its result."""


EVENT_COLUMNS = "(thread, branch, seq, id, kind, request, line, ts, status)"
_ROW = "(?, ?, ?, ?, ?, ?, ?, ?, ?)"
_INSERT = f"INSERT INTO nodestep_events {EVENT_COLUMNS} VALUES {_ROW}"
# The last sequence as an index lookup: ``ORDER BY seq DESC LIMIT 1`` reads one entry of the
# primary key. (PostgreSQL plans ``max(seq)`` as a scan of every row of the branch while the
# table has no statistics yet, e.g. freshly filled, which made each append cost O(history).)
_LAST = "SELECT seq FROM nodestep_events WHERE thread = ? AND branch = ? ORDER BY seq DESC LIMIT 1"
_LAST_RECORD = (
    "SELECT seq, id FROM nodestep_events WHERE thread = ? AND branch = ? ORDER BY seq DESC LIMIT 1"
)
BY_ID = "SELECT 1 FROM nodestep_events WHERE thread = ? AND id = ?"
# Whether the lease (its fencing token) still holds the branch: every leased append asks.
HELD = "SELECT 1 FROM nodestep_leases WHERE thread = ? AND branch = ? AND id = ?"
# The thread's status: what the main branch's last row that says one holds. The rows are
# written with it (``rows_of`` carries it over records that say none), so this reads one
# entry of the primary key, with no index of its own to keep on every append; trailing
# state_updated rows that an older nodestep wrote without one are stepped over.
LAST_STATUS = (
    "SELECT e.status FROM nodestep_events e WHERE e.thread = {t} AND e.branch = {b} "
    "AND e.status IS NOT NULL ORDER BY e.seq DESC LIMIT 1"
)
# An insert's columns from its VALUES; a row without a status takes the branch's last.
_COLUMNS = "column1, column2, column3, column4, column5, column6, column7, column8, column9"
_STATUS = _COLUMNS.replace(
    "column9", f"coalesce(column9, ({LAST_STATUS.format(t='v.column1', b='v.column2')}))"
)
LEASE = (
    "SELECT id, holder, expires, ttl, pid, host, pid_ns FROM nodestep_leases "
    "WHERE thread = ? AND branch = ?"
)


def _key(thread_id: str, branch_id: str) -> str:
    """Return the lock key of a branch: unambiguous, and without NUL (PostgreSQL text)."""
    return f"{len(thread_id)}:{thread_id}{branch_id}"


def rows_of(
    thread_id: str,
    branch_id: str,
    records: Sequence[Record],
    lines: list[bytes],
    *,
    locked: bool = False,
) -> Rows:
    """Return the ``nodestep_events`` rows of checked ``records``, whose lines are ``lines``.

    ``locked``: rows for ``locked_ops``' insert (SQLite), which stores the same
    values, given as ``sqlite3`` binds them for the least work: a line as a ``bytearray``
    (still a BLOB) and no request key as ``0`` (``nullif`` stores NULL). ``sqlite3`` looks
    for an adapter of every parameter of another type than ``int``, ``float``, ``str`` and
    ``bytearray``: 0.5 us for a ``bytes`` or ``None``, two a row (W10's agent: 5.3 rows a
    turn), where the copy of the line costs 0.1 us.
    """
    if len(lines) != len(records):
        raise ValueError(f"{len(records)} records, but {len(lines)} lines")
    out: Rows = []
    main = branch_id == "main"
    status: ThreadStatus | None = None
    no_request = 0 if locked else None
    # By a counter, not zip(records, lines, strict=True): the zip cost 2,700 of the 9,500
    # instructions of an append's rows (W10's agent: four appends a turn); enumerate, 800.
    i = 0
    for record in records:
        kind = record["type"]
        request = record.get(REQUEST_KEY) if kind == "run_started" else None
        if not isinstance(request, str):
            request = no_request  # only a string can be a request key the engine asks for
        # The thread's status after the record (main branch only): a record that says
        # none (state_updated) carries the one before it, so that the branch's last row
        # holds the thread's status. None only before the append's first saying one,
        # which the insert fills from the branch's last row (``_STATUS``).
        status = status_after(status, record) if main else None
        line = bytearray(lines[i]) if locked else lines[i]
        out.append((thread_id, branch_id, record["seq"], record["id"], kind, request, line,
                    float(record["ts"]), status))  # fmt: skip
        i += 1  # noqa: SIM113 (enumerate costs more: see above)
    return out


def _line(value: Any) -> bytes:
    # A line edited by hand may come back as text; its checksum still judges it.
    return value.encode() if isinstance(value, str) else bytes(value)


def last_sequence(thread_id: str, branch_id: str) -> Op:
    """Return the branch's last sequence number, 0 when it has no record."""
    rows = yield Stmt(_LAST, (thread_id, branch_id))
    return int(rows[0][0] or 0) if rows else 0


def last_record(thread_id: str, branch_id: str) -> Op:
    """Return the branch's last sequence number and its record's id; ``(0, None)`` if empty."""
    rows = yield Stmt(_LAST_RECORD, (thread_id, branch_id))
    return (int(rows[0][0]), str(rows[0][1])) if rows else (0, None)


def append(
    thread_id: str,
    branch_id: str,
    records: Sequence[Record],
    lines: list[bytes],
    after: int,
    lease: Lease | None = None,
    give_back: bool = False,
) -> Op:
    """Store checked ``lines`` if the branch still ends at ``after`` (and ``lease`` holds it).

    One statement inserts the rows only if the branch's last sequence is ``after`` and, with
    ``lease``, the lease (its fencing token) is still the branch's: so the checks and the
    write are one atomic step even without a transaction around them, and an append costs
    one round trip to a server. Two writers that both pass the check at once collide on the
    primary key ``(thread, branch, seq)``; the driver reports that as a conflict. A lease
    with less than half its ttl left is renewed first. Returns the lease in force. With
    ``give_back``, the lease is then dropped in the same transaction (a run's last append).
    """
    if lease is not None and time.time() > lease.expires - RENEW_WITHIN * lease.ttl:
        lease = yield from renew(lease)
    rows = rows_of(thread_id, branch_id, records, lines)
    if len(rows) > BIG_APPEND:
        lease = yield from _append_big(thread_id, branch_id, rows, after, lease)
    else:
        lease = yield from _append_small(thread_id, branch_id, rows, after, lease)
    if give_back and lease is not None:
        yield from release(lease)
    return lease


def acquire_and_append(
    thread_id: str,
    branch_id: str,
    holder: str,
    ttl: float,
    records: Sequence[Record],
    lines: list[bytes],
    after: int,
    after_id: str | None,
) -> Op:
    """Take the branch for ``holder`` and append ``records`` as its holder: a run's first.

    In one transaction, the lease is taken and the records stored, or, when the branch's
    last record is no longer ``after`` (of id ``after_id``), the lease alone is taken (the
    run then reads the branch under it). Returns the lease and whether the records were
    stored.

    Raises:
        ThreadBusyError: another holder's lease has not expired.
    """
    lease = yield from acquire(thread_id, branch_id, holder, ttl)
    stored = yield from append_following(
        thread_id, branch_id, records, lines, after, after_id, lease
    )
    return lease, stored


def append_following(
    thread_id: str,
    branch_id: str,
    records: Sequence[Record],
    lines: list[bytes],
    after: int,
    after_id: str | None,
    lease: Lease,
) -> Op:
    """Append ``records`` as the lease's holder if the branch's last record is ``after``.

    And, with ``after_id``, if that record's id is ``after_id``: a thread deleted and
    written again can reach ``after`` with other records. Returns whether they were
    stored; one statement when they are.

    Raises:
        ThreadBusyError: the lease was lost (a ttl shorter than the call); nothing stored.
    """
    if after_id is None or len(records) > BIG_APPEND:
        try:
            yield from append(thread_id, branch_id, records, lines, after, lease)
        except ThreadBusyError:
            raise
        except ThreadConflictError:
            return False  # the branch moved on
        return True
    rows = rows_of(thread_id, branch_id, records, lines)
    stored = yield chained_append(rows, after, after_id, lease)
    if len(stored) == len(rows):
        return True
    yield from still_held(thread_id, branch_id, lease)
    # A first try of this statement may have stored them, and its answer been lost with
    # its connection (``pg_retry`` then runs it again): they are there, by id.
    mine = yield Stmt(BY_ID, (thread_id, rows[0][3]))
    return bool(mine)


def _append_small(
    thread_id: str, branch_id: str, rows: Rows, after: int, lease: Lease | None
) -> Op:
    # One statement: the checks and the insert.
    values = ", ".join([_ROW] * len(rows))
    params: list[Any] = [value for row in rows for value in row]
    fence = ""
    params += [thread_id, branch_id, after]
    if lease is not None:
        fence = f" AND EXISTS ({HELD})"
        params += [thread_id, branch_id, lease.id]
    stored = yield Stmt(
        f"INSERT INTO nodestep_events {EVENT_COLUMNS} SELECT {_columns(rows)} "
        f"FROM (VALUES {values}) AS v WHERE coalesce(({_LAST}), 0) = ?{fence} RETURNING seq",
        tuple(params),
    )
    if len(stored) != len(rows):  # nothing stored: say which check refused it
        yield from refusal(thread_id, branch_id, after, lease)
    return lease


def _columns(rows: Rows) -> str:
    """Return the select list of an insert of ``rows`` from its ``VALUES``: the plain one,
    or the one that gives the first rows the branch's last status (``takes_status``)."""
    return _STATUS if takes_status(rows) else _COLUMNS


def takes_status(rows: Rows) -> bool:
    """Tell whether the first of ``rows``, of the main branch, says no status: it and the
    rows after it that say none take the branch's last (``rows_of`` carries it on)."""
    first = rows[0]
    return first[8] is None and first[1] == "main"


def refusal(thread_id: str, branch_id: str, after: int, lease: Lease | None) -> Op:
    """Raise what refused an append after ``after``: the lease lost, or another writer."""
    yield from still_held(thread_id, branch_id, lease)
    last = yield from last_sequence(thread_id, branch_id)
    raise ThreadConflictError(thread_id, branch_id, after, last)


def chained_append(rows: Rows, after: int, after_id: str, lease: Lease) -> Stmt:
    """The statement of an append sent before the one it follows is answered (a pipe).

    Besides ``append``'s checks, the branch's last record must be the one it follows, by
    id: if that one was refused, the branch may still reach ``after`` with another
    writer's records, which must not be taken for it. Returns no rows when refused.
    """
    thread_id, branch_id = lease.thread_id, lease.branch_id
    values = ", ".join([_ROW] * len(rows))
    params: list[Any] = [value for row in rows for value in row]
    params += [thread_id, branch_id, after, after_id, thread_id, branch_id, lease.id]
    return Stmt(
        f"INSERT INTO nodestep_events {EVENT_COLUMNS} SELECT {_columns(rows)} "
        f"FROM (VALUES {values}) AS v WHERE EXISTS (SELECT 1 FROM ({_LAST_RECORD}) AS last "
        f"WHERE last.seq = ? AND last.id = ?) "
        f"AND EXISTS ({HELD}) "
        f"RETURNING seq",
        tuple(params),
    )


def still_held(thread_id: str, branch_id: str, lease: Lease | None) -> Op:
    """Refuse an append of a run whose lease of the branch is no longer the current one."""
    if lease is None:
        return
    found = yield Stmt(LEASE, (thread_id, branch_id))
    current = lease_of(thread_id, branch_id, found)
    if current is None or current.id != lease.id:
        raise lost(lease, current)


def _append_big(thread_id: str, branch_id: str, rows: Rows, after: int, lease: Lease | None) -> Op:
    # Too many values for one statement (SQLite takes 32,766): check, then insert, which
    # the caller runs in one transaction.
    yield Lock(_key(thread_id, branch_id))
    yield from still_held(thread_id, branch_id, lease)
    last = yield from last_sequence(thread_id, branch_id)
    if last != after:
        raise ThreadConflictError(thread_id, branch_id, after, last)
    if takes_status(rows):
        found = yield Stmt(LAST_STATUS.format(t="?", b="?"), (thread_id, branch_id))
        before = found[0][0] if found else None
        rows = [row if row[8] is not None else (*row[:8], before) for row in rows]
    yield Many(_INSERT, rows)
    return lease


def read(thread_id: str, branch_id: str, start: int, stop: int | None) -> Op:
    """Return the lines of the branch's records with ``start <= seq <= stop``."""
    rows = yield Stmt(
        "SELECT line FROM nodestep_events WHERE thread = ? AND branch = ? "
        "AND seq >= ? AND seq <= ? ORDER BY seq",
        (thread_id, branch_id, max(start, 0), _FAR if stop is None else min(stop, _FAR)),
    )
    return [_line(row[0]) for row in rows]


def read_tail(thread_id: str, branch_id: str, at: int | None) -> Op:
    """Return the lines from the last checkpoint at or before ``at`` through ``at``, at once.

    Raises:
        StateStoreError: the branch has records up to ``at`` but no checkpoint among them.
    """
    stop = _FAR if at is None else min(at, _FAR)
    rows = yield Stmt(
        "SELECT line FROM nodestep_events WHERE thread = ? AND branch = ? AND seq <= ? "
        "AND seq >= (SELECT seq FROM nodestep_events WHERE thread = ? AND branch = ? "
        "AND kind = 'checkpoint' AND seq <= ? ORDER BY seq DESC LIMIT 1) ORDER BY seq",
        (thread_id, branch_id, stop, thread_id, branch_id, stop),
    )
    if rows:
        return [_line(row[0]) for row in rows]
    last = yield from last_sequence(thread_id, branch_id)
    if at is None and last == 0:
        return []
    raise missing_checkpoint(thread_id, branch_id, last if at is None else at)


def last_checkpoint(thread_id: str, branch_id: str, at_or_before: int | None) -> Op:
    """Return the sequence number of the branch's last checkpoint (at or before), or None."""
    rows = yield Stmt(
        "SELECT seq FROM nodestep_events WHERE thread = ? AND branch = ? "
        "AND kind = 'checkpoint' AND seq <= ? ORDER BY seq DESC LIMIT 1",
        (thread_id, branch_id, _FAR if at_or_before is None else min(at_or_before, _FAR)),
    )
    return None if not rows or rows[0][0] is None else int(rows[0][0])


def locate(thread_id: str, event_id: str) -> Op:
    """Return ``(branch, seq)`` of the thread's record with id ``event_id``, or None.

    Of copies of the id (two writers that counted ids alike), the first by
    ``_index.first_copy``: the lowest seq, then the branch id by bytes (``BYTES``).
    """
    rows = yield Stmt(
        "SELECT branch, seq FROM nodestep_events WHERE thread = ? AND id = ? "
        f"ORDER BY seq, branch {BYTES} LIMIT 1",
        (thread_id, event_id),
    )
    return (str(rows[0][0]), int(rows[0][1])) if rows else None


def create_branch(branch: BranchRecord, first: Sequence[Record], lines: list[bytes]) -> Op:
    """Store a branch and its checked first ``lines``; False when its id is taken."""
    yield Lock(_key(branch.thread_id, branch.id))
    taken = yield Stmt(
        "SELECT 1 FROM nodestep_branches WHERE thread = ? AND branch = ? UNION ALL "
        "SELECT 1 FROM nodestep_events WHERE thread = ? AND branch = ? LIMIT 1",
        (branch.thread_id, branch.id, branch.thread_id, branch.id),
    )
    if taken:
        return False
    yield _branch_row(branch)
    yield Many(_INSERT, rows_of(branch.thread_id, branch.id, first, lines))
    return True


def store_pruned(
    thread_id: str,
    branch_id: str,
    records: Sequence[Record],
    lines: list[bytes],
    branch: BranchRecord | None,
) -> Op:
    """Store a pruned branch's kept records (and its branch row), as ``prune`` leaves them:
    the rows simply start at the first kept record's ``seq``.

    Raises:
        StateStoreError: The branch has rows already; nothing was stored.
    """
    yield Lock(_key(thread_id, branch_id))
    taken = yield Stmt(
        "SELECT 1 FROM nodestep_branches WHERE thread = ? AND branch = ? UNION ALL "
        "SELECT 1 FROM nodestep_events WHERE thread = ? AND branch = ? LIMIT 1",
        (thread_id, branch_id, thread_id, branch_id),
    )
    if taken:
        raise StateStoreError(
            f"Cannot store the pruned branch {branch_id!r} of thread {thread_id!r}: the store "
            f"has that branch already. Nothing was stored; delete the thread first."
        )
    if branch is not None:
        yield _branch_row(branch)
    yield Many(_INSERT, rows_of(thread_id, branch_id, records, lines))


def _branch_row(branch: BranchRecord) -> Stmt:
    """The statement that stores a branch's record."""
    return Stmt(
        "INSERT INTO nodestep_branches (thread, branch, parent, from_event, from_seq, ts) "
        "VALUES (?, ?, ?, ?, ?, ?)",
        (
            branch.thread_id,
            branch.id,
            branch.parent_id,
            branch.from_event_id,
            branch.from_sequence,
            branch.created_at,
        ),
    )


def list_branches(thread_id: str) -> Op:
    """Return the thread's branches, oldest first."""
    rows = yield Stmt(
        "SELECT branch, parent, from_event, from_seq, ts FROM nodestep_branches "
        "WHERE thread = ? ORDER BY n",
        (thread_id,),
    )
    return [
        BranchRecord(str(b), thread_id, str(p), str(e), int(s), float(t)) for b, p, e, s, t in rows
    ]


def find_request(thread_id: str, branch_id: str, key: str) -> Op:
    """Return the seq of the branch's ``run_started`` record with request key ``key``."""
    rows = yield Stmt(
        "SELECT seq FROM nodestep_events WHERE thread = ? AND branch = ? "
        "AND request = ? AND kind = 'run_started' ORDER BY seq LIMIT 1",
        (thread_id, branch_id, key),
    )
    return None if not rows or rows[0][0] is None else int(rows[0][0])


# -- leases ---------------------------------------------------------------------------------


def lease_of(thread_id: str, branch_id: str, rows: Rows) -> Lease | None:
    if not rows:
        return None
    id_, holder, expires, ttl, pid, host, pid_ns = rows[0]
    return Lease(
        str(id_), thread_id, branch_id, str(holder), float(expires), float(ttl),
        int(pid), str(host), int(pid_ns),
    )  # fmt: skip


def renew(lease: Lease) -> Op:
    """Extend ``lease`` by its ttl from now, in one statement.

    Raises:
        ThreadBusyError: the lease is not its branch's current one any more (``lost``).
    """
    expires = time.time() + lease.ttl
    done = yield Stmt(
        "UPDATE nodestep_leases SET expires = ? WHERE thread = ? AND branch = ? AND id = ? "
        "RETURNING id",
        (expires, lease.thread_id, lease.branch_id, lease.id),
    )
    if done:
        return replace(lease, expires=expires)
    rows = yield Stmt(LEASE, (lease.thread_id, lease.branch_id))
    raise lost(lease, lease_of(lease.thread_id, lease.branch_id, rows))


LEASE_COLUMNS = "(thread, branch, id, holder, expires, ttl, pid, host, pid_ns)"
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
        f"INSERT INTO nodestep_leases {LEASE_COLUMNS} VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?) "
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


RELEASE = "DELETE FROM nodestep_leases WHERE thread = ? AND branch = ? AND id = ?"


def release(lease: Lease) -> Op:
    """Drop ``lease`` if it is still its branch's current one."""
    yield Stmt(RELEASE, (lease.thread_id, lease.branch_id, lease.id))
