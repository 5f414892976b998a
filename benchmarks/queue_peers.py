"""Empty jobs through procrastinate (PostgreSQL) and through Celery (Redis): the queue's cost.

    NODESTEP_BENCH_POSTGRES_DSN=postgresql://... python benchmarks/queue_peers.py

For each queue, one worker process with one job at a time: the median round trip of one
job (queued, picked up, run, result seen by the caller) over ``--trips`` jobs one after
the other, and the throughput of ``--jobs`` jobs queued at once. Celery runs when
``celery`` is installed and ``redis-server`` is on PATH (a server of its own on a free
port); its worker acknowledges late, as at-least-once delivery needs.
"""

from __future__ import annotations

import argparse
import asyncio
import os
import shutil
import socket
import statistics
import subprocess
import sys
import tempfile
import time
import uuid
from pathlib import Path

HERE = Path(__file__).resolve().parent
sys.path.insert(0, str(HERE))


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


async def _procrastinate(dsn: str, trips: int, jobs: int) -> tuple[float, float]:
    os.environ["NODESTEP_PEER_DSN"] = dsn
    import _peer_tasks

    app = _peer_tasks.app
    env = dict(os.environ, NODESTEP_PEER_DSN=dsn, PYTHONPATH=str(HERE))
    async with app.open_async():
        await app.schema_manager.apply_schema_async()
        worker = subprocess.Popen(
            [
                sys.executable,
                "-m",
                "procrastinate",
                "--app=_peer_tasks.app",
                "worker",
                "--concurrency=1",
            ],
            env=env,
            stdout=subprocess.DEVNULL,
            stderr=subprocess.DEVNULL,
        )
        try:
            await asyncio.sleep(1.5)
            times = []
            for _ in range(trips):
                start = time.perf_counter()
                job_id = await _peer_tasks.noop.defer_async()
                while True:
                    (job,) = await app.job_manager.list_jobs_async(id=job_id)
                    if job.status == "succeeded":
                        break
                    await asyncio.sleep(0.001)
                times.append(time.perf_counter() - start)
            start = time.perf_counter()
            await _peer_tasks.noop.batch_defer_async(*[{} for _ in range(jobs)])
            while True:
                done = await app.job_manager.list_jobs_async(status="succeeded")
                if len(list(done)) >= trips + jobs:
                    break
                await asyncio.sleep(0.01)
            rate = jobs / (time.perf_counter() - start)
        finally:
            worker.terminate()
            worker.wait()
    return statistics.median(times), rate


def _celery(trips: int, jobs: int) -> tuple[float, float] | None:
    if shutil.which("redis-server") is None:
        return None
    try:
        import celery  # noqa: F401
    except ImportError:
        return None
    port = _free_port()
    tmp = tempfile.mkdtemp()
    redis = subprocess.Popen(
        ["redis-server", "--port", str(port), "--save", "", "--dir", tmp],
        stdout=subprocess.DEVNULL,
    )
    url = f"redis://127.0.0.1:{port}/0"
    env = dict(os.environ, NODESTEP_PEER_REDIS=url, PYTHONPATH=str(HERE))
    os.environ["NODESTEP_PEER_REDIS"] = url
    worker = subprocess.Popen(
        [
            sys.executable,
            "-m",
            "celery",
            "-A",
            "_peer_tasks:celery_app",
            "worker",
            "--pool=solo",
            "--concurrency=1",
            "--loglevel=WARNING",
        ],
        env=env,
        stdout=subprocess.DEVNULL,
        stderr=subprocess.DEVNULL,
    )
    try:
        import _peer_tasks

        app = _peer_tasks.make_celery(url)
        task = app.signature("peer.noop")
        time.sleep(3)
        task.apply_async().get(timeout=30)  # warm
        times = []
        for _ in range(trips):
            start = time.perf_counter()
            task.apply_async().get(timeout=30)
            times.append(time.perf_counter() - start)
        start = time.perf_counter()
        results = [task.apply_async() for _ in range(jobs)]
        for r in results:
            r.get(timeout=120)
        rate = jobs / (time.perf_counter() - start)
    finally:
        worker.terminate()
        worker.wait()
        redis.terminate()
        redis.wait()
        shutil.rmtree(tmp, ignore_errors=True)
    return statistics.median(times), rate


async def _admin(dsn: str, sql: str) -> None:
    import psycopg

    async with await psycopg.AsyncConnection.connect(dsn, autocommit=True) as conn:
        await conn.execute(sql)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--trips", type=int, default=100)
    parser.add_argument("--jobs", type=int, default=1000)
    args = parser.parse_args()
    server = os.environ.get("NODESTEP_BENCH_POSTGRES_DSN")
    if not server:
        sys.exit("set NODESTEP_BENCH_POSTGRES_DSN=postgresql://...")
    from psycopg.conninfo import conninfo_to_dict

    name = f"nodestep_peers_{uuid.uuid4().hex[:8]}"
    asyncio.run(_admin(server, f'CREATE DATABASE "{name}"'))
    p = conninfo_to_dict(server)
    user, host, port = p.get("user", "postgres"), p.get("host", "127.0.0.1"), p.get("port", "5432")
    dsn = f"postgresql://{user}@{host}:{port}/{name}"
    try:
        rows = [
            ("procrastinate (PostgreSQL)", asyncio.run(_procrastinate(dsn, args.trips, args.jobs)))
        ]
    finally:
        asyncio.run(_admin(server, f'DROP DATABASE "{name}" WITH (FORCE)'))
    celery = _celery(args.trips, args.jobs)
    if celery is not None:
        rows.append(("Celery (Redis broker and results)", celery))
    print(f"one worker process, one job at a time; {os.cpu_count()} cores")
    print(f"| queue | round trip of one job (median) | jobs/s, {args.jobs:,} queued at once |")
    print("|---|---|---|")
    for label, (trip, rate) in rows:
        print(f"| {label} | {trip * 1000:.1f} ms | {rate:.0f} |")


if __name__ == "__main__":
    main()
