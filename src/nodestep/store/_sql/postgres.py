"""``PostgresStateStore``: history in a PostgreSQL database, shared by any number of machines.

Needs psycopg 3 and its pool: ``pip install 'nodestep[postgres]'`` (imported when a store is
made). The methods are ``SQLStateStore``'s and the operations ``ops``', which the SQLite
store shares; this module holds what is PostgreSQL's own: the tables (``schema_sql``,
created on first use or ahead of time with ``python -m nodestep.store postgres-schema
postgresql://admin@db/app [--schema NAME] [--print]``) and how an operation runs on psycopg.

psycopg's async API runs on asyncio only, and an async connection belongs to the loop that
opened it. So on an asyncio loop a call runs on that loop's own async connections
(``pg_loops``; or the pool of ``aopen``), on trio on the sync pool in a worker thread.

An append is one statement (``ops.append``), atomic without a transaction; the primary key
``(thread, branch, seq)`` refuses a sequence written twice. A run sends its appends ahead
of their answers, on a connection of its own (``open_pipe``, ``pg_pipe``).
"""

from __future__ import annotations

import asyncio
import os
import re
import threading
import weakref
from collections.abc import Awaitable, Callable, Iterator, Sequence
from contextlib import AbstractContextManager, contextmanager
from typing import Any

import anyio.to_thread

from nodestep._errors import StateStoreError
from nodestep.store._checks import encode_events
from nodestep.store._contract import AppendPipe, Lease, Record, StateStore, append_taken
from nodestep.store._sql import ops
from nodestep.store._sql.pg_loops import Busy, LoopConnections, PerLoop, take
from nodestep.store._sql.pg_pipe import Pipe, PipedAppends, depth_of
from nodestep.store._sql.pg_retry import Restartable, acheck, check, dead_connection
from nodestep.store._sql.store import READS, TRANSACTION, WRITES, Collision, SQLStateStore

__all__ = ["PostgresStateStore", "create_tables", "import_psycopg", "schema_sql"]


