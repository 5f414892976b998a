"""A process killed with SIGKILL while a join waits: a new process fires the join once.

The runner stores the superstep in which ``c`` arrived at ``[b2, c] >> d`` and is killed
while ``b2`` runs, so the barrier's progress exists only in the history file. A second
process continues the thread with ``invoke(None, thread_id=...)``: ``b2`` runs again (its
run never finished), arrives, and ``d`` runs exactly once, counted in a ledger file every
node appends to with ``O_APPEND``.
"""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
from pathlib import Path

import anyio
import pytest

from nodestep import FilesystemStateStore

pytestmark = pytest.mark.slow

SCRIPT = """
import json
import os
import sys
import time
from typing import Annotated

from pydantic import Field

from nodestep import END, START, BaseState, FilesystemStateStore, Graph, add, node

LEDGER = os.environ["LEDGER"]
BLOCK = os.environ["BLOCK"]


def ledger(line):
    fd = os.open(LEDGER, os.O_WRONLY | os.O_APPEND | os.O_CREAT, 0o644)
    try:
        os.write(fd, (line + "\\n").encode())
    finally:
        os.close(fd)


class S(BaseState):
    path: Annotated[list[str], add] = Field(default_factory=list)


def step(name, wait=False):
    def f(state):
        ledger(name)
        if wait and os.path.exists(BLOCK):  # the runner is killed here, with c's arrival stored
            print("b2 is running", flush=True)
            time.sleep(60)  # held until the test kills the runner; 60 s bounds one it does not
        return {"path": [name]}

    return node(f, name=name)


a, b, b2, c, d = step("a"), step("b"), step("b2", wait=True), step("c"), step("d")
graph = Graph(S, state_store=FilesystemStateStore(sys.argv[2])).flow(
    START >> a >> [b, c], b >> b2, [b2, c] >> d >> END
)
if sys.argv[1] == "start":
    graph.invoke({}, thread_id="t")
else:
    print(json.dumps(graph.invoke(None, thread_id="t").state.path))
"""


def _ledger(path: Path) -> list[str]:
    return path.read_text().split() if path.exists() else []


def test_a_join_waiting_when_its_runner_is_killed_fires_once_in_a_new_process(
    tmp_path: Path,
) -> None:
    (tmp_path / "joins.py").write_text(SCRIPT)
    history, ledger, block = tmp_path / "h.jsonl", tmp_path / "ledger.txt", tmp_path / "block"
    block.touch()
    env = {**os.environ, "LEDGER": str(ledger), "BLOCK": str(block)}
    runner = subprocess.Popen(
        [sys.executable, str(tmp_path / "joins.py"), "start", str(history)],
        env=env,
        stdout=subprocess.PIPE,
        text=True,
    )
    assert runner.stdout is not None
    assert runner.stdout.readline() == "b2 is running\n", "b2 never started"
    os.kill(runner.pid, signal.SIGKILL)
    runner.communicate(timeout=30)
    assert runner.returncode == -signal.SIGKILL

    async def stored() -> list[dict]:
        store = FilesystemStateStore(history)
        try:
            return await store.read("t", "main")
        finally:
            await store.aclose()

    steps = [r for r in anyio.run(stored) if r["type"] == "superstep_completed"]
    assert steps[-1]["tasks"]["c"]["routes"] == [{"join": "d", "from": "c", "after": ["b2", "c"]}]

    block.unlink()
    done = subprocess.run(
        [sys.executable, str(tmp_path / "joins.py"), "continue", str(history)],
        env=env,
        capture_output=True,
        text=True,
        timeout=60,
        check=True,
    )
    assert json.loads(done.stdout) == ["a", "b", "c", "b2", "d"]
    # b and c run in threads of one superstep: their ledger lines may come in either order.
    assert sorted(_ledger(ledger)) == ["a", "b", "b2", "b2", "c", "d"]
    assert _ledger(ledger)[-1] == "d"
