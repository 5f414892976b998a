"""Two server processes on one store (an SQLite file, a PostgreSQL database) share it."""

from __future__ import annotations

from collections.abc import Iterator
from contextlib import ExitStack, contextmanager
from pathlib import Path

import pytest
from langgraph_sdk import get_sync_client
from langgraph_sdk.errors import ConflictError
from serve_process import running

from postgres_server import throwaway_database

pytestmark = pytest.mark.slow


@contextmanager
def two_servers(store: str) -> Iterator[tuple[str, str]]:
    """Run two servers on ``store``; yield their base URLs."""
    with ExitStack() as stack:
        first = stack.enter_context(running(store))
        second = stack.enter_context(running(store))
        yield first, second


@pytest.fixture(params=["sqlite", "postgresql"])
def store(request: pytest.FixtureRequest, tmp_path: Path) -> Iterator[str]:
    if request.param == "sqlite":
        yield f"sqlite:///{tmp_path / 'threads.db'}"
    else:
        with throwaway_database() as dsn:
            yield dsn


def test_a_thread_and_run_made_on_one_server_are_seen_and_joined_on_the_other(
    store: str,
) -> None:
    with (
        two_servers(store) as (a_url, b_url),
        get_sync_client(url=a_url, timeout=30) as a,
        get_sync_client(url=b_url, timeout=30) as b,
    ):
        tid = a.threads.create(metadata={"team": "shared"})["thread_id"]
        assert b.threads.get(tid)["metadata"] == {"team": "shared"}
        assert [t["thread_id"] for t in b.threads.search(metadata={"team": "shared"})] == [tid]
        run = a.runs.create(tid, "steps", input={"n": 0})
        assert b.runs.join(tid, run["run_id"])["log"] == ["one", "two", "three"]
        assert b.runs.get(tid, run["run_id"])["status"] == "success"
        assert b.threads.get(tid)["status"] == "idle"
        b.threads.update(tid, metadata={"seen": "b"})
        assert a.threads.get(tid)["metadata"] == {
            "team": "shared",
            "seen": "b",
            "graph_id": "steps",
            "assistant_id": run["assistant_id"],
        }


def test_a_busy_thread_is_refused_and_queued_across_servers(store: str) -> None:
    with (
        two_servers(store) as (a_url, b_url),
        get_sync_client(url=a_url, timeout=30) as a,
        get_sync_client(url=b_url, timeout=30) as b,
    ):
        tid = a.threads.create()["thread_id"]
        first = a.runs.create(tid, "slow", input={"seconds": 30})
        assert b.threads.get(tid)["status"] == "busy"
        with pytest.raises(ConflictError):
            b.runs.create(tid, "slow", input={"seconds": 0}, multitask_strategy="reject")
        second = b.runs.create(tid, "slow", input={"seconds": 0}, multitask_strategy="enqueue")
        assert b.runs.get(tid, second["run_id"])["status"] == "pending"
        a.runs.cancel(tid, first["run_id"], wait=True)
        assert a.runs.join(tid, second["run_id"])["runs"] == ["worked"]
        assert b.runs.get(tid, first["run_id"])["status"] == "interrupted"
        assert [r["run_id"] for r in a.runs.list(tid)] == [second["run_id"], first["run_id"]]
        assert a.threads.get(tid)["status"] == "idle"


def test_two_servers_creating_one_thread_id_store_it_once(store: str) -> None:
    with (
        two_servers(store) as (a_url, b_url),
        get_sync_client(url=a_url, timeout=30) as a,
        get_sync_client(url=b_url, timeout=30) as b,
    ):
        tid = a.threads.create(metadata={"by": "a"})["thread_id"]
        with pytest.raises(ConflictError):
            b.threads.create(thread_id=tid, metadata={"by": "b"})
        again = b.threads.create(thread_id=tid, if_exists="do_nothing")
        assert again["metadata"] == {"by": "a"}


def test_a_cancel_sent_to_another_server_stands(store: str) -> None:
    with (
        two_servers(store) as (a_url, b_url),
        get_sync_client(url=a_url, timeout=30) as a,
        get_sync_client(url=b_url, timeout=30) as b,
    ):
        tid = a.threads.create()["thread_id"]
        first = a.runs.create(tid, "slow", input={"seconds": 30})
        queued = a.runs.create(tid, "slow", input={"seconds": 0}, multitask_strategy="enqueue")
        b.runs.cancel(tid, queued["run_id"])
        a.runs.cancel(tid, first["run_id"], wait=True)
        assert a.runs.join(tid, queued["run_id"]).get("runs", []) == []
        assert a.runs.get(tid, queued["run_id"])["status"] == "interrupted"
        assert a.threads.get_state(tid)["values"].get("runs", []) == []
        short = a.runs.create(tid, "slow", input={"seconds": 1})
        while a.runs.get(tid, short["run_id"])["status"] != "running":
            pass  # until it runs on server a
        b.runs.cancel(tid, short["run_id"])
        assert a.runs.join(tid, short["run_id"])["runs"] == ["worked"]  # it ran to its end
        assert b.runs.get(tid, short["run_id"])["status"] == "interrupted"
