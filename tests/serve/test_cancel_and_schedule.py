"""Cancelling (interrupt, rollback), delayed runs, resumes with nothing to answer, and what
a run that stopped answers: each as LangGraph's server answers it."""

from __future__ import annotations

import time
from collections.abc import Callable, Iterator
from typing import Any

import pytest
from serve_graphs import GRAPHS
from starlette.testclient import TestClient
from test_app import BASE, new_thread

from nodestep import InMemoryStateStore
from nodestep.serve import create_app

pytestmark = pytest.mark.slow


@pytest.fixture
def http() -> Iterator[TestClient]:
    app = create_app(GRAPHS, store=InMemoryStateStore(), heartbeat=0.05)
    with TestClient(app, base_url=BASE) as client:
        yield client


def until(check: Callable[[], Any], what: str) -> Any:
    """Return ``check()`` once it is true; fail after 10 s (the run is a task elsewhere)."""
    deadline = time.monotonic() + 10
    while not (found := check()):
        assert time.monotonic() < deadline, f"timed out waiting for {what}"
        time.sleep(0.01)
    return found


def start_slow(http: TestClient, tid: str, **body: Any) -> str:
    """Start a run of ``slow`` that sleeps 30 s once its input is in the state."""
    run = http.post(
        f"/threads/{tid}/runs", json={"assistant_id": "slow", "input": {"seconds": 30}} | body
    ).json()
    until(lambda: http.get(f"/threads/{tid}/state").json()["values"].get("seconds") == 30, "input")
    return str(run["run_id"])


def test_cancel_with_rollback_deletes_the_run_and_restores_the_state_before_it(
    http: TestClient,
) -> None:
    tid = new_thread(http)
    http.post(f"/threads/{tid}/runs/wait", json={"assistant_id": "slow", "input": {}})
    before = http.get(f"/threads/{tid}/state").json()["values"]
    run_id = start_slow(http, tid)
    cancel = http.post(f"/threads/{tid}/runs/{run_id}/cancel?wait=1&action=rollback")
    assert cancel.status_code == 202
    assert http.get(f"/threads/{tid}/runs/{run_id}").status_code == 404
    assert [r["status"] for r in http.get(f"/threads/{tid}/runs").json()] == ["success"]
    thread = http.get(f"/threads/{tid}").json()
    assert (thread["status"], thread["values"]) == ("idle", before)
    after = http.post(f"/threads/{tid}/runs/wait", json={"assistant_id": "slow", "input": {}})
    assert after.json()["runs"] == ["worked", "worked"]


def test_rollback_strategy_undoes_the_running_run_of_a_new_thread_before_the_next_runs(
    http: TestClient,
) -> None:
    tid = new_thread(http)
    first = start_slow(http, tid)
    body = {"assistant_id": "slow", "input": {}, "multitask_strategy": "rollback"}
    answer = http.post(f"/threads/{tid}/runs/wait", json=body)
    assert answer.json() == {"seconds": 0.0, "runs": ["worked"]}
    assert http.get(f"/threads/{tid}/runs/{first}").status_code == 404
    history = http.post(f"/threads/{tid}/history", json={"limit": 100}).json()
    assert all(h["values"].get("seconds") != 30 for h in history)


def test_rollback_of_a_run_not_started_deletes_it_and_interrupt_keeps_it(
    http: TestClient,
) -> None:
    tid = new_thread(http)
    running = start_slow(http, tid)
    queued = http.post(f"/threads/{tid}/runs", json={"assistant_id": "slow", "input": {}}).json()
    http.post(f"/threads/{tid}/runs/{queued['run_id']}/cancel?action=rollback")
    assert http.get(f"/threads/{tid}/runs/{queued['run_id']}").status_code == 404
    http.post(f"/threads/{tid}/runs/{running}/cancel?wait=true")
    assert http.get(f"/threads/{tid}/runs/{running}").json()["status"] == "interrupted"
    bad = http.post(f"/threads/{tid}/runs/{running}/cancel?action=undo")
    assert bad.status_code == 422 and "action=rollback" in bad.json()["detail"]


def test_join_of_a_cancelled_run_answers_the_threads_values(http: TestClient) -> None:
    tid = new_thread(http)
    run_id = start_slow(http, tid)
    http.post(f"/threads/{tid}/runs/{run_id}/cancel?wait=1")
    joined = http.get(f"/threads/{tid}/runs/{run_id}/join")
    assert joined.json() == {"seconds": 30.0, "runs": []}
    assert joined.headers["location"] == f"/threads/{tid}/runs/{run_id}/join"


