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
