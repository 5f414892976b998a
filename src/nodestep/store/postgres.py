"""``PostgresStateStore``: history in a PostgreSQL database, shared by any number of machines.

Needs psycopg 3 and its pool: ``pip install 'nodestep[postgres]'`` (imported when a store is
made). The operations are ``_sql``'s, which the SQLite store shares; the tables are
``_pg_schema``'s, created on first use or ahead of time (``python -m nodestep.store.postgres
postgresql://admin@db/app [--schema NAME] [--print]``).

psycopg's async API runs on asyncio only, and an async connection belongs to the loop that
opened it. So on an asyncio loop a call runs on that loop's own async connections
(``_pg_loops``; or the pool of ``aopen``), on trio on the sync pool in a worker thread.

An append is one statement (``_sql.append``), atomic without a transaction; the primary key
``(thread, branch, seq)`` refuses a sequence written twice. A run sends its appends ahead
of their answers, on a connection of its own (``open_pipe``, ``_pg_appends``).
"""

from __future__ import annotations

import os
import sys
import threading
import weakref
from collections.abc import Sequence
from contextlib import AbstractContextManager
from typing import Any

import anyio.to_thread

from nodestep._errors import ThreadConflictError
from nodestep.store import _checks, _pg_schema, _sql, _sql_leases, _sql_threads
from nodestep.store._contract import AppendPipe, BranchRecord, Lease, Record, StateStore
from nodestep.store._pg_appends import PipedAppends, depth_of
from nodestep.store._pg_driver import Collision, check_version, drive, errors, running_loop, safe
from nodestep.store._pg_loops import Busy, PerLoop, run_on, run_pool, take
from nodestep.store._pg_pipe import Pipe
from nodestep.store._pg_schema import import_psycopg
from nodestep.store._threads import ThreadPage, ThreadStatus

__all__ = ["PostgresStateStore", "import_psycopg"]


