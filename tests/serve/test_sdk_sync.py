"""The sync langgraph-sdk client against a real ``serve`` process: interrupts and durability."""

from __future__ import annotations

import signal
import socket
from collections.abc import Iterator
from pathlib import Path

import httpx
import pytest
from langgraph_sdk import get_sync_client
from langgraph_sdk.client import SyncLangGraphClient
from serve_process import free_port, running, start, stop

pytestmark = pytest.mark.slow


@pytest.fixture(scope="module")
def url(tmp_path_factory: pytest.TempPathFactory) -> Iterator[str]:
    path = Path(tmp_path_factory.mktemp("serve")) / "threads.db"
    with running(f"sqlite:///{path}") as base:
        yield base


@pytest.fixture
def client(url: str) -> Iterator[SyncLangGraphClient]:
    with get_sync_client(url=url) as opened:
        yield opened


def test_an_interrupt_shows_on_the_run_the_state_and_the_thread_and_a_command_answers_it(
    client: SyncLangGraphClient,
) -> None:
    tid = client.threads.create()["thread_id"]
    paused = client.runs.wait(tid, "approval", input={"request": "leave"})
    pending = paused["__interrupt__"]
    assert [p["value"] for p in pending] == [{"question": "approve leave?"}]
    state = client.threads.get_state(tid)
    assert state["next"] == ["ask"]
    assert state["tasks"][0]["interrupts"] == pending
    assert state["interrupts"] == pending
    thread = client.threads.get(tid)
    assert thread["status"] == "interrupted"
    assert list(thread["interrupts"].values()) == [pending]
    done = client.runs.wait(tid, "approval", command={"resume": "yes"})
    assert done == {"request": "leave", "answer": "yes", "done": True}
    assert client.threads.get(tid)["status"] == "idle"


def test_a_resume_mapping_answers_the_interrupt_by_its_id(client: SyncLangGraphClient) -> None:
    tid = client.threads.create()["thread_id"]
    pending = client.runs.wait(tid, "approval", input={"request": "car"})["__interrupt__"]
    done = client.runs.wait(tid, "approval", command={"resume": {pending[0]["id"]: "no"}})
    assert done["answer"] == "no"


def test_a_resume_mapping_with_a_key_that_names_no_open_interrupt_is_refused_not_taken_whole(
    client: SyncLangGraphClient,
) -> None:
    tid = client.threads.create()["thread_id"]
    pending = client.runs.wait(tid, "approval", input={"request": "car"})["__interrupt__"]
    answers = {pending[0]["id"]: "no", "ask:elsewhere": "yes"}
    run = client.runs.create(tid, "approval", command={"resume": answers})
    error = client.runs.join(tid, run["run_id"])["__error__"]
    assert error["error"] == "ResumeError" and "'ask:elsewhere'" in error["message"]
    assert client.runs.get(tid, run["run_id"])["status"] == "error"
    state = client.threads.get_state(tid)  # the dict was not given as one answer
    assert state["values"]["answer"] == "" and state["next"] == ["ask"]
    assert state["interrupts"] == pending


def test_an_interrupt_streams_as_an_update_named_interrupt(client: SyncLangGraphClient) -> None:
    tid = client.threads.create()["thread_id"]
    parts = [
        (p.event, p.data)
        for p in client.runs.stream(tid, "approval", input={"request": "x"}, stream_mode="updates")
    ]
    assert parts[-1][0] == "updates"
    assert list(parts[-1][1]) == ["__interrupt__"]


def test_a_pause_streams_the_interrupt_then_the_state_with_it_as_the_last_values(
    client: SyncLangGraphClient,
) -> None:
    tid = client.threads.create()["thread_id"]
    modes = ["values", "updates"]
    parts = [
        (p.event, p.data)
        for p in client.runs.stream(tid, "approval", input={"request": "car"}, stream_mode=modes)
    ]
    pending = [{"value": {"question": "approve car?"}, "id": "ask:approve"}]
    state = {"request": "car", "answer": "", "done": False}
    assert parts[1:] == [
        ("values", state),
        ("updates", {"__interrupt__": pending}),
        ("values", state | {"__interrupt__": pending}),
    ]


