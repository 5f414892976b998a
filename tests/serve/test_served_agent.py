"""A served Agent (a specs folder): its LLMNodes stream tokens to a client of the
``messages`` mode, named as the reply the thread then holds."""

from __future__ import annotations

import json
from collections.abc import Iterator
from pathlib import Path

import pytest
from starlette.testclient import TestClient
from test_app import BASE, new_thread, sse_events

from nodestep import Agent, InMemoryStateStore, ScriptedModel
from nodestep.serve import create_app


@pytest.fixture
def http(tmp_path: Path) -> Iterator[TestClient]:
    (tmp_path / "chat.yaml").write_text("kind: LLMNode\nname: chat\n")
    agent = Agent(tmp_path, start_node="chat", llm=ScriptedModel(["Hello there, Ada."]))
    with TestClient(create_app({"helper": agent}, store=InMemoryStateStore()), base_url=BASE) as c:
        yield c


def _step_input(text: str) -> dict[str, object]:
    """The input of one step, as the agent's own step (and the sandbox's chat) sends it."""
    return {
        "inbox": {"input": {"to": "chat", "text": text}},
        "nodes": {"chat": {"kind": "LLMNode", "status": "running"}},
    }


def test_a_served_agent_streams_its_reply_token_by_token(http: TestClient) -> None:
    tid = new_thread(http)
    body = {
        "assistant_id": "helper",
        "input": _step_input("hi"),
        "context": {},
        "stream_mode": ["messages-tuple"],
    }
    with http.stream("POST", f"/threads/{tid}/runs/stream", json=body) as answer:
        events = sse_events(answer.read().decode())
    chunks = [json.loads(data) for event, data in events if event == "messages"]
    assert [chunk["content"] for chunk, _ in chunks] == ["Hello", " there,", " Ada."]
    assert {meta["langgraph_node"] for _, meta in chunks} == {"chat"}
    values = http.get(f"/threads/{tid}/state").json()["values"]
    (reply,) = [m for m in values["conversation_chat"] if m["type"] == "ai"]
    assert reply["content"] == "Hello there, Ada."
    assert {chunk["id"] for chunk, _ in chunks} == {reply["id"]}
