"""Queued runs per second with 1, 2 and 4 worker processes sharing one PostgreSQL server.

    NODESTEP_BENCH_POSTGRES_DSN=postgresql://... python benchmarks/workers.py [--runs 400]

Makes a database of its own on that server: the queue's tables, and for each worker count
a schema of its own for the runs' ``PostgresStateStore``. Queues ``--runs`` runs of a
two-superstep graph and times from the first ``submit`` to the last result, in two modes:
``threads`` (every run on a thread of its own) and ``runs`` (``--threads`` threads, many
runs each, one at a time per thread). ``benchmarks/queue_peers.py`` times the queue alone,
against Celery on Redis.
"""

from __future__ import annotations

import argparse
import asyncio
import os
import subprocess
import sys
import time
import uuid
from dataclasses import dataclass
from pathlib import Path

HERE = Path(__file__).resolve().parent
GRAPH = ["queued_graph:tally"]  # --graph
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


def _workers(
    n: int, dsn: str, queue: str, env: dict[str, str], concurrency: int
) -> list[subprocess.Popen[bytes]]:
    cmd = [*os.environ.get("BENCH_WRAP", "").split(), sys.executable, "-m", "nodestep.workers"]
    cmd += ["worker", dsn, "--queue", queue]
    cmd += ["--graph", GRAPH[0], "--concurrency", str(concurrency)]
    return [subprocess.Popen(cmd, env=env) for _ in range(n)]


def _busy() -> tuple[float, float]:
    """Return the machine's busy and total CPU seconds so far, from /proc/stat (Linux)."""
    try:
        fields = [float(f) for f in Path("/proc/stat").read_text().split("\n")[0].split()[1:]]
    except OSError:  # not Linux: the busy column reads 0
        return 0.0, 1.0
    idle = fields[3] + fields[4]  # idle and iowait
    tick = os.sysconf("SC_CLK_TCK")
    return (sum(fields) - idle) / tick, sum(fields) / tick


def _cpu_of(pids: list[int]) -> float:
    """Return the CPU seconds the processes ``pids`` used so far (Linux /proc; else 0)."""
    total = 0.0
    for pid in pids:
        try:
            stat = Path(f"/proc/{pid}/stat").read_text()
        except OSError:  # gone, or not Linux
            continue
        fields = stat.rsplit(")", 1)[1].split()
        total += (int(fields[11]) + int(fields[12])) / os.sysconf("SC_CLK_TCK")
    return total


async def _backends(dsn: str) -> list[int]:
    """Return the pids of the PostgreSQL backends serving the benchmark's database."""
    import psycopg

    async with await psycopg.AsyncConnection.connect(dsn, autocommit=True) as conn:
        cur = await conn.execute(
            "SELECT pid FROM pg_stat_activity WHERE datname = current_database()"
            " AND pid <> pg_backend_pid()"
        )
        return [int(row[0]) for row in await cur.fetchall()]


@dataclass(frozen=True)
class Figures:
    """What one worker count measured, over the timed runs only.

    Attributes:
        rate: Runs per second, first submit to last result.
        workers: The worker processes' CPU seconds per run.
        postgres: CPU seconds per run of the database's backends (workers' and caller's).
        caller: The caller's CPU seconds per run (submits and result polls).
        busy: The share of the machine's cores busy meanwhile (anything running).
    """

    rate: float
    workers: float
    postgres: float
    caller: float
    busy: float


async def _all_ended(dsn: str, queue: str, runs: int) -> None:
    """Wait until ``runs`` jobs of ``queue`` ended, asking the queue's table every 10 ms."""
    import psycopg

    async with await psycopg.AsyncConnection.connect(dsn, autocommit=True) as conn:
        while True:
            cur = await conn.execute(
                "SELECT count(*) FROM procrastinate_jobs WHERE queue_name = %s AND status IN "
                "('succeeded', 'failed') AND args->>'thread_id' NOT LIKE 'w%%'",
                (queue,),
            )
            row = await cur.fetchone()
            if row is not None and row[0] >= runs:
                return
            await asyncio.sleep(0.01)


