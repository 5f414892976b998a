"""``--workers``: the server queues runs for worker processes and follows them in the store.

Real processes on the PostgreSQL test server: a server, one or two workers, SIGKILL.
"""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import time
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path

import pytest
from langgraph_sdk import get_sync_client
from serve_process import free_port, start, stop, wait_for_ok

from postgres_server import throwaway_database

pytestmark = pytest.mark.slow

HERE = Path(__file__).parent


@contextmanager
def worker(dsn: str) -> Iterator[subprocess.Popen[bytes]]:
    """Run a worker process on the queue in ``dsn``; stop it after the block."""
    env = {
        **os.environ,
        "PYTHONPATH": os.pathsep.join([str(HERE), os.environ.get("PYTHONPATH", "")]),
    }
    args = [
        "worker",
        dsn,
        "--heartbeat",
        "0.2",
        "--stalled-after",
        "1.5",
        "--wait-for-thread",
        "30",
    ]
    process = subprocess.Popen([sys.executable, "-m", "nodestep.workers", *args], env=env)
    try:
        yield process
    finally:
        if process.poll() is None:
            process.send_signal(signal.SIGTERM)
            process.wait(timeout=30)


@pytest.fixture
def dsn(monkeypatch: pytest.MonkeyPatch) -> Iterator[str]:
    with throwaway_database() as url:
        monkeypatch.setenv("NODESTEP_TEST_WORKERS", url)
        yield url


def test_runs_are_run_by_a_worker_process_and_followed_by_the_server(dsn: str) -> None:
    port = free_port()
    server = start(dsn, port)
    try:
        with worker(dsn), get_sync_client(url=f"http://127.0.0.1:{port}", timeout=60) as client:
            tid = client.threads.create()["thread_id"]
            assert client.runs.wait(tid, "steps", input={"n": 0})["log"] == ["one", "two", "three"]
            run = client.runs.create(tid, "steps", input={"n": 0})
            joined = client.runs.join(tid, run["run_id"])
            assert joined["log"] == ["one", "two", "three"] * 2
            other = client.threads.create()["thread_id"]
            waiting = client.runs.wait(other, "approval", input={"request": "car"})
            assert waiting["__interrupt__"][0]["value"] == {"question": "approve car?"}
            assert client.threads.get(other)["status"] == "interrupted"
            streamed = client.threads.create()["thread_id"]
            *_, last = client.runs.stream(streamed, "approval", input={"request": "car"})
            assert (last.event, last.data["request"]) == ("values", "car")  # the state too
            assert last.data["__interrupt__"] == waiting["__interrupt__"]
            done = client.runs.wait(other, "approval", command={"resume": "yes"})
            assert (done["answer"], done["done"]) == ("yes", True)
            broken = client.threads.create()["thread_id"]
            failed = client.runs.wait(broken, "broken", input={"x": 4}, raise_error=False)
            assert failed["__error__"] == {"error": "ValueError", "message": "x was 4"}
            assert client.threads.get(broken)["status"] == "error"
    finally:
        stop(server)


def test_a_killed_server_loses_no_acknowledged_run(dsn: str) -> None:
    port = free_port()
    server = start(dsn, port)
    url = f"http://127.0.0.1:{port}"
    with get_sync_client(url=url, timeout=60) as client:
        tid = client.threads.create()["thread_id"]
        run = client.runs.create(tid, "slow", input={"seconds": 0.5})
    stop(server, kill=True)  # before any worker ran it
    with worker(dsn):
        server = start(dsn, port)
        try:
            with get_sync_client(url=url, timeout=60) as client:
                assert client.runs.join(tid, run["run_id"])["runs"] == ["worked"]
                assert client.runs.get(tid, run["run_id"])["status"] == "success"
        finally:
            stop(server)


def test_a_run_of_a_killed_worker_is_finished_by_another(dsn: str) -> None:
    port = free_port()
    server = start(dsn, port)
    try:
        with get_sync_client(url=f"http://127.0.0.1:{port}", timeout=60) as client:
            tid = client.threads.create()["thread_id"]
            with worker(dsn) as first:
                run = client.runs.create(tid, "slow", input={"seconds": 3})
                while client.threads.get_history(tid, limit=1) == []:
                    pass  # until the first worker has started the run
                first.send_signal(signal.SIGKILL)
                first.wait(timeout=30)
            with worker(dsn):
                assert client.runs.join(tid, run["run_id"])["runs"] == ["worked"]
                assert client.runs.get(tid, run["run_id"])["status"] == "success"
    finally:
        stop(server)


