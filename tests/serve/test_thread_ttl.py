"""A thread's ``ttl``: deleted with its history once it runs out, checked on a fake clock."""

from __future__ import annotations

import time
from collections.abc import Iterator

import anyio
import pytest
from serve_graphs import GRAPHS
from starlette.testclient import TestClient
from test_app import BASE, new_thread

from nodestep import InMemoryStateStore
from nodestep.serve import create_app

pytestmark = pytest.mark.slow


class Clock:
    """A clock the test moves by hand: the server's ``clock``."""

    def __init__(self) -> None:
        self.now = time.time()

    def __call__(self) -> float:
        return self.now

    def advance(self, minutes: float) -> None:
        self.now += minutes * 60


@pytest.fixture
def clock() -> Clock:
    return Clock()


@pytest.fixture
def store() -> InMemoryStateStore:
    return InMemoryStateStore()


@pytest.fixture
def http(clock: Clock, store: InMemoryStateStore) -> Iterator[TestClient]:
    app = create_app(GRAPHS, store=store, clock=clock)
    with TestClient(app, base_url=BASE) as client:
        yield client


def ttl(minutes: float) -> dict[str, object]:
    """Return ``ttl`` as the Python SDK's ``threads.create(ttl=minutes)`` sends it."""
    return {"ttl": minutes, "strategy": "delete"}


def test_a_thread_past_its_ttl_is_gone_with_its_history_when_read_or_listed(
    http: TestClient, clock: Clock, store: InMemoryStateStore
) -> None:
    tid = new_thread(http, ttl=ttl(5))
    kept = new_thread(http)
    http.post(f"/threads/{tid}/runs/wait", json={"assistant_id": "steps", "input": {"n": 0}})
    clock.advance(4.9)
    assert http.get(f"/threads/{tid}").json()["values"]["n"] == 3
    assert http.post("/threads/count", json={}).json() == 2
    clock.advance(0.1)
    assert [t["thread_id"] for t in http.post("/threads/search", json={}).json()] == [kept]
    assert http.post("/threads/count", json={}).json() == 1
    assert http.get(f"/threads/{tid}").status_code == 404
    assert http.get(f"/threads/{tid}/state").status_code == 404
    assert anyio.run(store.last_sequence, tid, "main") == 0


def test_a_run_on_an_expired_thread_finds_it_gone(http: TestClient, clock: Clock) -> None:
    tid = new_thread(http, ttl=5)  # a plain number of minutes is taken too
    clock.advance(6)
    body = {"assistant_id": "steps", "input": {"n": 0}}
    assert http.post(f"/threads/{tid}/runs/wait", json=body).status_code == 404
    again = http.post(f"/threads/{tid}/runs/wait", json=body | {"if_not_exists": "create"})
    assert again.json()["n"] == 3
    clock.advance(60)
    assert http.get(f"/threads/{tid}").status_code == 200  # made anew, without a ttl


def test_an_update_with_a_ttl_counts_it_from_then(http: TestClient, clock: Clock) -> None:
    tid = new_thread(http, ttl=ttl(5))
    clock.advance(4)
    assert http.patch(f"/threads/{tid}", json={"ttl": ttl(5)}).status_code == 200
    clock.advance(4)
    assert http.get(f"/threads/{tid}").status_code == 200
    clock.advance(1)
    assert http.get(f"/threads/{tid}").status_code == 404


def test_a_thread_with_a_running_run_outlives_its_ttl_until_the_run_ends(
    http: TestClient, clock: Clock
) -> None:
    tid = new_thread(http, ttl=ttl(1))
    body = {"assistant_id": "slow", "input": {"seconds": 30}}
    run = http.post(f"/threads/{tid}/runs", json=body).json()
    clock.advance(2)
    assert http.get(f"/threads/{tid}").json()["status"] == "busy"
    http.post(f"/threads/{tid}/runs/{run['run_id']}/cancel?wait=1")
    assert http.get(f"/threads/{tid}").status_code == 404


@pytest.mark.parametrize(
    ("sent", "named"),
    [
        ({"ttl": 5, "strategy": "keep_latest"}, "nodestep threads prune --keep-last"),
        (ttl(0), "a number above 0"),
        (ttl(-1), "a number above 0"),
    ],
)
def test_a_ttl_that_cannot_be_kept_is_refused_and_makes_no_thread(
    http: TestClient, sent: dict[str, object], named: str
) -> None:
    answer = http.post("/threads", json={"ttl": sent})
    assert answer.status_code == 422 and named in answer.json()["detail"]
    assert http.post("/threads/count", json={}).json() == 0
    tid = new_thread(http)
    assert http.patch(f"/threads/{tid}", json={"ttl": sent}).status_code == 422
