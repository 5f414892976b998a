"""Subgraphs across real processes: a kill -9 three levels down, a continuation, a resume.

One history file; each step is a new Python process running the graphs of
``nested_flows``: the first is killed (SIGKILL) inside ``slow``, the innermost graph's
second node; the second continues the run with ``invoke(None)``, which pauses at ``sign``,
three levels down; the third answers it with ``Resume``.
"""

from __future__ import annotations

import os
import signal
import subprocess
import sys
from pathlib import Path

import pytest

pytestmark = pytest.mark.slow

HERE = Path(__file__).resolve().parent
SRC = HERE.parents[1] / "src"

SCRIPT = """
import sys
from nodestep import FilesystemStateStore, Resume
from nested_flows import desk

store = FilesystemStateStore(sys.argv[1])
graph = desk(store)
action = sys.argv[2]
if action == "start":
    result = graph.invoke({{}}, thread_id="doc-1")
elif action == "continue":
    result = graph.invoke(None, thread_id="doc-1")
else:
    result = graph.invoke(None, thread_id="doc-1", resume=Resume(action))
print(result.status, sorted(result.interrupts), result.state.log, result.state.verdict)
"""


def _run(path: Path, action: str, env: dict[str, str]) -> subprocess.Popen[str]:
    return subprocess.Popen(
        [sys.executable, "-c", SCRIPT.format(), str(path), action],
        env=env,
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
    )


def _finish(process: subprocess.Popen[str]) -> str:
    out, err = process.communicate(timeout=60)
    assert process.returncode == 0, err
    return out.strip()


def test_a_kill_in_the_innermost_graph_continues_and_its_interrupt_resumes_elsewhere(
    tmp_path: Path,
) -> None:
    history = tmp_path / "desk.jsonl"
    ledger = tmp_path / "ledger.txt"
    env = {
        **os.environ,
        "PYTHONPATH": os.pathsep.join([str(SRC), str(HERE)]),
        "LEDGER": str(ledger),
    }

    first = _run(history, "start", {**env, "SLOW_HOLDS": "1"})
    assert first.stdout is not None
    # The process says when it reached slow (or its output ends: then it failed).
    assert first.stdout.readline() == "slow is running\n", first.communicate()[1]
    os.kill(first.pid, signal.SIGKILL)
    first.communicate(timeout=30)
    assert first.returncode == -signal.SIGKILL

    paused = _finish(_run(history, "continue", env))
    # Paused three levels down; review's update has not reached desk yet.
    assert paused == "interrupted ['review/legal/sign:sign'] ['intake']"

    done = _finish(_run(history, "approved", env))
    assert done == (
        "completed [] ['intake', 'prep', 'draft', 'slow', 'signed approved', 'close'] approved"
    )
    # Finished tasks at every level ran once; only the killed one ran again.
    assert ledger.read_text().split("\n")[:-1] == [
        "intake",
        "prep",
        "draft",
        "slow",
        "slow",
        "sign approved",
        "close",
    ]
