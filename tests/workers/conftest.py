"""A PostgreSQL database of the test's own for the run queue, and worker processes.

The queue needs a real PostgreSQL server: ``NODESTEP_TEST_POSTGRES_DSN`` names one (``.ci/run``
starts it). Without it these tests skip, saying so; with ``NODESTEP_REQUIRE_POSTGRES=1``
(set by ``.ci/run``) a missing server fails them instead.
"""

from __future__ import annotations

import asyncio
import os
import sys
import uuid
from collections.abc import Generator, Iterator
from pathlib import Path

import pytest
from workers_helpers import HERE, SRC, Workers


@pytest.fixture
def anyio_backend() -> str:
    """The queue runs on asyncio only (procrastinate and psycopg's async pool)."""
    return "asyncio"


def _server_dsn() -> str:
    dsn = os.environ.get("NODESTEP_TEST_POSTGRES_DSN")
    if dsn:
        return dsn
    reason = (
        "no PostgreSQL server: set NODESTEP_TEST_POSTGRES_DSN=postgresql://... "
        "(bash .ci/run starts one) to run the worker tests"
    )
    if os.environ.get("NODESTEP_REQUIRE_POSTGRES") == "1":
        pytest.fail(reason)
    pytest.skip(reason)


async def _admin(dsn: str, sql: str) -> None:
    import psycopg

    async with await psycopg.AsyncConnection.connect(dsn, autocommit=True) as conn:
        await conn.execute(sql)


@pytest.fixture(scope="session")
def queue_dsn() -> Iterator[str]:
    """A new database with the queue's tables; dropped at the end of the session."""
    pytest.importorskip("procrastinate")
    from psycopg.conninfo import conninfo_to_dict

    server = _server_dsn()
    name = f"nodestep_queue_{os.getpid()}_{uuid.uuid4().hex[:6]}"
    asyncio.run(_admin(server, f'CREATE DATABASE "{name}"'))
    params = conninfo_to_dict(server)
    host, port = params.get("host", "127.0.0.1"), params.get("port", "5432")
    user = params.get("user", "postgres")
    if str(host).startswith("/"):  # a socket directory
        dsn = f"postgresql:///{name}?host={host}&port={port}&user={user}"
    else:
        dsn = f"postgresql://{user}@{host}:{port}/{name}"
    from nodestep.workers._queue_app import make_app

    async def schema() -> None:
        app = make_app(dsn)
        async with app.open_async():
            await app.schema_manager.apply_schema_async()

    asyncio.run(schema())
    yield dsn
    asyncio.run(_admin(server, f'DROP DATABASE "{name}" WITH (FORCE)'))


def _history(request: pytest.FixtureRequest, queue_dsn: str, tmp_path: Path) -> dict[str, str]:
    """The graphs' store for one test: a schema of its own in the queue's database (made
    now, before several workers would race to make it), or a history file for a test
    parametrized with ``workers="file"``."""
    if getattr(request, "param", "postgres") == "file":
        return {"NODESTEP_TEST_STORE": f"file://{tmp_path / 'history.jsonl'}"}
    from nodestep import PostgresStateStore

    schema = f"h_{uuid.uuid4().hex[:12]}"
    PostgresStateStore(queue_dsn, schema=schema).create_tables()
    return {"NODESTEP_TEST_STORE": queue_dsn, "NODESTEP_TEST_SCHEMA": schema}


def _drop_history(queue_dsn: str, env: dict[str, str]) -> None:
    graphs = sys.modules.pop("queued_graphs", None)
    if graphs is not None:  # the test's own pool, before its schema goes
        asyncio.run(graphs.STORE.aclose())
    if "NODESTEP_TEST_SCHEMA" in env:
        asyncio.run(_admin(queue_dsn, f'DROP SCHEMA "{env["NODESTEP_TEST_SCHEMA"]}" CASCADE'))


@pytest.fixture
def workers(
    request: pytest.FixtureRequest,
    queue_dsn: str,
    tmp_path: Path,
    monkeypatch: pytest.MonkeyPatch,
) -> Iterator[Workers]:
    """Start worker processes on a queue of this test's own, over a history of its own."""
    env = dict(os.environ)
    env.pop("NODESTEP_TEST_SCHEMA", None)
    env.update(_history(request, queue_dsn, tmp_path))
    env["NODESTEP_TEST_MARKS"] = str(tmp_path)
    env["PYTHONPATH"] = os.pathsep.join([str(SRC), str(HERE), env.get("PYTHONPATH", "")])
    for key in ("NODESTEP_TEST_STORE", "NODESTEP_TEST_SCHEMA", "NODESTEP_TEST_MARKS"):
        if key in env:
            monkeypatch.setenv(key, env[key])
    monkeypatch.syspath_prepend(str(HERE))
    sys.modules.pop("queued_graphs", None)  # imported afresh, with this test's store
    pool = Workers(queue_dsn, f"q{uuid.uuid4().hex[:8]}", env, tmp_path / "workers.log")
    yield pool
    pool.stop()
    pool.end_jobs()
    _drop_history(queue_dsn, env)


@pytest.hookimpl(wrapper=True)
def pytest_runtest_makereport(
    item: pytest.Item,
) -> Generator[None, pytest.TestReport, pytest.TestReport]:
    """Add to a failed worker test's report how its workers ended, its unfinished jobs and
    the workers' log: a run that did not end says nothing of why on its own."""
    report = yield
    if report.when == "call" and report.failed:
        for value in getattr(item, "funcargs", {}).values():
            if isinstance(value, Workers):
                report.sections.append(("worker processes", value.describe()))
    return report
