"""``command.update``, the ``events`` stream mode, and the features answered 501 by name."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path

import httpx
import pytest
from langgraph_sdk import get_sync_client
from langgraph_sdk.client import SyncLangGraphClient
from serve_process import running

pytestmark = pytest.mark.slow


@pytest.fixture(scope="module")
def url(tmp_path_factory: pytest.TempPathFactory) -> Iterator[str]:
    path = Path(tmp_path_factory.mktemp("serve")) / "threads.db"
    with running(f"sqlite:///{path}") as base:
        yield base


@pytest.fixture
def client(url: str) -> Iterator[SyncLangGraphClient]:
    with get_sync_client(url=url, timeout=30) as opened:
        yield opened


def test_a_command_update_with_resume_edits_the_state_then_answers_the_interrupt(
    client: SyncLangGraphClient,
) -> None:
    tid = client.threads.create()["thread_id"]
    client.runs.wait(tid, "approval", input={"request": "car"})
    done = client.runs.wait(
        tid, "approval", command={"resume": "fine", "update": {"request": "bike"}}
    )
    assert (done["request"], done["answer"], done["done"]) == ("bike", "fine", True)


def test_a_command_update_alone_edits_a_thread_and_is_the_input_of_a_new_one(
    client: SyncLangGraphClient,
) -> None:
    tid = client.threads.create()["thread_id"]
    first = client.runs.wait(tid, "steps", command={"update": {"n": 10}})
    assert first["log"] == ["one", "two", "three"] and first["n"] == 13
    edited = client.runs.wait(tid, "steps", command={"update": {"n": 0}})
    assert edited["n"] == 0 and edited["log"] == ["one", "two", "three"]
    history = client.threads.get_history(tid, limit=100)
    assert len(history) > 1


def test_a_command_goto_or_a_bad_update_is_a_422_naming_it(url: str) -> None:
    body = {"assistant_id": "steps", "command": {"goto": "two"}}
    answer = httpx.post(f"{url}/runs/wait", json=body)
    assert answer.status_code == 422 and "command.goto" in answer.json()["detail"]
    body = {"assistant_id": "steps", "command": {"update": [1]}}
    answer = httpx.post(f"{url}/runs/wait", json=body)
    assert answer.status_code == 422 and "command.update" in answer.json()["detail"]


def test_the_events_mode_sends_each_nodes_start_and_end_and_the_models_chunks(
    client: SyncLangGraphClient,
) -> None:
    tid = client.threads.create()["thread_id"]
    parts = list(client.runs.stream(tid, "steps", input={"n": 0}, stream_mode="events"))
    assert parts[0].event == "metadata"
    events = [(p.data["event"], p.data["name"]) for p in parts[1:]]
    assert {p.event for p in parts[1:]} == {"events"}
    assert events == [
        (kind, name)
        for name in ("one", "two", "three")
        for kind in ("on_chain_start", "on_chain_end")
    ]
    end = parts[2].data
    assert end["data"]["output"] == {"n": 1, "log": ["one"]}
    assert end["metadata"]["langgraph_node"] == "one"
    human = {"id": "h1", "type": "human", "content": "hi there"}
    chat = list(client.runs.stream(None, "chat", input={"messages": [human]}, stream_mode="events"))
    chunks = [
        p.data["data"]["chunk"]["content"]
        for p in chat[1:]
        if p.data["event"] == "on_chat_model_stream"
    ]
    assert "".join(chunks) == "echo: hi there"


def test_crons_and_assistant_changes_are_501_naming_the_feature(
    client: SyncLangGraphClient, url: str
) -> None:
    tid = client.threads.create()["thread_id"]
    with pytest.raises(httpx.HTTPStatusError) as refused:
        client.crons.create_for_thread(tid, "steps", schedule="* * * * *")
    assert refused.value.response.status_code == 501
    assert "Crons" in refused.value.response.json()["detail"]
    with pytest.raises(httpx.HTTPStatusError) as refused:
        client.assistants.update("steps", metadata={"v": 2})
    assert refused.value.response.status_code == 501
    assert "versioning" in refused.value.response.json()["detail"]
    missing = httpx.get(f"{url}/no/such/endpoint")
    assert missing.status_code == 404 and "/no/such/endpoint" in missing.json()["detail"]
    wrong = httpx.put(f"{url}/ok")
    assert wrong.status_code == 405 and "PUT" in wrong.json()["detail"]
