"""Sub-agents survive a kill -9 of the parent process: the finished one is read back.

Each step is a new Python process on one SQLite file. The first is killed (SIGKILL)
while the ``slow`` sub-agent is inside its second node and the ``quick`` one has
completed; the second runs ``invoke(None)`` on the same thread: ``quick`` does not run
again, ``slow`` continues at the node it was in, not at its first.
"""

from __future__ import annotations

import asyncio
import os
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest

from nodestep import SQLiteStateStore

pytestmark = pytest.mark.slow

HERE = Path(__file__).resolve().parent
SRC = HERE.parents[1] / "src"

SCRIPT = """
import sys
from nodestep import SQLiteStateStore
from crash_flows import report

graph = report(SQLiteStateStore(sys.argv[1]))
first = sys.argv[2] == "start"
result = graph.invoke({} if first else None, thread_id="r-1", wait_for_thread=30)
print(result.status, result.state.parts)
"""


def _run(path: Path, action: str, env: dict[str, str]) -> subprocess.Popen[str]:
    return subprocess.Popen(
        [sys.executable, "-c", SCRIPT, str(path), action],
        env=env,
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
    )


def _completed(path: Path, thread_id: str) -> bool:
    async def last_type() -> str | None:
        store = SQLiteStateStore(str(path))
        try:
            records = await store.read_tail(thread_id, "main")
            return str(records[-1]["type"]) if records else None
        finally:
            await store.aclose()

    return asyncio.run(last_type()) == "run_completed"


def test_a_killed_parent_continues_its_unfinished_sub_agent_and_reads_back_the_done_one(
    tmp_path: Path,
) -> None:
    db, ledger = tmp_path / "report.db", tmp_path / "ledger.txt"
    env = {
        **os.environ,
        "PYTHONPATH": os.pathsep.join([str(SRC), str(HERE)]),
        "LEDGER": str(ledger),
    }
    first = _run(db, "start", {**env, "HOLD": "1"})
    assert first.stdout is not None
    assert first.stdout.readline() == "slow is holding\n", first.communicate()[1]
    deadline = time.monotonic() + 30
    while not _completed(db, "r-1:dispatch@1.0/quick#0"):
        assert time.monotonic() < deadline, "the quick sub-agent never completed"
        time.sleep(0.02)
    os.kill(first.pid, signal.SIGKILL)
    first.communicate(timeout=30)
    assert first.returncode == -signal.SIGKILL

    second = _run(db, "continue", env)
    out, err = second.communicate(timeout=60)
    assert second.returncode == 0, err
    assert out.strip() == "completed ['quick', 'prepare/finish']"
    # quick ran once; slow's first node once; its second node again after the kill.
    assert sorted(ledger.read_text().splitlines()) == [
        "finish b",
        "finish b",
        "prepare b",
        "quick a",
    ]
