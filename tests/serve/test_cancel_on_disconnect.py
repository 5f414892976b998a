"""A client that goes away cancels the run when it asked to, as LangGraph's server does.

``runs.wait(..., on_disconnect="cancel")``, ``runs.join(..., cancel_on_disconnect=True)``
and ``runs.join_stream(..., cancel_on_disconnect=True)``: each request here is the one the
JS client (``@langchain/langgraph-sdk``) sends, closed once its headers arrived, as an
aborted ``fetch`` closes it. A real server, since a disconnect needs a real socket.
"""

from __future__ import annotations

import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import httpx
import pytest
from serve_process import running

pytestmark = pytest.mark.slow


@pytest.fixture(scope="module")
def url(tmp_path_factory: pytest.TempPathFactory) -> Iterator[str]:
    path = Path(tmp_path_factory.mktemp("serve")) / "threads.db"
    with running(f"sqlite:///{path}") as base:
        yield base


@pytest.fixture
def http(url: str) -> Iterator[httpx.Client]:
    with httpx.Client(base_url=url, timeout=30) as client:
        yield client


SLOW = {"assistant_id": "slow", "input": {"seconds": 30}}


def status_once_settled(http: httpx.Client, tid: str, run_id: str) -> str:
    """Return the run's status once it is no longer ``running`` (or after 10 s)."""
    for _ in range(200):
        status = str(http.get(f"/threads/{tid}/runs/{run_id}").json()["status"])
        if status != "running":
            return status
        time.sleep(0.05)
    return status


def started(http: httpx.Client) -> tuple[str, str]:
    """Return a new thread and a slow run on it, once the run is running."""
    tid = http.post("/threads", json={}).json()["thread_id"]
    run_id = http.post(f"/threads/{tid}/runs", json=SLOW).json()["run_id"]
    for _ in range(200):
        if http.get(f"/threads/{tid}/runs/{run_id}").json()["status"] == "running":
            break
        time.sleep(0.05)
    return tid, run_id


def hang_up(url: str, method: str, path: str, **kwargs: Any) -> httpx.Headers:
    """Send a request on a connection of its own, and close it once the headers came."""
    with (
        httpx.Client(base_url=url, timeout=30) as own,
        own.stream(method, path, **kwargs) as answer,
    ):
        return answer.headers


def test_a_wait_closed_by_the_client_cancels_the_run_with_on_disconnect_cancel(
    http: httpx.Client, url: str
) -> None:
    tid = http.post("/threads", json={}).json()["thread_id"]
    body = SLOW | {"on_disconnect": "cancel"}
    headers = hang_up(url, "POST", f"/threads/{tid}/runs/wait", json=body)
    run_id = headers["content-location"].rsplit("/", 1)[1]
    assert status_once_settled(http, tid, run_id) == "interrupted"


def test_a_join_closed_by_the_client_cancels_the_run_with_cancel_on_disconnect(
    http: httpx.Client, url: str
) -> None:
    tid, run_id = started(http)
    hang_up(url, "GET", f"/threads/{tid}/runs/{run_id}/join?cancel_on_disconnect=1")
    assert status_once_settled(http, tid, run_id) == "interrupted"


def test_a_join_stream_closed_by_the_client_cancels_the_run_with_cancel_on_disconnect(
    http: httpx.Client, url: str
) -> None:
    tid, run_id = started(http)
    hang_up(url, "GET", f"/threads/{tid}/runs/{run_id}/stream?cancel_on_disconnect=1")
    assert status_once_settled(http, tid, run_id) == "interrupted"
