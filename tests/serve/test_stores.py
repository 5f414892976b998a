"""The server on each kind of store: a file, and PostgreSQL (skipped without a server)."""

from __future__ import annotations

from pathlib import Path

import pytest
from langgraph_sdk import get_sync_client
from serve_process import free_port, running, start, stop

from postgres_server import throwaway_database

pytestmark = pytest.mark.slow


def chat_and_pause(url: str) -> tuple[str, str]:
    """Run a chat turn and an interrupt on the server; return the two thread ids."""
    with get_sync_client(url=url, timeout=30) as client:
        chat = client.threads.create(metadata={"kind": "chat"})["thread_id"]
        human = {"id": "h1", "type": "human", "content": "hello"}
        values = client.runs.wait(chat, "chat", input={"messages": [human]})
        assert values["messages"][-1]["content"] == "echo: hello"
        paused = client.threads.create()["thread_id"]
        client.runs.wait(paused, "approval", input={"request": "leave"})
        return chat, paused


def test_threads_live_in_a_file_store_and_a_new_server_joins_an_ended_run(
    tmp_path: Path,
) -> None:
    store = f"file://{tmp_path / 'history.jsonl'}"
    with running(store) as url:
        chat, paused = chat_and_pause(url)
        with get_sync_client(url=url) as client:
            assert client.threads.get(paused)["status"] == "interrupted"
            run_id = client.runs.list(chat)[0]["run_id"]
    with running(store) as url, get_sync_client(url=url) as client:
        assert client.threads.get(chat)["status"] == "idle"
        joined = client.runs.join(chat, run_id)
        assert [m["content"] for m in joined["messages"]] == ["hello", "echo: hello"]


def test_threads_and_runs_live_in_postgresql_and_outlast_the_server() -> None:
    with throwaway_database() as dsn:
        port = free_port()
        first = start(dsn, port)
        try:
            chat, paused = chat_and_pause(f"http://127.0.0.1:{port}")
        finally:
            stop(first)
        second = start(dsn, port)
        try:
            with get_sync_client(url=f"http://127.0.0.1:{port}", timeout=30) as client:
                assert client.threads.get(paused)["status"] == "interrupted"
                found = client.threads.search(metadata={"kind": "chat"})
                assert [t["thread_id"] for t in found] == [chat]
                done = client.runs.wait(paused, "approval", command={"resume": "ok"})
                assert done["done"] is True
        finally:
            stop(second)
