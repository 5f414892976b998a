"""Calls of the PostgreSQL store that survive a server restart: dead connections, one retry.

When the server restarts, every connection the store keeps open dies with it. Two things
keep the first call after it from failing:

* a connection is looked at before each use (``check``, ``acheck``: the pools' ``check=``
  callback; ``pg_loops.alive`` for a loop's own connections), and a dead one is replaced;
* a call whose connection died before any of its statements answered runs once more, on a
  new connection (``Restartable``, and ``PostgresStateStore._run``), for what the check
  cannot see: a server that went away between the check and the statement.

Why one retry is safe for every operation: a statement on a dead connection either never
reached the server, or ran and committed before the server went away and its answer was
lost. The first case is a plain first attempt. In the second, the retry meets what the
first attempt did, and no operation does it twice: an append is refused by its ``after``
(the branch moved on: ``ThreadConflictError``) or its lease's fencing token, never stored
twice, as the primary key ``(thread, branch, seq)`` also ensures; ``create_branch`` finds
the branch and says so; taking a lease finds it held (by the same holder: the run then
waits or retries as for any held thread); renewing or giving back a lease, and every
read, give the same result twice. A call that failed after a statement answered (in the
middle of a transaction) is not retried: the caller sees the error, and the engine records
nothing half-done, since each append is one statement.
"""

from __future__ import annotations

from collections.abc import Generator
from typing import Any

from nodestep.store._sql import ops
from nodestep.store._sql.pg_loops import alive

__all__ = ["Restartable", "acheck", "check", "dead_connection"]


_DEAD = "the session of a pooled connection ended (a server restart?)"


def check(conn: Any) -> None:
    """The sync pool's ``check=``: close and refuse a connection whose session is gone.

    Closed, so that the pool drops it and opens another, instead of taking it back.
    """
    if not alive(conn):
        conn.close()
        raise ConnectionError(_DEAD)


async def acheck(conn: Any) -> None:
    """The async pool's ``check=``: close and refuse a connection whose session is gone."""
    if not alive(conn):
        await conn.close()
        raise ConnectionError(_DEAD)


def dead_connection(error: BaseException | None, psycopg: Any) -> bool:
    """Tell whether ``error`` says the connection's session ended (not a refused statement)."""
    return isinstance(error, psycopg.OperationalError | ConnectionError) and not isinstance(
        error, psycopg.errors.QueryCanceled | psycopg.errors.LockNotAvailable
    )


class Restartable(Generator[Any, Any, Any]):
    """An operation that can start again while none of its statements has answered.

    The first statement is kept: a run on a new connection gets it again. Once a statement
    answered (``answered``), the operation goes on only where it is.
    """

    def __init__(self, op: ops.Op) -> None:
        self._op = op
        self._first: Any = None
        self.answered = False

    def send(self, rows: Any) -> Any:
        """Return the operation's next statement; ``None`` starts it (again)."""
        if rows is None:
            if self._first is None:
                self._first = next(self._op)
            return self._first
        self.answered = True
        return self._op.send(rows)

    def throw(self, *args: Any) -> Any:
        """Raise an error inside the operation (the ``Generator`` protocol)."""
        return self._op.throw(*args)
