"""The procrastinate app both sides of the queue use: one task, ``nodestep.run``.

procrastinate keeps its jobs in PostgreSQL, the database the runs' ``PostgresStateStore``
already needs, so distributing runs adds no server (``docs/workers.md`` has the comparison
with Celery that chose it). It is an optional extra, imported here and nowhere else.
"""

from __future__ import annotations

from typing import Any

from nodestep import GraphConfigError

__all__ = ["TASK_NAME", "ensure_schema", "load_procrastinate", "make_app"]

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


async def ensure_schema(app: Any) -> bool:
    """Create the queue's tables in ``app``'s database unless they exist; ``True`` if made."""
    row = await app.connector.execute_query_one_async(
        "SELECT to_regclass('procrastinate_jobs') IS NOT NULL AS present"
    )
    if row["present"]:
        return False
    await app.schema_manager.apply_schema_async()
    return True
