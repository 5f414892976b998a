"""The procrastinate app both sides of the queue use: one task, ``nodestep.run``.

procrastinate keeps its jobs in PostgreSQL, the database the runs' ``PostgresStateStore``
already needs, so distributing runs adds no server (``docs/workers.md`` has the comparison
with Celery that chose it). It is an optional extra, imported here and nowhere else.
"""

from __future__ import annotations

from typing import Any

import anyio

from nodestep import GraphConfigError, GraphExecutionError

__all__ = [
    "NO_TABLES",
    "TASK_NAME",
    "ensure_schema",
    "has_schema",
    "load_procrastinate",
    "make_app",
    "open_app",
    "queue_failure",
]

TASK_NAME = "nodestep.run"


def load_procrastinate() -> Any:
    """Return the ``procrastinate`` module, or say which extra installs it.

    Raises:
        GraphConfigError: procrastinate (or psycopg) is not installed.
    """
    try:
        import procrastinate
    except ImportError as error:  # pragma: no cover - the test extra installs it
        raise GraphConfigError(
            f"nodestep.workers needs the 'workers' extra ({error}); install it with "
            f"pip install 'nodestep[workers]'."
        ) from error
    return procrastinate


def make_app(dsn: str) -> Any:
    """Return a procrastinate ``App`` on the PostgreSQL database at ``dsn`` (not yet open)."""
    if not isinstance(dsn, str) or not dsn.startswith(("postgresql://", "postgres://")):
        raise GraphConfigError(
            f"The run queue lives in PostgreSQL: pass a postgresql:// URL, got {dsn!r}; "
            f"e.g. 'postgresql://user@db.example/nodestep'."
        )
    procrastinate = load_procrastinate()
    return procrastinate.App(connector=procrastinate.PsycopgConnector(conninfo=dsn))


OPEN_TIMEOUT = 30.0
"""Seconds to wait for the queue's database at open (as procrastinate's pool does), so a
worker started with its database rides out the server's own start."""


async def open_app(app: Any, dsn: str) -> None:
    """Open ``app``'s connections to the queue's database at ``dsn``.

    Raises:
        GraphConfigError: no connection within ``OPEN_TIMEOUT`` seconds; it says why (a
            database that does not exist, a refused password, no server at the address).
    """
    import psycopg
    import psycopg_pool

    try:
        with anyio.fail_after(OPEN_TIMEOUT):
            await app.open_async()
    except (TimeoutError, psycopg_pool.PoolTimeout) as timeout:
        await app.close_async()  # the pool would go on trying in the background
        # The pool logs each failed try and then only says it timed out: one direct
        # connection gets the server's own reason for the message.
        reason: BaseException = timeout
        try:
            conn = await psycopg.AsyncConnection.connect(dsn, connect_timeout=5)
        except psycopg.Error as error:
            reason = error
        else:
            await conn.close()
        # The server's reason names the host and the database; the URL is not shown, as
        # it may hold a password.
        raise GraphConfigError(
            f"Cannot connect to the run queue's database within {OPEN_TIMEOUT:g} s: "
            f"{str(reason).strip()}. Check the URL (host, port, "
            f"database, user, password) and that the server runs; a new database needs "
            f"the queue's tables: python -m nodestep.workers schema URL."
        ) from reason


async def has_schema(app: Any) -> bool:
    """Tell whether ``app``'s database holds the queue's tables."""
    row = await app.connector.execute_query_one_async(
        "SELECT to_regclass('procrastinate_jobs') IS NOT NULL AS present"
    )
    return bool(row["present"])


async def ensure_schema(app: Any) -> bool:
    """Create the queue's tables in ``app``'s database unless they exist; ``True`` if made."""
    if await has_schema(app):
        return False
    await app.schema_manager.apply_schema_async()
    return True


NO_TABLES = (
    "the queue's tables are not in its database; create them once with "
    "python -m nodestep.workers schema URL (or await queue.create_schema())"
)


def queue_failure(error: Exception, doing: str, request_key: str | None) -> Exception:
    """Return the error to raise for procrastinate's ``error`` while ``doing`` something.

    procrastinate says only "Database error."; the reason is in its ``__cause__``.
    """
    import psycopg

    cause = error.__cause__
    if isinstance(cause, psycopg.errors.UndefinedTable | psycopg.errors.UndefinedObject):
        return GraphConfigError(f"{doing}: {NO_TABLES}.")
    if isinstance(cause, psycopg.OperationalError):
        again = f" with request_key={request_key!r}" if request_key else ""
        return GraphExecutionError(
            f"{doing}: the queue's database did not answer ({str(cause).strip()}). Try again "
            f"once it is back{again}: if the first try was queued after all, the run still "
            f"counts once."
        )
    return error
