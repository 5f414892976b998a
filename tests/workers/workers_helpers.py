"""What the worker tests share besides fixtures: where they are, and ``Workers``.

A module of its own rather than ``conftest``: the test folders' conftest files are all
imported as ``conftest``, so ``from conftest import ...`` would find another folder's
when several folders run together.
"""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

HERE = Path(__file__).resolve().parent
SRC = HERE.parents[1] / "src"


class Workers:
    """Worker processes of one test, all on one queue, stopped at the end."""

    def __init__(self, dsn: str, queue: str, env: dict[str, str], log: Path) -> None:
        self.dsn, self.queue, self.env, self.log = dsn, queue, env, log
        self.procs: list[subprocess.Popen[bytes]] = []

    def start(self, n: int = 1) -> list[subprocess.Popen[bytes]]:
        started = []
        for _ in range(n):
            cmd = [sys.executable, "-m", "nodestep.workers", "worker", self.dsn]
            cmd += ["--queue", self.queue, "--heartbeat", "0.3", "--stalled-after", "1.5"]
            cmd += ["--wait-for-thread", "20", "--graph", "queued_graphs:ledger"]
            with self.log.open("ab") as log:  # the worker's log, for a failing test to show
                proc = subprocess.Popen(cmd, env=self.env, stdout=log, stderr=log)
            self.procs.append(proc)
            started.append(proc)
        return started

    def start_stalling(self) -> subprocess.Popen[bytes]:
        """Start a worker that stalls after each run, before its job's end is recorded."""
        cmd = [sys.executable, str(HERE / "stalling_worker.py"), self.dsn, self.queue]
        with self.log.open("ab") as log:
            proc = subprocess.Popen(cmd, env=self.env, stdout=log, stderr=log)
        self.procs.append(proc)
        return proc

    def stop(self) -> None:
        for proc in self.procs:
            if proc.poll() is None:
                proc.terminate()
        for proc in self.procs:
            try:
                proc.wait(10)
            except subprocess.TimeoutExpired:  # pragma: no cover - a stuck worker
                proc.kill()
                proc.wait()

    def end_jobs(self) -> None:
        """End this queue's jobs still waiting (``cancelled``) or running (``aborted``).

        Why: procrastinate's ``lock``, which runs a thread's jobs one at a time and in order,
        spans every queue of the database, and the tests of a session share one database
        (``queue_dsn``). A job left waiting by a test (one that never starts a worker, or
        whose worker never took it) or running in a worker it stopped would hold back for
        ever every later job on a thread of the same name, whatever its queue: one test's
        hang failed the next test on thread 's' too (its job 204 waited behind job 203).
        Ended, a job holds back nothing.
        """
        import psycopg

        with psycopg.connect(self.dsn, autocommit=True) as conn:
            conn.execute(
                "UPDATE procrastinate_jobs SET status = CASE status WHEN 'todo' "
                "THEN 'cancelled'::procrastinate_job_status ELSE 'aborted' END "
                "WHERE queue_name = %s AND status IN ('todo', 'doing')",
                (self.queue,),
            )

    def describe(self) -> str:
        """Say how the workers ended, which jobs were unfinished, and the workers' log.

        For a failed test's report: a run that did not end may wait for a worker that
        exited, or for a job of another queue holding its thread's ``lock``.
        """
        import psycopg

        lines = [f"queue {self.queue!r}"]
        for proc in self.procs:
            code = proc.poll()
            lines.append(f"worker {proc.pid}: {'running' if code is None else f'exit {code}'}")
        try:
            with psycopg.connect(self.dsn, autocommit=True, connect_timeout=10) as conn:
                rows = conn.execute(
                    "SELECT id, queue_name, status, lock FROM procrastinate_jobs WHERE status "
                    "IN ('todo', 'doing') AND (queue_name = %(q)s OR lock IN (SELECT lock FROM "
                    "procrastinate_jobs WHERE queue_name = %(q)s AND status IN ('todo', "
                    "'doing'))) ORDER BY id",
                    {"q": self.queue},
                ).fetchall()
        except psycopg.Error as error:  # a report must not fail: say why the jobs are missing
            lines.append(f"the queue's jobs could not be read: {error}")
        else:
            lines += [f"unfinished job {i} (queue {q!r}, {s}, lock {k!r})" for i, q, s, k in rows]
        log = self.log.read_text(errors="replace").splitlines() if self.log.exists() else []
        return "\n".join([*lines, "workers.log (its last 100 lines):", *log[-100:]])