def test_a_run_with_after_seconds_stays_pending_until_then(http: TestClient) -> None:
    tid = new_thread(http)
    body = {"assistant_id": "steps", "input": {"n": 1}, "after_seconds": 0.5}
    started = time.monotonic()
    run = http.post(f"/threads/{tid}/runs", json=body).json()
    assert http.get(f"/threads/{tid}/runs/{run['run_id']}").json()["status"] == "pending"
    assert http.get(f"/threads/{tid}/state").json()["values"] == {}
    assert http.get(f"/threads/{tid}/runs/{run['run_id']}/join").json()["n"] == 4
    assert time.monotonic() - started >= 0.5
    negative = http.post(f"/threads/{tid}/runs", json=body | {"after_seconds": -1})
    assert negative.status_code == 422 and "after_seconds" in str(negative.json()["detail"])


def test_cancelling_a_delayed_run_lets_the_runs_queued_behind_it_go(http: TestClient) -> None:
    tid = new_thread(http)
    body = {"assistant_id": "steps", "input": {"n": 1}}
    later = http.post(f"/threads/{tid}/runs", json=body | {"after_seconds": 60}).json()
    next_one = http.post(f"/threads/{tid}/runs", json=body).json()
    http.post(f"/threads/{tid}/runs/{later['run_id']}/cancel")
    started = time.monotonic()
    assert http.get(f"/threads/{tid}/runs/{next_one['run_id']}/join").json()["n"] == 4
    assert time.monotonic() - started < 10


def test_a_resume_with_no_pending_interrupt_succeeds_and_changes_nothing(
    http: TestClient,
) -> None:
    tid = new_thread(http)
    done = http.post(f"/threads/{tid}/runs/wait", json={"assistant_id": "steps", "input": {}})
    body = {"assistant_id": "steps", "command": {"resume": "yes"}}
    again = http.post(f"/threads/{tid}/runs/wait", json=body)
    assert (again.status_code, again.json()) == (200, done.json())
    thread = http.get(f"/threads/{tid}").json()
    assert (thread["status"], thread["error"]) == ("idle", None)
    assert [r["status"] for r in http.get(f"/threads/{tid}/runs").json()] == ["success"] * 2


def test_a_resume_of_a_pause_before_a_node_continues_the_run(http: TestClient) -> None:
    tid = new_thread(http)
    body = {"assistant_id": "steps", "input": {"n": 0}, "interrupt_before": ["two"]}
    paused = http.post(f"/threads/{tid}/runs/wait", json=body).json()
    assert paused == {"n": 1, "log": ["one"]}  # no "__interrupt__": nothing asks a question
    body = {"assistant_id": "steps", "command": {"resume": "go"}}
    assert http.post(f"/threads/{tid}/runs/wait", json=body).json()["n"] == 3


@pytest.mark.parametrize("strategy", ["interrupt", "rollback"])
def test_a_run_at_an_unknown_checkpoint_is_refused_before_it_cancels_the_running_one(
    http: TestClient, strategy: str
) -> None:
    tid = new_thread(http)
    run_id = start_slow(http, tid)
    body = {"assistant_id": "slow", "input": {}, "checkpoint_id": "nope"}
    answer = http.post(f"/threads/{tid}/runs", json=body | {"multitask_strategy": strategy})
    assert answer.status_code == 404
    assert "'nope'" in answer.json()["detail"] and "get_history" in answer.json()["detail"]
    assert http.get(f"/threads/{tid}/runs/{run_id}").json()["status"] == "running"
    assert http.get(f"/threads/{tid}").json()["status"] == "busy"
    http.post(f"/threads/{tid}/runs/{run_id}/cancel?wait=1")


def test_a_resume_of_a_thread_that_never_ran_is_refused_before_it_cancels_its_queued_run(
    http: TestClient,
) -> None:
    tid = new_thread(http)
    body = {"assistant_id": "approval", "input": {"request": "car"}, "after_seconds": 60}
    later = http.post(f"/threads/{tid}/runs", json=body).json()
    body = {"assistant_id": "approval", "command": {"resume": "yes"}}
    answer = http.post(f"/threads/{tid}/runs", json=body | {"multitask_strategy": "interrupt"})
    assert answer.status_code == 422 and "has not run yet" in answer.json()["detail"]
    assert http.get(f"/threads/{tid}/runs/{later['run_id']}").json()["status"] == "pending"
    http.post(f"/threads/{tid}/runs/{later['run_id']}/cancel")


@pytest.mark.parametrize("strategy", ["interrupt", "rollback"])
def test_a_run_at_a_checkpoint_that_cancels_the_running_one_runs_from_that_checkpoint(
    http: TestClient, strategy: str
) -> None:
    tid = new_thread(http)
    http.post(f"/threads/{tid}/runs/wait", json={"assistant_id": "slow", "input": {}})
    first = http.post(f"/threads/{tid}/history", json={"limit": 100}).json()[-1]
    assert first["values"]["runs"] == []
    start_slow(http, tid)
    body = {"assistant_id": "slow", "input": {}, "multitask_strategy": strategy}
    body["checkpoint_id"] = first["checkpoint"]["checkpoint_id"]
    ran = http.post(f"/threads/{tid}/runs/wait", json=body).json()
    assert ran["runs"] == ["worked"]
    assert http.get(f"/threads/{tid}").json()["values"]["runs"] == ["worked"]