class PostgresStateStore(SQLStateStore):
    """Keep every thread's history in a PostgreSQL database.

    Any number of processes, on any machines, may share one database: appends are checked
    by the server (a sequence can never be written twice), leases are rows the server
    locks, and the fencing token of a lease is checked in the statement that appends.
    Records are kept as the same JSON lines, with the same checksums, as the other stores.

    Args:
        dsn: The database (a libpq connection string), e.g. ``"postgresql://u:pw@host/app"``.
        schema: The PostgreSQL schema of the tables (created if missing).
        create_schema: Create the tables on first use if missing; ``False`` where the
            role may not (create them with ``python -m nodestep.store postgres-schema DSN``).
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
        super().__init__(safe(dsn))
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
        _stores.add(self)

    def __repr__(self) -> str:
        return f"PostgresStateStore({safe(self.dsn)!r}, schema={self.schema!r})"

    def _display_facts(self) -> tuple[str, str, int | None]:
        return "PostgresStateStore", f"{safe(self.dsn)} (schema {self.schema})", None

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
                open=False, kwargs=self._connection_options(), check=check,
            )  # fmt: skip
            pool.open(wait=True, timeout=self.timeout)
            try:
                check_version(pool, self._psycopg, f"{safe(self.dsn)} (schema {self.schema!r})")
            except BaseException:
                pool.close()
                raise
            self._pool, self._pid = pool, os.getpid()
            return pool

    async def _run(self, op: ops.Op, access: int = READS, *, flush: bool = True) -> Any:
        """Run ``op`` on the async pool, this loop's connections or a worker thread.

        Only a ``TRANSACTION`` runs in one: every other statement commits on its own. An
        operation whose connection turned out dead before any statement answered runs once
        more, on another (``pg_retry`` says why that is safe for every operation).
        ``flush`` is not used: the server makes every commit durable as it is configured
        (its ``synchronous_commit``).
        """
        once = Restartable(op)
        try:
            return await self._run_once(once, access)
        except StateStoreError as e:
            if once.answered or not dead_connection(e.__cause__, self._psycopg):
                raise
        return await self._run_once(once, access)

    async def _run_once(self, op: ops.Op, access: int) -> Any:
        write = access == TRANSACTION
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

    def _run_sync(self, op: ops.Op, write: bool) -> Any:
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
            open=False, kwargs=self._connection_options(), check=acheck,
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
        # search_path takes SQL identifiers: quoted, as the tables were made (quote), or
        # the server folds 'Orders' to 'orders' and refuses 'my app'. The server splits
        # the options at whitespace, so each whitespace character of the name and each
        # backslash is escaped with a backslash.
        path = re.sub(r"([\\\s])", r"\\\1", quote(self.schema))
        # This keyword replaces the dsn's own options (and PGOPTIONS, which libpq reads only
        # without them), such as a statement_timeout: they go first, and the search_path
        # after them, so the store's schema wins over one they set.
        given = conninfo_options(self._psycopg, self.dsn)
        return {"autocommit": True, "options": f"{given} -c search_path={path}".lstrip()}

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
        create_tables(self.dsn, self.schema)
        self._tables_ready = True

    async def open_pipe(self, lease: Lease) -> AppendPipe | None:
        """Return a connection of this event loop for a run's appends ahead of their answers.

        ``None`` (each append is answered before the next) with ``pipeline=0``, on trio,
        and when this loop's connections are all out. See ``AppendPipe``.
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

    def _forget_after_fork(self) -> None:
        # In a forked child: the pools' sockets are the parent's sessions (ending them
        # would end them for the parent), their worker threads are gone, and a lock a
        # parent thread held at fork time stays held. The pools are kept, unused, for the
        # child's life; its first call opens a pool of its own.
        _inherited.extend((self._pool, self._apool))
        self._pool, self._apool, self._aloop = None, None, None
        self._pool_lock = threading.Lock()
        self._loops.forget_after_fork()

    async def append_and_release(
        self, lease: Lease, records: Sequence[Record], *, after: int
    ) -> None:
        """Append as the lease's holder, then give the lease back: ``StateStore``'s two calls.

        Why not one transaction, as SQLite: here a transaction costs a round trip to begin
        and one to commit, more than the release it would save.
        """
        await StateStore.append_and_release(self, lease, records, after=after)

    async def acquire_and_append(
        self,
        thread_id: str,
        branch_id: str,
        holder: str,
        records: Sequence[Record],
        *,
        ttl: float,
        after: int,
        after_id: str | None = None,
    ) -> tuple[Lease, bool]:
        """Take the branch, then append a run's first records: two statements.

        Not one transaction, for the same reason as ``append_and_release``: it would cost
        more round trips than it saves. The append checks the branch's last record by
        sequence number and id in its one statement; if it raises, the lease is given back.
        """
        lines = encode_events(thread_id, branch_id, records, after + 1)
        lease = await self.acquire_lease(thread_id, branch_id, holder, ttl=ttl)
        op = ops.append_following(thread_id, branch_id, records, lines, after, after_id, lease)
        access = TRANSACTION if len(records) > ops.BIG_APPEND else WRITES

        async def append() -> tuple[Lease, bool]:
            try:
                stored: bool = await self._run(op, access)
            except Collision:
                return lease, False  # another writer stored that sequence first: moved on
            return lease, stored

        return await append_taken(self, lease, append)

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


_stores: weakref.WeakSet[PostgresStateStore] = weakref.WeakSet()
_inherited: list[object] = []  # a forked child's copies of its parent's pools


def _after_fork_in_child() -> None:
    for store in list(_stores):
        store._forget_after_fork()


os.register_at_fork(after_in_child=_after_fork_in_child)


# -- the tables ----------------------------------------------------------------------------