async def _queue_runs(
    dsn: str,
    queue: str,
    runs: int,
    threads: int,
    workers: list[int],
    warm: int,
    backlog: bool = False,
) -> Figures:
    from nodestep.workers import RunQueue

    async with RunQueue(dsn, queue=queue) as q:
        # one run per worker first: imports, pools and the store's first reads are not timed
        for ticket in [await q.submit(GRAPH[0], f"w{i}", {"items": ["w"]}) for i in range(warm)]:
            await ticket.result(timeout=120, poll=0.01)
        backends = await _backends(dsn)
        begin = (time.perf_counter(), time.process_time(), _cpu_of(workers), _cpu_of(backends))
        busy = _busy()
        tickets = [
            await q.submit(GRAPH[0], f"t{i % threads}", {"items": [f"r{i}"]}) for i in range(runs)
        ]
        if backlog:  # the caller only queues them: results are checked after the timing
            await _all_ended(dsn, queue, runs)
        else:
            for ticket in tickets:
                outcome = await ticket.result(timeout=600)
                assert outcome.status == "completed", outcome
        end = (time.perf_counter(), time.process_time(), _cpu_of(workers), _cpu_of(backends))
        (busy_end, total_end), (busy_start, total_start) = _busy(), busy
        for ticket in tickets:
            outcome = await ticket.result(timeout=600)
            assert outcome.status == "completed", outcome
    machine = (busy_end - busy_start) / max(total_end - total_start, 1e-9)
    seconds, caller, work, pg = (e - b for e, b in zip(end, begin, strict=True))
    return Figures(runs / seconds, work / runs, pg / runs, caller / runs, machine)


def graph_runs(
    dsn: str, runs: int, threads: int, n: int, concurrency: int, backlog: bool = False
) -> Figures:
    """Time ``runs`` runs on ``n`` worker processes, over a store of their own."""
    from nodestep import PostgresStateStore

    schema = f"h_{uuid.uuid4().hex[:10]}"
    PostgresStateStore(dsn, schema=schema).create_tables()
    env = dict(os.environ, NODESTEP_BENCH_STORE=dsn, NODESTEP_BENCH_SCHEMA=schema)
    env["PYTHONPATH"] = os.pathsep.join([str(SRC), str(HERE)])
    os.environ.update(NODESTEP_BENCH_STORE=dsn, NODESTEP_BENCH_SCHEMA=schema)
    sys.modules.pop("queued_graph", None)
    queue = f"bench{uuid.uuid4().hex[:6]}"
    procs = _workers(n, dsn, queue, env, concurrency)
    try:
        pids = [p.pid for p in procs]
        warm = n * concurrency
        return asyncio.run(_queue_runs(dsn, queue, runs, threads, pids, warm, backlog))
    finally:
        for p in procs:
            p.terminate()
        for p in procs:
            p.wait()


HEADER = (
    "| mode | workers | runs/s | per worker | per core "
    "| CPU ms/run: workers, PostgreSQL, caller | runs per CPU-second | busy |"
)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--runs", type=int, default=400)
    parser.add_argument("--threads", type=int, default=8, help="threads of the runs mode")
    parser.add_argument("--workers", default="1,2,4")
    parser.add_argument("--concurrency", type=int, default=1, help="jobs per worker at once")
    parser.add_argument("--modes", default="backlog,threads,runs")
    parser.add_argument(
        "--graph",
        default="tally",
        choices=["tally", "work"],
        help="tally: two supersteps that do nothing; work: its first node hashes for ~10 ms",
    )
    args = parser.parse_args()
    GRAPH[0] = f"queued_graph:{args.graph}"
    server = os.environ.get("NODESTEP_BENCH_POSTGRES_DSN")
    if not server:
        sys.exit(
            "set NODESTEP_BENCH_POSTGRES_DSN=postgresql://... (a server to make a database on)"
        )
    cores = os.cpu_count() or 1
    print(f"{args.runs} queued runs of {GRAPH[0]}, concurrency {args.concurrency}, {cores} cores")
    print(HEADER)
    print("|---" * HEADER.count("|", 1) + "|")
    name, dsn = _database(server)
    try:
        for mode in args.modes.split(","):
            threads = args.threads if mode == "runs" else args.runs
            for n in [int(c) for c in args.workers.split(",")]:
                backlog = mode == "backlog"
                f = graph_runs(dsn, args.runs, threads, n, args.concurrency, backlog)
                per = f"{args.runs // threads} runs"
                label = f"{threads} threads" + ("" if mode == "threads" else f" x {per}")
                label = f"backlog of {args.runs}, 1 run a thread" if backlog else label
                each = f"{f.rate / n:.0f} | {f.rate / min(n, cores):.0f}"
                cpu = f"{f.workers * 1000:.1f}, {f.postgres * 1000:.1f}, {f.caller * 1000:.1f}"
                capacity = 1 / (f.workers + f.postgres + f.caller)
                row = f"| {label} | {n} | {f.rate:.0f} | {each} | {cpu} | {capacity:.0f} |"
                print(f"{row} {f.busy:.0%} |", flush=True)
    finally:
        asyncio.run(_admin(server, f'DROP DATABASE "{name}" WITH (FORCE)'))


if __name__ == "__main__":
    main()
