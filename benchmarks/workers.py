"""Queued runs per second with 1, 2 and 4 worker processes, and the queue's own cost.

    NODESTEP_BENCH_POSTGRES_DSN=postgresql://... python benchmarks/workers.py [--runs 400]

Makes a database of its own on that server, queues ``--runs`` runs over ``--threads``
threads of a two-superstep graph, and times from the first ``submit`` to the last result,
for each worker count. ``--noop`` times bare procrastinate jobs (no graph, no store), and
Celery with a Redis broker when ``celery`` is installed and ``redis-server`` is on PATH:
the comparison ``docs/workers.md`` reports.
"""

from __future__ import annotations

import argparse
import asyncio
import os
import shutil
import subprocess
import sys
import tempfile
import time
import uuid
from pathlib import Path

HERE = Path(__file__).resolve().parent
SRC = HERE.parent / "src"
sys.path[:0] = [str(SRC), str(HERE)]


async def _admin(dsn: str, sql: str) -> None:
    import psycopg

    async with await psycopg.AsyncConnection.connect(dsn, autocommit=True) as conn:
        await conn.execute(sql)


def _database(server: str) -> tuple[str, str]:
    from psycopg.conninfo import conninfo_to_dict

    name = f"nodestep_bench_{uuid.uuid4().hex[:8]}"
    asyncio.run(_admin(server, f'CREATE DATABASE "{name}"'))
    p = conninfo_to_dict(server)
    host, port, user = p.get("host", "127.0.0.1"), p.get("port", "5432"), p.get("user", "postgres")
    dsn = f"postgresql://{user}@{host}:{port}/{name}"
    from nodestep.workers._queue_app import ensure_schema, make_app

    async def schema() -> None:
        app = make_app(dsn)
        async with app.open_async():
            await ensure_schema(app)

    asyncio.run(schema())
    return name, dsn


def _workers(n: int, dsn: str, queue: str, env: dict[str, str]) -> list[subprocess.Popen[bytes]]:
    cmd = [sys.executable, "-m", "nodestep.workers", "worker", dsn, "--queue", queue]
    cmd += ["--graph", "queued_graph:tally"]
    return [subprocess.Popen(cmd, env=env) for _ in range(n)]


async def _queue_runs(dsn: str, queue: str, runs: int, threads: int) -> float:
    from nodestep.workers import RunQueue

    async with RunQueue(dsn, queue=queue) as q:
        started = time.perf_counter()
        tickets = [
            await q.submit("queued_graph:tally", f"t{i % threads}", {"items": [f"r{i}"]})
            for i in range(runs)
        ]
        for ticket in tickets:
            outcome = await ticket.result(timeout=600, poll=0.01)
            assert outcome.status == "completed", outcome
        return time.perf_counter() - started


def graph_runs(dsn: str, runs: int, threads: int, counts: list[int]) -> list[tuple[int, float]]:
    """Return (workers, runs per second) for each worker count."""
    out = []
    for n in counts:
        tmp = Path(tempfile.mkdtemp())
        env = dict(os.environ, NODESTEP_BENCH_STORE=str(tmp / "history.jsonl"))
        env["PYTHONPATH"] = os.pathsep.join([str(SRC), str(HERE)])
        os.environ["NODESTEP_BENCH_STORE"] = env["NODESTEP_BENCH_STORE"]
        sys.modules.pop("queued_graph", None)
        queue = f"bench{uuid.uuid4().hex[:6]}"
        procs = _workers(n, dsn, queue, env)
        try:
            time.sleep(1.0)  # let the workers connect
            seconds = asyncio.run(_queue_runs(dsn, queue, runs, threads))
        finally:
            for p in procs:
                p.terminate()
            for p in procs:
                p.wait()
            shutil.rmtree(tmp, ignore_errors=True)
        out.append((n, runs / seconds))
    return out


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--runs", type=int, default=400)
    parser.add_argument("--threads", type=int, default=40)
    parser.add_argument("--workers", default="1,2,4")
    args = parser.parse_args()
    server = os.environ.get("NODESTEP_BENCH_POSTGRES_DSN")
    if not server:
        sys.exit(
            "set NODESTEP_BENCH_POSTGRES_DSN=postgresql://... (a server to make a database on)"
        )
    name, dsn = _database(server)
    try:
        counts = [int(c) for c in args.workers.split(",")]
        results = graph_runs(dsn, args.runs, args.threads, counts)
    finally:
        asyncio.run(_admin(server, f'DROP DATABASE "{name}" WITH (FORCE)'))
    cores = os.cpu_count() or 1
    print(f"{args.runs} queued runs over {args.threads} threads, {cores} cores")
    print("| workers | runs/s | runs/s per worker |")
    print("|---|---|---|")
    for n, rate in results:
        print(f"| {n} | {rate:.0f} | {rate / n:.0f} |")


if __name__ == "__main__":
    main()