def _records(dsn: str, thread_id: str) -> list[dict[str, object]]:
    """The thread's records, read from the server's store (where the workers write)."""
    import anyio

    from nodestep import PostgresStateStore

    async def read() -> list[dict[str, object]]:
        store = PostgresStateStore(dsn)
        try:
            return await store.read(thread_id, "main")
        finally:
            await store.aclose()

    return anyio.run(read)


def _stopped_reasons(dsn: str, thread_id: str) -> list[object]:
    return [r["reason"] for r in _records(dsn, thread_id) if r["type"] == "run_stopped"]


def _ended(dsn: str, thread_id: str) -> list[object]:
    """The kinds of the thread's run end records."""
    ends = ("run_completed", "run_stopped", "run_failed")
    return [r["type"] for r in _records(dsn, thread_id) if r["type"] in ends]


def test_a_cancelled_run_is_stopped_in_its_worker_too(dsn: str) -> None:
    port = free_port()
    server = start(dsn, port)
    try:
        with worker(dsn) as process, get_sync_client(url=f"http://127.0.0.1:{port}") as client:
            tid = client.threads.create()["thread_id"]
            run = client.runs.create(tid, "slow", input={"seconds": 60})
            while client.threads.get_history(tid, limit=1) == []:
                pass  # until the worker has started the run
            client.runs.cancel(tid, run["run_id"])
            client.runs.join(tid, run["run_id"])
            assert client.runs.get(tid, run["run_id"])["status"] == "interrupted"
            deadline = time.monotonic() + 30  # the worker hears of the cancel at once
            while _stopped_reasons(dsn, tid) != ["cancelled"]:
                assert time.monotonic() < deadline, "the worker's run was not stopped"
                time.sleep(0.05)  # polls the store, where the worker records the stop
            # the worker is free for the next run, long before the cancelled one's 60 s
            other = client.threads.create()["thread_id"]
            done = client.runs.wait(other, "slow", input={"seconds": 0})
            assert done["runs"] == ["worked"]
            assert process.poll() is None
    finally:
        stop(server)


def test_a_server_that_stops_leaves_its_running_runs_to_the_workers(dsn: str) -> None:
    port = free_port()
    server = start(dsn, port)
    url = f"http://127.0.0.1:{port}"
    with worker(dsn):
        with get_sync_client(url=url, timeout=60) as client:
            tid = client.threads.create()["thread_id"]
            run = client.runs.create(tid, "slow", input={"seconds": 1.0})
            while client.threads.get_history(tid, limit=1) == []:
                pass  # until the worker has started the run
        stop(server)  # SIGTERM: a graceful stop, which cancels the server's own waits
        deadline = time.monotonic() + 30
        while _ended(dsn, tid) != ["run_completed"]:
            assert time.monotonic() < deadline, f"the run did not complete: {_ended(dsn, tid)}"
            time.sleep(0.05)  # polls the store, where the worker records the run's end
        server = start(dsn, port)
        try:
            with get_sync_client(url=url, timeout=60) as client:
                assert client.runs.join(tid, run["run_id"])["runs"] == ["worked"]
        finally:
            stop(server)


MUTE_AGENT = """
from pathlib import Path

from nodestep import Agent, ScriptedModel

# An agent whose model has nothing to say: every step fails in its LLMNode.
agent = Agent(Path(__file__).with_name("specs"), start_node="chat", llm=ScriptedModel([]))
"""


def test_a_served_agents_run_that_fails_in_a_worker_is_recorded_in_its_nodes(
    dsn: str, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    (tmp_path / "specs").mkdir()
    (tmp_path / "specs" / "chat.yaml").write_text("kind: LLMNode\nname: chat\n")
    (tmp_path / "mute_agent.py").write_text(MUTE_AGENT)
    monkeypatch.setenv("PYTHONPATH", str(tmp_path))  # the server's and the worker's
    port = free_port()
    command = [str(Path(sys.executable).with_name("nodestep")), "serve", "mute=mute_agent:agent"]
    command += ["--store", dsn, "--workers", dsn, "--port", str(port)]
    server = wait_for_ok(subprocess.Popen(command, cwd=tmp_path), port)
    try:
        with worker(dsn), get_sync_client(url=f"http://127.0.0.1:{port}", timeout=60) as client:
            tid = client.threads.create()["thread_id"]
            hi = {"messages": [{"type": "human", "content": "hi"}]}
            failed = client.runs.wait(tid, "mute", input=hi, raise_error=False)
            assert failed["__error__"]["error"] == "ModelError"
            chat = client.threads.get_state(tid)["values"]["nodes"]["chat"]
            assert (chat["status"], chat["has_error"]) == ("failed", True)
            assert chat["error"].startswith("ModelError: Scripted model 'scripted' was asked")
    finally:
        stop(server)