_TABLES = """
CREATE SCHEMA IF NOT EXISTS {s};
CREATE TABLE IF NOT EXISTS {s}.nodestep_meta (key TEXT PRIMARY KEY, value TEXT NOT NULL);
CREATE TABLE IF NOT EXISTS {s}.nodestep_events (
    thread TEXT NOT NULL, branch TEXT NOT NULL, seq BIGINT NOT NULL, id TEXT NOT NULL,
    kind TEXT NOT NULL, request TEXT, line BYTEA NOT NULL, ts DOUBLE PRECISION NOT NULL,
    status TEXT, PRIMARY KEY (thread, branch, seq)
);
CREATE INDEX IF NOT EXISTS nodestep_event_ids ON {s}.nodestep_events (thread, id);
CREATE INDEX IF NOT EXISTS nodestep_checkpoints ON {s}.nodestep_events (thread, branch, seq)
    WHERE kind = 'checkpoint';
CREATE INDEX IF NOT EXISTS nodestep_requests ON {s}.nodestep_events (thread, branch, request)
    WHERE request IS NOT NULL;
CREATE TABLE IF NOT EXISTS {s}.nodestep_branches (
    n BIGINT GENERATED ALWAYS AS IDENTITY PRIMARY KEY, thread TEXT NOT NULL,
    branch TEXT NOT NULL, parent TEXT NOT NULL, from_event TEXT NOT NULL,
    from_seq BIGINT NOT NULL, ts DOUBLE PRECISION NOT NULL, UNIQUE (thread, branch)
);
CREATE TABLE IF NOT EXISTS {s}.nodestep_leases (
    thread TEXT NOT NULL, branch TEXT NOT NULL, id TEXT NOT NULL, holder TEXT NOT NULL,
    expires DOUBLE PRECISION NOT NULL, ttl DOUBLE PRECISION NOT NULL, pid BIGINT NOT NULL,
    host TEXT NOT NULL, pid_ns BIGINT NOT NULL, PRIMARY KEY (thread, branch)
);
INSERT INTO {s}.nodestep_meta VALUES ('schema', '{version}') ON CONFLICT (key) DO NOTHING;
"""


def import_psycopg() -> Any:
    """Import psycopg (3) and its pool, or say which extra to install."""
    try:
        import psycopg
        import psycopg_pool  # noqa: F401 - checked here, used when a pool is made
    except ImportError as e:
        raise ImportError(
            f"PostgresStateStore needs psycopg 3 and psycopg_pool ({e.name} is missing): "
            f"pip install 'nodestep[postgres]'",
            name=e.name,
        ) from e
    return psycopg


def conninfo_options(psycopg: Any, dsn: str) -> str:
    """Return the server options a connection to ``dsn`` would send without the store's.

    That is the dsn's ``options``, else the ``PGOPTIONS`` environment variable; a dsn that
    does not parse gives none here, and its connection fails with the reason.
    """
    try:
        given = psycopg.conninfo.conninfo_to_dict(dsn).get("options")
    except psycopg.Error:
        return ""
    return str(given) if given else os.environ.get("PGOPTIONS", "")


def quote(name: str) -> str:
    """Return ``name`` as a quoted SQL identifier."""
    return '"' + name.replace('"', '""') + '"'


def schema_sql(schema: str = "public", version: int = ops.SCHEMA_VERSION) -> str:
    """Return the SQL that creates the store's tables in ``schema``; it is idempotent."""
    return _TABLES.format(s=quote(schema), version=version)


def create_tables(dsn: str, schema: str = "public") -> None:
    """Create the store's tables in ``schema`` of the database at ``dsn``, if missing.

    Takes an advisory lock first, so stores that start at once do not race to create
    them (PostgreSQL's ``IF NOT EXISTS`` does not guard against that).

    Raises:
        ImportError: psycopg is not installed: ``pip install 'nodestep[postgres]'``.
        psycopg.Error: the server refused (e.g. the role may not create tables).
    """
    psycopg = import_psycopg()
    with psycopg.connect(dsn) as conn, conn.transaction():
        conn.execute("SELECT pg_advisory_xact_lock(hashtextextended('nodestep schema', 0))")
        conn.execute(schema_sql(schema, ops.SCHEMA_VERSION).encode())


# -- running operations on psycopg ---------------------------------------------------------


@contextmanager
def errors(psycopg: Any, where: str) -> Iterator[None]:
    """Turn psycopg's errors into a ``Collision`` (a key stored first) or ``StateStoreError``."""
    try:
        yield
    except psycopg.errors.UniqueViolation:
        raise Collision() from None
    except psycopg.Error as e:
        raise StateStoreError(
            f"PostgreSQL history {where}: {type(e).__name__}: {e}. Check that the server runs "
            f"and the role may read and write the nodestep tables; nothing of a refused write "
            f"was stored."
        ) from e


def _translate(stmt: ops.Stmt | ops.Many | ops.Lock, in_transaction: bool) -> Any:
    """Return ``(sql, params, many)`` for a statement of an operation, or None to skip it."""
    if isinstance(stmt, ops.Stmt):
        return _params(stmt.sql), stmt.params, False
    if isinstance(stmt, ops.Many):
        return _params(stmt.sql), stmt.rows, True
    if not in_transaction:  # outside one, a lock would end with its statement
        return None
    if stmt.tables:  # the appends, one statement each, take no advisory lock
        return _LOCK_TABLES, (), False
    return "SELECT pg_advisory_xact_lock(hashtextextended(%s, 0))", (stmt.key,), False