def test_a_ttl_sent_by_the_sdk_is_taken_and_keep_latest_is_refused(
    client: SyncLangGraphClient,
) -> None:
    tid = client.threads.create(ttl=60)["thread_id"]
    client.threads.update(tid, metadata={"topic": "tea"}, ttl=30)
    assert client.threads.get(tid)["metadata"] == {"topic": "tea"}
    with pytest.raises(httpx.HTTPStatusError) as refused:
        client.threads.create(ttl={"ttl": 5, "strategy": "keep_latest"})
    assert refused.value.response.status_code == 422
    assert "keep_latest" in refused.value.response.json()["detail"]


def test_a_run_past_its_recursion_limit_ends_with_langgraphs_recursion_error(
    client: SyncLangGraphClient,
) -> None:
    tid = client.threads.create()["thread_id"]
    config = {"recursion_limit": 3}  # at most 2 supersteps; steps needs 3
    parts = list(client.runs.stream(tid, "steps", input={"n": 0}, config=config))
    assert parts[-1].event == "error"
    assert parts[-1].data["error"] == "GraphRecursionError"
    assert "Recursion limit of 3 reached" in parts[-1].data["message"]
    run = client.runs.list(tid)[0]
    assert (run["status"], run["kwargs"]["config"]) == ("error", config)
    thread = client.threads.get(tid)
    assert (thread["status"], thread["values"]["log"]) == ("error", ["one", "two"])
    assert client.threads.get_state(tid)["next"] == ["three"]
    done = client.runs.wait(tid, "steps", input=None, config={"recursion_limit": 2})
    assert done["log"] == ["one", "two", "three"]  # a run without input continues it
    tid = client.threads.create()["thread_id"]
    ran = client.runs.wait(tid, "steps", input={"n": 0}, config={"recursion_limit": 4})
    assert ran["n"] == 3
    with pytest.raises(httpx.HTTPStatusError) as refused:
        client.runs.wait(tid, "steps", input={"n": 0}, config={"recursion_limit": 1})
    assert refused.value.response.status_code == 422
    assert "recursion_limit" in refused.value.response.json()["detail"]


def test_a_killed_server_loses_no_acknowledged_run(tmp_path: Path) -> None:
    store = f"sqlite:///{tmp_path / 'threads.db'}"
    port = free_port()
    first = start(store, port)
    try:
        with get_sync_client(url=f"http://127.0.0.1:{port}") as client:
            tid = client.threads.create()["thread_id"]
            run = client.runs.create(tid, "slow", input={"seconds": 1.0})
    finally:
        stop(first, kill=True)  # SIGKILL while the run sleeps in its node
    second = start(store, port)
    try:
        with get_sync_client(url=f"http://127.0.0.1:{port}", timeout=20) as client:
            assert client.runs.join(tid, run["run_id"]) == {"seconds": 1.0, "runs": ["worked"]}
            assert client.runs.get(tid, run["run_id"])["status"] == "success"
            assert client.threads.get(tid)["status"] == "idle"
    finally:
        stop(second)


def test_a_stopped_server_does_not_wait_forever_for_an_open_join(tmp_path: Path) -> None:
    port = free_port()
    server = start(f"sqlite:///{tmp_path / 'threads.db'}", port)
    try:
        with get_sync_client(url=f"http://127.0.0.1:{port}") as client:
            tid = client.threads.create()["thread_id"]
            run = client.runs.create(tid, "slow", input={"seconds": 60})
        with socket.create_connection(("127.0.0.1", port)) as held:  # a join left open
            request = f"GET /threads/{tid}/runs/{run['run_id']}/join HTTP/1.1\r\n"
            held.sendall(f"{request}Host: 127.0.0.1\r\n\r\n".encode())
            server.send_signal(signal.SIGTERM)
            assert server.wait(timeout=20) is not None
    finally:
        if server.poll() is None:
            stop(server, kill=True)
