"""What a served Agent refuses, and that a refusal changes nothing: a message sent while
it waits for an answer (as ``agent.step(text)`` refuses it; the answer then goes on with
the input the paused node waits with), and an image it would not see."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path

import pytest
from starlette.testclient import TestClient

from nodestep import Agent, InMemoryStateStore, ScriptedModel, interrupt
from nodestep.serve import create_app

SPECS = """
kind: LLMNode
name: chat
nodes: [send]
---
kind: Node
name: send
func: mail.send
"""


def send(text: str) -> str:
    answer = interrupt(f"Send {text!r} to the customer?", id="approve")
    return f"Sent: {text}" if answer == "yes" else "Not sent."


@pytest.fixture
def http(tmp_path: Path) -> Iterator[TestClient]:
    (tmp_path / "chat.yaml").write_text(SPECS)
    model = ScriptedModel(["Your refund is on its way."])
    agent = Agent(tmp_path, start_node="chat", llm=model, functions={"mail.send": send})
    app = create_app({"mailer": agent}, store=InMemoryStateStore())
    with TestClient(app, base_url="http://127.0.0.1:2024") as client:
        yield client


def say(text: str) -> dict[str, object]:
    return {"assistant_id": "mailer", "input": {"messages": [{"type": "human", "content": text}]}}


def test_a_message_to_a_paused_agent_is_refused_and_keeps_the_paused_nodes_input(
    http: TestClient,
) -> None:
    tid = http.post("/threads", json={}).json()["thread_id"]
    http.post(f"/threads/{tid}/runs/wait", json=say("Draft the refund mail"))
    paused = http.get(f"/threads/{tid}/state").json()["values"]
    refused = http.post(f"/threads/{tid}/runs/wait", json=say("Hello?")).json()
    assert refused["__error__"]["error"] == "ResumeError"
    assert http.get(f"/threads/{tid}/state").json()["values"] == paused
    assert http.get(f"/threads/{tid}").json()["status"] == "interrupted"
    answer = {"assistant_id": "mailer", "command": {"resume": "yes"}}
    done = http.post(f"/threads/{tid}/runs/wait", json=answer).json()
    assert done["nodes"]["send"]["input"] == "Your refund is on its way."
    assert done["nodes"]["send"]["output"] == "Sent: Your refund is on its way."


def test_a_served_agent_refuses_an_image_it_would_not_see(http: TestClient) -> None:
    tid = http.post("/threads", json={}).json()["thread_id"]
    image = {"type": "image_url", "image_url": {"url": "data:image/png;base64,iVBORw0KGgo="}}
    content = [{"type": "text", "text": "Mail this picture"}, image]
    body = {
        "assistant_id": "mailer",
        "input": {"messages": [{"type": "human", "content": content}]},
    }
    answer = http.post(f"/threads/{tid}/runs/wait", json=body)
    assert answer.status_code == 422
    assert "'image_url'" in answer.json()["detail"]
