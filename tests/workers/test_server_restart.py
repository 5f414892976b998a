"""Queued runs survive restarts of the PostgreSQL server that holds the queue and the history.

The test starts a throwaway server of its own (``scripts/pg_test_server.sh``), never the
shared one, and crashes it twice (an immediate stop, then a restart with crash recovery)
while four worker processes run 200 queued runs over 20 threads. Every pooled connection
dies with the server: the stores replace dead ones, retry a call once where it is safe, and
the workers retry a job that failed on a store error. Nothing may be lost, run twice or
reordered.
"""

from __future__ import annotations

import asyncio
import os
import sys
import time
import uuid
from collections import Counter
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import anyio
import pytest
from test_queue import GRAPH, _steps_once
from workers_helpers import HERE, SRC, Workers

import postgres_server
from nodestep.workers import RunQueue

pytestmark = pytest.mark.anyio

RUNS, THREADS, WORKERS = 200, 20, 4


@pytest.fixture
def own_server() -> Iterator[tuple[str, Path]]:
    """A PostgreSQL server of this test only, with the queue's tables; stopped after."""
    pytest.importorskip("procrastinate")
    with postgres_server.own_server("nodestep-restart") as (dsn, directory):
        from nodestep.workers._queue_app import make_app

        async def schema() -> None:
            app = make_app(dsn)
            async with app.open_async():
                await app.schema_manager.apply_schema_async()

        asyncio.run(schema())
        yield dsn, directory


@pytest.fixture
def restart_workers(
    own_server: tuple[str, Path], tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> Iterator[Workers]:
    from nodestep import PostgresStateStore

    dsn, _ = own_server
    schema = f"h_{uuid.uuid4().hex[:12]}"
    PostgresStateStore(dsn, schema=schema).create_tables()
    env = dict(os.environ)
    env.update(
        NODESTEP_TEST_STORE=dsn,
        NODESTEP_TEST_SCHEMA=schema,
        NODESTEP_TEST_MARKS=str(tmp_path),
        PYTHONPATH=os.pathsep.join([str(SRC), str(HERE), env.get("PYTHONPATH", "")]),
    )
    for key in ("NODESTEP_TEST_STORE", "NODESTEP_TEST_SCHEMA", "NODESTEP_TEST_MARKS"):
        monkeypatch.setenv(key, env[key])
    monkeypatch.syspath_prepend(str(HERE))
    sys.modules.pop("queued_graphs", None)  # imported afresh, with this test's store
    pool = Workers(dsn, f"q{uuid.uuid4().hex[:8]}", env, tmp_path / "workers.log")
    yield pool
    pool.stop()
    graphs = sys.modules.pop("queued_graphs", None)
    if graphs is not None:
        asyncio.run(graphs.STORE.aclose())


async def _completed(graph: Any) -> int:
    """How many runs have completed so far, over every thread (read while the server runs)."""
    total = 0
    for t in range(THREADS):
        records = await graph.state_store.read(f"t{t}", "main")
        total += sum(r["type"] == "run_completed" for r in records)
    return total


async def _crash_when(graph: Any, done: int, directory: Path) -> None:
    """Once ``done`` runs have completed, crash the server and start it again."""
    deadline = time.monotonic() + 120
    while await _completed(graph) < done:
        assert time.monotonic() < deadline, f"{done} runs did not complete within 120 s"
        await anyio.sleep(0.05)  # polls the store: the workers say nothing when a run ends
    await anyio.to_thread.run_sync(postgres_server.server_command, "crash", directory)
    await anyio.to_thread.run_sync(postgres_server.server_command, "restart", directory)


@pytest.mark.slow
async def test_server_crashes_under_four_workers_lose_no_run_and_duplicate_or_reorder_none(
    own_server: tuple[str, Path], restart_workers: Workers, tmp_path: Path
) -> None:
    dsn, directory = own_server
    import queued_graphs

    graph = queued_graphs.ledger
    restart_workers.start(WORKERS)
    async with RunQueue(dsn, queue=restart_workers.queue) as queue:
        tickets = []
        for i in range(RUNS):
            tickets.append(await queue.submit(GRAPH, f"t{i % THREADS}", {"items": [f"r{i}"]}))
        await _crash_when(graph, RUNS // 4, directory)
        await _crash_when(graph, RUNS * 3 // 5, directory)
        outcomes = [await t.result(timeout=180) for t in tickets]
    assert {o.status for o in outcomes} == {"completed"}
    per_thread = RUNS // THREADS
    for t in range(THREADS):
        expected = [f"r{i}" for i in range(t, RUNS, THREADS)]
        state = (await graph.get_state(f"t{t}")).value
        assert state.items == expected  # each run once, in the order it was queued
        assert state.count == per_thread
        assert await _steps_once(graph, f"t{t}", per_thread) == expected
    audited = Counter((tmp_path / "audit.log").read_text().split())
    # a task may run again only if the crash came between its end and its record
    assert len(audited) == RUNS
