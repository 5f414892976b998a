"""One writer per thread across real processes sharing one history file.

Several processes run the same thread at once, each call with a request key of its own and
retried with the same key when the thread is busy or changed: every input is applied
exactly once. A runner killed while it holds the thread leaves it to the next process, and
a runner stopped past its lease's expiry can never append again.
"""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import textwrap
import time
from pathlib import Path

import anyio
import pytest

from nodestep import FilesystemStateStore

SCRIPT = textwrap.dedent(
    """
    import json, os, random, sys, time
    from typing import Annotated

    from pydantic import Field

    from nodestep import (
        END, START, BaseState, FilesystemStateStore, Graph, ThreadBusyError,
        ThreadConflictError, add, node,
    )


    class Ledger(BaseState):
        ids: Annotated[list[str], add] = Field(default_factory=list)
        steps: int = 0


    @node
    def count(state: Ledger) -> dict:
        if os.environ.get("HOLD"):
            print("in node", flush=True)
            time.sleep(float(os.environ["HOLD"]))  # real time: past the lease's ttl, or a kill
        return {"steps": state.steps + 1}


    @node
    def check(state: Ledger) -> dict:
        return {}


    def graph(path, ttl=30.0):
        store = FilesystemStateStore(path)
        return Graph(Ledger, state_store=store, lease_ttl=ttl).flow(
            START >> count, count >> check, check >> END
        )


    mode, path = sys.argv[1], sys.argv[2]
    if mode == "worker":
        worker, runs = sys.argv[3], int(sys.argv[4])
        g, retries = graph(path), 0
        for i in range(runs):
            key = f"{worker}-{i}"
            while True:
                try:
                    g.invoke({"ids": [key]}, thread_id="shared", request_key=key)
                    break
                except ThreadConflictError:  # busy, or changed: retry with the same key
                    retries += 1
                    time.sleep(random.uniform(0, 0.002))  # real time: a client's jitter
        print(json.dumps({"retries": retries}))
    elif mode == "once":
        ttl, wait = float(sys.argv[3]), float(sys.argv[4])
        try:
            result = graph(path, ttl).invoke(
                {"ids": ["k-1"]}, thread_id="shared", request_key="k-1", wait_for_thread=wait
            )
        except ThreadBusyError as error:
            print(json.dumps({"busy": error.holder, "lost": error.lost}), flush=True)
            sys.exit(3)
        print(json.dumps({"ids": result.state.ids, "status": result.status}))
    """
)


def start(tmp_path: Path, *args: str, hold: float | None = None) -> subprocess.Popen[str]:
    env = {**os.environ, "PYTHONIOENCODING": "utf-8"}
    if hold is not None:
        env["HOLD"] = str(hold)
    return subprocess.Popen(
        [sys.executable, str(tmp_path / "ledger.py"), *args],
        cwd=tmp_path,
        env=env,
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
    )


def finish(proc: subprocess.Popen[str], code: int = 0) -> str:
    out, err = proc.communicate(timeout=120)
    assert proc.returncode == code, f"exit {proc.returncode}:\n{out}\n{err}"
    return out


def stored(path: Path) -> tuple[list[str], list[int]]:
    """Return the thread's ids and its records' sequence numbers, read by a new store."""

    async def read() -> tuple[list[str], list[int]]:
        store = FilesystemStateStore(path)
        try:
            records = await store.read("shared", "main")
            tail = await store.read_tail("shared", "main")
        finally:
            await store.aclose()
        ids: list[str] = []
        for record in records:  # every input, as each turn's run_started stored it
            if record["type"] == "run_started" and "input" in record:
                ids += record["input"]["ids"]
        assert tail, "the thread loads"
        return ids, [r["seq"] for r in records]

    return anyio.run(read)


@pytest.mark.slow
def test_processes_sharing_a_thread_apply_every_keyed_input_exactly_once(tmp_path: Path) -> None:
    (tmp_path / "ledger.py").write_text(SCRIPT)
    path = tmp_path / "ledger.jsonl"
    workers, runs = 4, 25
    procs = [start(tmp_path, "worker", str(path), f"w{w}", str(runs)) for w in range(workers)]
    retries = sum(json.loads(finish(p).splitlines()[-1])["retries"] for p in procs)
    ids, seqs = stored(path)
    expected = {f"w{w}-{i}" for w in range(workers) for i in range(runs)}
    assert len(ids) == len(expected), f"{len(ids) - len(set(ids))} duplicated"
    assert set(ids) == expected, f"lost: {sorted(expected - set(ids))}"
    assert seqs == list(range(1, len(seqs) + 1))
    print(f"{workers} processes x {runs} runs: {len(ids)} inputs, {retries} retries")


@pytest.mark.slow
def test_a_killed_holder_leaves_the_thread_to_the_next_process(tmp_path: Path) -> None:
    (tmp_path / "ledger.py").write_text(SCRIPT)
    path = tmp_path / "ledger.jsonl"
    holder = start(tmp_path, "once", str(path), "30", "0", hold=60)
    assert holder.stdout is not None
    assert holder.stdout.readline() == "in node\n"
    os.kill(holder.pid, signal.SIGKILL)
    holder.communicate(timeout=30)
    # Its lease has 30 s left, but its process is gone: the next process takes over now.
    started = time.monotonic()
    out = finish(start(tmp_path, "once", str(path), "30", "0"))
    assert json.loads(out) == {"ids": ["k-1"], "status": "completed"}
    assert time.monotonic() - started < 20
    ids, _ = stored(path)
    assert ids == ["k-1"]


@pytest.mark.slow
def test_a_stopped_holder_loses_the_thread_at_expiry_and_cannot_append(tmp_path: Path) -> None:
    (tmp_path / "ledger.py").write_text(SCRIPT)
    path = tmp_path / "ledger.jsonl"
    holder = start(tmp_path, "once", str(path), "0.5", "0", hold=1.5)
    assert holder.stdout is not None
    assert holder.stdout.readline() == "in node\n"
    os.kill(holder.pid, signal.SIGSTOP)  # alive, but renews nothing
    try:
        out = finish(start(tmp_path, "once", str(path), "30", "10"))
    finally:
        os.kill(holder.pid, signal.SIGCONT)
    assert json.loads(out) == {"ids": ["k-1"], "status": "completed"}
    report = json.loads(finish(holder, code=3))
    assert report["lost"] is True
    ids, seqs = stored(path)
    assert ids == ["k-1"]
    assert seqs == list(range(1, len(seqs) + 1))
