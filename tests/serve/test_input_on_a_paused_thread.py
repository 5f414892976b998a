"""New input on a thread where an interrupt waits: the run is refused, and the thread still
waits (``interrupted``, its question shown), so the answer goes on as before."""

from __future__ import annotations

from collections.abc import Iterator

import pytest
from serve_graphs import GRAPHS
from starlette.testclient import TestClient

from nodestep import InMemoryStateStore
from nodestep.serve import create_app


@pytest.fixture
def http() -> Iterator[TestClient]:
    app = create_app(GRAPHS, store=InMemoryStateStore())
    with TestClient(app, base_url="http://127.0.0.1:2024") as client:
        yield client


def test_a_refused_input_leaves_the_thread_interrupted(http: TestClient) -> None:
    tid = http.post("/threads", json={}).json()["thread_id"]
    asked = {"assistant_id": "approval", "input": {"request": "leave"}}
    http.post(f"/threads/{tid}/runs/wait", json=asked)
    again = {"assistant_id": "approval", "input": {"request": "more leave"}}
    refused = http.post(f"/threads/{tid}/runs/wait", json=again).json()
    assert refused["__error__"]["error"] == "ResumeError"
    thread = http.get(f"/threads/{tid}").json()
    assert (thread["status"], thread["error"]) == ("interrupted", None)
    assert list(thread["interrupts"]) == ["ask"]
    waiting = http.post("/threads/search", json={"status": "interrupted"}).json()
    assert [t["thread_id"] for t in waiting] == [tid]
    statuses = [run["status"] for run in http.get(f"/threads/{tid}/runs").json()]
    assert statuses == ["error", "success"]
    answer = {"assistant_id": "approval", "command": {"resume": "granted"}}
    done = http.post(f"/threads/{tid}/runs/wait", json=answer).json()
    assert done == {"request": "leave", "answer": "granted", "done": True}
    assert http.get(f"/threads/{tid}").json()["status"] == "idle"


def test_a_failed_run_that_wrote_records_still_leaves_the_thread_in_error(
    http: TestClient,
) -> None:
    tid = http.post("/threads", json={}).json()["thread_id"]
    http.post(f"/threads/{tid}/runs/wait", json={"assistant_id": "broken", "input": {"x": 1}})
    thread = http.get(f"/threads/{tid}").json()
    assert thread["status"] == "error"
    assert thread["error"] == {"error": "ValueError", "message": "x was 1"}
