"""What the caller and a worker hear when the queue's database cannot take a job."""

from __future__ import annotations

import asyncio
import os
import uuid
from collections.abc import Iterator
from typing import Any

import psycopg
import pytest
from psycopg.conninfo import conninfo_to_dict
from workers_helpers import Workers

from nodestep import GraphConfigError, GraphExecutionError
from nodestep.workers import RunQueue
from nodestep.workers.__main__ import main

pytestmark = pytest.mark.anyio

GRAPH = "queued_graphs:ledger"


async def _admin(dsn: str, sql: str) -> None:
    async with await psycopg.AsyncConnection.connect(dsn, autocommit=True) as conn:
        await conn.execute(sql)


@pytest.fixture
def bare_dsn(queue_dsn: str) -> Iterator[str]:
    """A new database on the test's server without the queue's tables."""
    name = conninfo_to_dict(queue_dsn)["dbname"]
    bare = f"nodestep_bare_{os.getpid()}_{uuid.uuid4().hex[:6]}"
    asyncio.run(_admin(queue_dsn, f'CREATE DATABASE "{bare}"'))
    yield queue_dsn.replace(name, bare)
    asyncio.run(_admin(queue_dsn, f'DROP DATABASE "{bare}" WITH (FORCE)'))


@pytest.mark.slow
def test_a_queue_without_its_tables_says_to_create_them(
    bare_dsn: str, workers: Workers, capsys: pytest.CaptureFixture[str]
) -> None:
    async def submit() -> None:
        async with RunQueue(bare_dsn) as queue:
            await queue.submit(GRAPH, "t", {"items": ["a"]})

    tables = r"the queue's tables are not in its database; create them once with python -m"
    with pytest.raises(GraphConfigError, match=rf"Could not queue .* thread 't': {tables}"):
        asyncio.run(submit())
    assert main(["worker", bare_dsn]) == 2
    assert (
        "error: A worker cannot serve the queue: the queue's tables are not"
        in capsys.readouterr().err
    )


class _Unanswered:
    """A deferrer whose database went away mid-statement, as a server restart does."""

    async def defer_async(self, **kwargs: Any) -> int:
        from procrastinate.exceptions import ConnectorException

        raise ConnectorException() from psycopg.OperationalError("server closed the connection")


async def test_a_queue_whose_database_went_away_says_to_submit_again_with_the_key(
    queue_dsn: str, workers: Workers, monkeypatch: pytest.MonkeyPatch
) -> None:
    async with RunQueue(queue_dsn, queue=workers.queue) as queue:
        monkeypatch.setattr(queue.app, "configure_task", lambda *a, **k: _Unanswered())
        with pytest.raises(GraphExecutionError) as caught:
            await queue.submit(GRAPH, "t", {"items": ["a"]}, request_key="order-7")
    assert str(caught.value) == (
        "Could not queue the run of thread 't': the queue's database did not answer (server "
        "closed the connection). Try again once it is back with request_key='order-7': if "
        "the first try was queued after all, the run still counts once."
    )


async def test_a_queue_used_outside_async_with_says_how_to_open_it(
    queue_dsn: str, workers: Workers
) -> None:
    queue = RunQueue(queue_dsn, queue=workers.queue)
    opened = r"RunQueue\(queue='q\w+'\) is not open: use it as 'async with RunQueue\(dsn\)"
    with pytest.raises(GraphConfigError, match=opened):
        await queue.submit(GRAPH, "t", {"items": ["a"]})
    async with queue:
        ticket = await queue.submit(GRAPH, "t", {"items": ["a"]})
    with pytest.raises(GraphConfigError, match=opened):
        await ticket.result(timeout=60)
    with pytest.raises(GraphConfigError, match=opened):
        await ticket.cancel()