_LOCK_TABLES = "LOCK TABLE nodestep_events, nodestep_branches IN SHARE ROW EXCLUSIVE MODE"


def drive(conn: Any, op: ops.Op, *, in_transaction: bool) -> Any:
    """Run ``op``'s statements on a psycopg connection and return its result."""
    rows: Any = None  # a generator's first send must be None
    try:
        while True:
            found = _translate(op.send(rows), in_transaction)
            rows = []
            if found is not None and found[2]:
                with conn.cursor() as cur:
                    cur.executemany(found[0], found[1])
            elif found is not None:
                cur = conn.execute(found[0], found[1])
                rows = cur.fetchall() if cur.description is not None else []
    except StopIteration as done:
        return done.value


async def drive_async(conn: Any, op: ops.Op, *, in_transaction: bool) -> Any:
    """``drive`` on a psycopg ``AsyncConnection``."""
    rows: Any = None
    try:
        while True:
            found = _translate(op.send(rows), in_transaction)
            rows = []
            if found is not None and found[2]:
                async with conn.cursor() as cur:
                    await cur.executemany(found[0], found[1])
            elif found is not None:
                cur = await conn.execute(found[0], found[1])
                rows = await cur.fetchall() if cur.description is not None else []
    except StopIteration as done:
        return done.value


_converted: dict[str, str] = {}


def _params(sql: str) -> str:
    """Return ``sql`` with psycopg's ``%s`` placeholders for ``ops``' ``?``, and
    PostgreSQL's byte order for ``ops.BYTES``."""
    found = _converted.get(sql)
    if found is None:
        if len(_converted) > 4096:  # appends of many sizes: keep the cache bounded
            _converted.clear()
        found = sql.replace("?", "%s").replace(ops.BYTES, 'COLLATE "C"')
        _converted[sql] = found
    return found


def safe(dsn: str) -> str:
    """Return ``dsn`` without its password, to name it in messages."""
    dsn = re.sub(r"(://[^:/@]*):[^@/]*@", r"\1:***@", dsn)
    return re.sub(r"(password\s*=\s*)\S+", r"\1***", dsn)


def running_loop() -> object:
    """Return the running asyncio event loop, or None (no loop, or trio)."""
    try:
        return asyncio.get_running_loop()
    except RuntimeError:
        return None


def check_version(pool: Any, psycopg: Any, where: str) -> None:
    """Check that the tables a new pool reaches are of a schema version this nodestep reads.

    Raises:
        StateStoreError: the tables are missing, of a newer nodestep, or their version row
            is damaged.
    """
    with pool.connection() as conn:
        try:
            row = conn.execute("SELECT value FROM nodestep_meta WHERE key = 'schema'").fetchone()
        except psycopg.errors.UndefinedTable:
            row = None  # no tables: said below
    if row is not None and ops.version_of(row[0]) is None:
        raise StateStoreError(ops.damaged_version(f"PostgreSQL history {where}", row[0]))
    if row is None or int(row[0]) > ops.SCHEMA_VERSION:
        found = "no schema version" if row is None else f"schema version {row[0]}"
        raise StateStoreError(
            f"PostgreSQL history {where} has {found}; this nodestep reads version "
            f"{ops.SCHEMA_VERSION}. Upgrade nodestep, or create the tables with "
            f"`python -m nodestep.store postgres-schema DSN`."
        )


async def run_on(
    conns: LoopConnections, connect: Callable[[], Awaitable[Any]], op: ops.Op, write: bool
) -> Any:
    """Run ``op`` (``write``: in one transaction) on a connection of ``conns``.

    Raises:
        Busy: every connection ``conns`` may open is out: use a worker thread.
    """
    conn = conns.take()
    try:
        if conn is None:
            conn = await connect()
        if not write:
            return await drive_async(conn, op, in_transaction=False)
        async with conn.transaction():
            return await drive_async(conn, op, in_transaction=True)
    finally:
        conns.give(conn)


async def run_pool(apool: Any, op: ops.Op, write: bool) -> Any:
    """Run ``op`` (``write``: in one transaction) on a connection of psycopg's async pool."""
    async with apool.connection() as conn:
        if not write:
            return await drive_async(conn, op, in_transaction=False)
        async with conn.transaction():
            return await drive_async(conn, op, in_transaction=True)