class PostgresStateStore(StateStore):
    """Keep every thread's history in a PostgreSQL database.

    Any number of processes, on any machines, may share one database: appends are checked
    by the server (a sequence can never be written twice), leases are rows the server
    locks, and the fencing token of a lease is checked in the statement that appends.
    Records are kept as the same JSON lines, with the same checksums, as the other stores.

    Args:
        dsn: The database (a libpq connection string), e.g. ``"postgresql://u:pw@host/app"``.
        schema: The PostgreSQL schema of the tables (created if missing).
        create_schema: Create the tables on first use if missing; ``False`` where the
            role may not (create them with ``python -m nodestep.store.postgres DSN``).
        min_size: Connections the pool keeps open.
        max_size: Connections the pool opens at most.
        timeout: Seconds to wait for a connection of the pool.
        pipeline: How many appends a run (``invoke``, ``ainvoke``) sends ahead of their
            answers (``open_pipe``): a process killed mid-run may lose that many steps
            besides the one running. 0: each is answered before the next superstep runs.

    Raises:
        ImportError: psycopg is not installed: ``pip install 'nodestep[postgres]'``.
        ValueError: ``pipeline`` is not a whole number of 0 or more.
    """

    def __init__(
        self,
        dsn: str,
        *,
        schema: str = "public",
        create_schema: bool = True,
        min_size: int = 1,
        max_size: int = 10,
        timeout: float = 30.0,
        pipeline: int = 2,
    ) -> None:
        self.pipeline = depth_of(pipeline)
        self._psycopg = import_psycopg()
        self.dsn = dsn
        self.schema = schema
        self.create_schema = create_schema
        self.min_size, self.max_size, self.timeout = min_size, max_size, timeout
        self._pool: Any = None
        self._pid = 0
        self._pool_lock = threading.Lock()
        self._tables_ready = not create_schema
        self._apool: Any = None  # psycopg's AsyncConnectionPool on _aloop, after aopen()
        self._aloop: object = None
        self._loops = PerLoop(max_size)  # async connections of the other asyncio loops
        weakref.finalize(self, self._loops.close)

    def __repr__(self) -> str:
        return f"PostgresStateStore({safe(self.dsn)!r}, schema={self.schema!r})"

    def _connected(self) -> Any:
        with self._pool_lock:
            if self._pool is not None and self._pid == os.getpid():
                return self._pool
            # A pool must not cross a fork: its sockets are the parent's.
            from psycopg_pool import ConnectionPool

            if not self._tables_ready:
                self.create_tables()
            pool = ConnectionPool(
                self.dsn, min_size=self.min_size, max_size=self.max_size, timeout=self.timeout,
                open=False, kwargs=self._connection_options(),
            )  # fmt: skip
            pool.open(wait=True, timeout=self.timeout)
            try:
                check_version(pool, self._psycopg, f"{safe(self.dsn)} (schema {self.schema!r})")
            except BaseException:
                pool.close()
                raise
            self._pool, self._pid = pool, os.getpid()
            return pool

    async def _run(self, op: _sql.Op, *, write: bool = False) -> Any:
        """Run ``op`` (``write``: in one transaction) on the async pool or a worker thread."""
        loop = running_loop()
        if loop is not None and self._apool is not None and loop is self._aloop:
            with self._errors():
                return await run_pool(self._apool, op, write)
        if loop is not None:
            if self._pool is None or self._pid != os.getpid():
                await anyio.to_thread.run_sync(self.open)  # tables, version: in a thread
            try:
                with self._errors():
                    return await run_on(self._loops.of(loop), self._connect, op, write)
            except Busy:
                pass  # this loop's connections are all out: a worker thread's pool
        return await anyio.to_thread.run_sync(self._run_sync, op, write)

    async def _connect(self) -> Any:
        timeout = max(1, int(self.timeout))  # libpq takes whole seconds
        aconn = self._psycopg.AsyncConnection
        return await aconn.connect(self.dsn, connect_timeout=timeout, **self._connection_options())

    def _run_sync(self, op: _sql.Op, write: bool) -> Any:
        with self._errors():
            pool = self._connected()
            with pool.connection() as conn:
                if not write:
                    return drive(conn, op, in_transaction=False)
                with conn.transaction():
                    return drive(conn, op, in_transaction=True)

    def _errors(self) -> AbstractContextManager[None]:
        return errors(self._psycopg, f"{safe(self.dsn)} (schema {self.schema!r})")

    async def aopen(self) -> None:
        """Open an async pool (psycopg's async API) on the running asyncio event loop.

        The store's calls from this loop then use it (other asyncio loops get a few async
        connections each on their first call; trio uses worker threads). ``async with
        store:`` does the same, and closes it at the end. Close it on this loop: ``aclose``.

        Raises:
            StateStoreError: the server cannot be reached, or the tables are missing or
                of a newer nodestep.
        """
        loop = running_loop()
        await anyio.to_thread.run_sync(self.open)  # tables, version: once, in a thread
        if loop is None or self._apool is not None:
            return  # trio: the worker threads serve it
        from psycopg_pool import AsyncConnectionPool

        pool = AsyncConnectionPool(
            self.dsn, min_size=self.min_size, max_size=self.max_size, timeout=self.timeout,
            open=False, kwargs=self._connection_options(),
        )  # fmt: skip
        with self._errors():
            await pool.open(wait=True, timeout=self.timeout)
        self._apool, self._aloop = pool, loop

    async def __aenter__(self) -> PostgresStateStore:
        await self.aopen()
        return self

    async def __aexit__(self, *exc: object) -> None:
        await self.aclose()

    def _connection_options(self) -> dict[str, Any]:
        path = self.schema.replace("\\", "\\\\").replace(" ", "\\ ")
        return {"autocommit": True, "options": f"-c search_path={path}"}

    def open(self) -> None:
        """Open the pool's connections now (and create the tables, if it may and must).

        Blocks while the server answers: call it at start-up, so that the first run does
        not wait for connections. Without it, the first call opens them.

        Raises:
            StateStoreError: the server cannot be reached, or the tables are missing or
                of a newer nodestep.
        """
        with self._errors():
            self._connected()

    def create_tables(self) -> None:
        """Create the store's tables now, if missing (what first use does by default).

        Blocks while the server answers: call it at start-up, before any event loop needs
        the store, to take that time out of the first run.
        """
        _pg_schema.create_tables(self.dsn, self.schema)
        self._tables_ready = True

    # -- the StateStore methods ---------------------------------------------------------

    async def append(
        self, thread_id: str, branch_id: str, records: Sequence[Record], *, after: int
    ) -> None:
        """Append ``records`` to a branch, atomically, if its last sequence is still ``after``.

        Raises:
            ThreadConflictError: The branch's last sequence is not ``after``; nothing stored.
            StateStoreError: A record is not a valid event of this branch, or the database
                cannot be written; nothing stored.
        """
        lines = _checks.encode_events(thread_id, branch_id, records, after + 1)
        await self._append(thread_id, branch_id, records, lines, after, None)

    async def append_leased(self, lease: Lease, records: Sequence[Record], *, after: int) -> Lease:
        """Append as the lease's holder: its fencing token is checked by the append itself.

        Raises:
            ThreadBusyError: the lease was lost; nothing stored.
            ThreadConflictError: the branch's last sequence is not ``after``; nothing stored.
        """
        t, b = lease.thread_id, lease.branch_id
        lines = _checks.encode_events(t, b, records, after + 1)
        found: Lease = await self._append(t, b, records, lines, after, lease)
        return found

    async def _append(
        self,
        thread_id: str,
        branch_id: str,
        records: Sequence[Record],
        lines: list[bytes],
        after: int,
        lease: Lease | None,
    ) -> Any:
        op = _sql.append(thread_id, branch_id, records, lines, after, lease)
        try:
            return await self._run(op, write=len(records) > _sql.BIG_APPEND)
        except Collision:
            # Another writer stored the same sequence between our check and our insert.
            found = await self.last_sequence(thread_id, branch_id)
            raise ThreadConflictError(thread_id, branch_id, after, found) from None

    async def open_pipe(self, lease: Lease) -> AppendPipe | None:
        """Return a connection of this event loop for a run's appends ahead of their answers.

        ``None`` (each append is answered before the next) with ``pipeline=0``, on trio,
        and when this loop's connections are all out. See ``nodestep.store.pipes``.
        """
        loop = running_loop()
        if self.pipeline <= 0 or loop is None:
            return None
        with self._errors():
            taken = await take(loop, self._apool, self._aloop, self._loops, self._connect)
        if taken is None:
            return None
        conn, give = taken
        pipe = Pipe(conn, self._psycopg.pq)
        return PipedAppends(pipe, self.pipeline, self._run, give, repr(self))

    async def read(
        self, thread_id: str, branch_id: str, *, start: int = 1, stop: int | None = None
    ) -> list[Record]:
        """Return the branch's records with ``start <= seq <= stop`` (``None``: to the end)."""
        lines = await self._run(_sql.read(thread_id, branch_id, start, stop))
        return _sql.decode(lines, safe(self.dsn), thread_id, branch_id)

    async def read_tail(
        self, thread_id: str, branch_id: str, *, at: int | None = None
    ) -> list[Record]:
        """Return the records from the last checkpoint at or before ``at`` through ``at``."""
        lines = await self._run(_sql.read_tail(thread_id, branch_id, at))
        return _sql.decode(lines, safe(self.dsn), thread_id, branch_id)

    async def last_sequence(self, thread_id: str, branch_id: str) -> int:
        """Return the sequence number of the branch's last record, or 0 if it has none."""
        found: int = await self._run(_sql.last_sequence(thread_id, branch_id))
        return found

    async def last_checkpoint(
        self, thread_id: str, branch_id: str, *, at_or_before: int | None = None
    ) -> int | None:
        """Return the sequence number of the branch's last ``checkpoint`` record."""
        op = _sql.last_checkpoint(thread_id, branch_id, at_or_before)
        found: int | None = await self._run(op)
        return found

    async def locate(self, thread_id: str, event_id: str) -> tuple[str, int] | None:
        """Return ``(branch_id, seq)`` of the record with id ``event_id`` in the thread."""
        found: tuple[str, int] | None = await self._run(_sql.locate(thread_id, event_id))
        return found

    async def create_branch(self, branch: BranchRecord, first: Sequence[Record]) -> bool:
        """Create a branch and append its first records, atomically.

        Returns:
            ``False``, storing nothing, when the thread already has a branch with that id.

        Raises:
            StateStoreError: The branch record or a first record is invalid; nothing stored.
        """
        lines = _checks.encode_branch(branch, first)[1:]
        made: bool = await self._run(_sql.create_branch(branch, first, lines), write=True)
        return made

    async def list_branches(self, thread_id: str) -> list[BranchRecord]:
        """Return the thread's forked branches, oldest first."""
        found: list[BranchRecord] = await self._run(_sql.list_branches(thread_id))
        return found

    async def find_request(self, thread_id: str, branch_id: str, key: str) -> int | None:
        """Return the ``seq`` of the branch's ``run_started`` record with request key ``key``."""
        found: int | None = await self._run(_sql.find_request(thread_id, branch_id, key))
        return found

    async def acquire_lease(
        self, thread_id: str, branch_id: str, holder: str, *, ttl: float
    ) -> Lease:
        """Take the branch for ``holder`` for ``ttl`` seconds, for every client of the database.

        Raises:
            ThreadBusyError: another holder's lease has not expired; nothing changed.
        """
        op = _sql_leases.acquire(thread_id, branch_id, holder, ttl)
        lease: Lease = await self._run(op)  # one statement: atomic without a transaction
        return lease

    async def renew_lease(self, lease: Lease) -> Lease:
        """Extend ``lease`` by its ttl from now, and return the renewed lease.

        Raises:
            ThreadBusyError: the lease is not the branch's current one any more (``lost``).
        """
        renewed: Lease = await self._run(_sql.renew(lease))
        return renewed

    async def release_lease(self, lease: Lease) -> None:
        """Give the branch back, if ``lease`` still holds it; else do nothing."""
        await self._run(_sql_leases.release(lease))

    # -- thread management (the rules: nodestep.store.threads) ---------------------------

    async def list_threads(
        self,
        *,
        status: ThreadStatus | Sequence[ThreadStatus] | None = None,
        active_after: float | None = None,
        active_before: float | None = None,
        limit: int = 100,
        cursor: str | None = None,
    ) -> ThreadPage:
        """Return one page of the store's threads, most recent activity first (see base)."""
        op = _sql_threads.list_threads(status, active_after, active_before, limit, cursor)
        page: ThreadPage = await self._run(op)
        return page

    async def delete_thread(self, thread_id: str) -> bool:
        """Delete every record and branch of a thread; return ``False`` if it had none."""
        deleted: bool = await self._run(_sql_threads.delete_thread(thread_id), write=True)
        return deleted

    async def prune(
        self,
        thread_id: str | None = None,
        *,
        keep_last: int | None = None,
        older_than: float | None = None,
    ) -> int:
        """Drop records before a checkpoint of each branch; return how many (see base)."""
        op = _sql_threads.prune(thread_id, keep_last, older_than)
        dropped: int = await self._run(op, write=True)
        return dropped

    async def aclose(self) -> None:
        """Close the pools' connections; a later call opens a new pool.

        An async pool (``aopen``) is closed when this runs on its event loop.
        """
        with self._pool_lock:
            pool, self._pool = self._pool, None
        self._loops.close()
        if self._apool is not None and running_loop() is self._aloop:
            apool, self._apool, self._aloop = self._apool, None, None
            await apool.close()
        if pool is not None and self._pid == os.getpid():
            await anyio.to_thread.run_sync(pool.close)


if __name__ == "__main__":
    sys.exit(_pg_schema.main())
