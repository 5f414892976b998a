"""A served Agent (a specs folder): a chat client sends the user's messages and reads the
conversation as ``messages``; its LLMNodes stream tokens to a client of the ``messages``
mode, named as the reply the thread then holds."""

from __future__ import annotations

import json
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from served_agent import serving_agent
from starlette.testclient import TestClient
from test_app import BASE, new_thread, sse_events

from nodestep import Agent, InMemoryStateStore, ScriptedModel
from nodestep.serve import create_app


@pytest.fixture
def http(tmp_path: Path) -> Iterator[TestClient]:
    (tmp_path / "chat.yaml").write_text("kind: LLMNode\nname: chat\n")
    agent = Agent(tmp_path, start_node="chat", llm=ScriptedModel(["Hello there, Ada.", "Bye."]))
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


def test_a_chat_client_sends_messages_and_reads_the_conversation_as_messages(
    http: TestClient,
) -> None:
    tid = new_thread(http)
    hi = {"id": "h1", "type": "human", "content": [{"type": "text", "text": "hi"}]}
    body = {"assistant_id": "helper", "input": {"messages": [hi]}, "stream_mode": ["values"]}
    with http.stream("POST", f"/threads/{tid}/runs/stream", json=body) as answer:
        events = sse_events(answer.read().decode())
    values = [json.loads(data) for event, data in events if event == "values"]
    shown = [(m["type"], m["content"]) for m in values[-1]["messages"]]
    assert shown == [("human", "hi"), ("ai", "Hello there, Ada.")]
    assert values[-1]["messages"] == values[-1]["conversation_chat"]
    state = http.get(f"/threads/{tid}/state").json()["values"]
    assert state["messages"] == values[-1]["messages"]
    # The next message continues the conversation, as the agent's next step does.
    again = {"assistant_id": "helper", "input": {"messages": [{"role": "user", "content": "x"}]}}
    ended = http.post(f"/threads/{tid}/runs/wait", json=again).json()
    assert [m["type"] for m in ended["messages"]] == ["human", "ai", "human", "ai"]


@pytest.mark.parametrize(
    ("messages", "says"),
    [
        ([{"type": "ai", "content": "I said so"}], "got a message of type 'ai'"),
        ([{"type": "tool", "content": "42", "tool_call_id": "c"}], "of type 'tool'"),
        (["hi"], "got a str"),
        ([], "has no message: send the user's message"),
    ],
)
def test_a_served_agent_refuses_messages_that_are_not_the_users(
    http: TestClient, messages: list[object], says: str
) -> None:
    tid = new_thread(http)
    body = {"assistant_id": "helper", "input": {"messages": messages}}
    answer = http.post(f"/threads/{tid}/runs/wait", json=body)
    assert answer.status_code == 422
    assert says in answer.json()["detail"]
    assert http.get(f"/threads/{tid}/state").json()["values"] == {}  # nothing was run


@pytest.fixture
def served(tmp_path: Path) -> Iterator[str]:
    """``nodestep serve`` of an Agent, in a process of its own; yields its URL."""
    with serving_agent(tmp_path) as url:
        yield url


@pytest.mark.slow
def test_the_langgraph_sdk_chats_with_a_served_agent(served: str) -> None:
    from langgraph_sdk import get_sync_client

    with get_sync_client(url=served) as client:  # closed: no socket is left open
        thread = client.threads.create()
        parts = list(
            client.runs.stream(
                thread["thread_id"],
                "helper",
                input={"messages": [{"type": "human", "content": "who is user 7?"}]},
                stream_mode=["values", "messages-tuple"],
            )
        )
        state = client.threads.get_state(thread["thread_id"])
    tokens = [p.data[0]["content"] for p in parts if p.event == "messages"]
    assert "".join(tokens) == "User 7 is Ada."
    last = [p.data for p in parts if p.event == "values"][-1]
    assert [m["type"] for m in last["messages"]] == ["human", "ai", "tool", "ai"]
    assert last["messages"][1]["tool_calls"][0]["name"] == "get_user"
    assert last["messages"][2]["content"] == "Ada"
    assert state["values"]["messages"] == last["messages"]


def test_a_failed_served_run_is_recorded_in_the_nodes_and_the_next_message_works(
    tmp_path: Path,
) -> None:
    (tmp_path / "chat.yaml").write_text("kind: LLMNode\nname: chat\n")

    class Flaky(ScriptedModel):
        """Down for its first call, then the script."""

        down = True

        def _check(self) -> None:
            if self.down:
                self.down = False
                raise RuntimeError("model down for ctx-secret-9931")

        async def complete(self, messages: Any, tools: Any = (), tool_choice: Any = None) -> Any:
            self._check()
            return await super().complete(messages, tools, tool_choice)

        async def stream(self, messages: Any, tools: Any = (), tool_choice: Any = None) -> Any:
            self._check()
            async for chunk in super().stream(messages, tools, tool_choice):
                yield chunk

    agent = Agent(tmp_path, start_node="chat", llm=Flaky(["Back again."]))
    app = create_app({"helper": agent}, store=InMemoryStateStore())
    with TestClient(app, base_url=BASE) as http:
        tid = new_thread(http)
        hi = {"messages": [{"type": "human", "content": "hi"}]}
        body = {"assistant_id": "helper", "input": hi, "context": {"key": "ctx-secret-9931"}}
        failed = http.post(f"/threads/{tid}/runs/wait", json=body).json()
        assert failed["__error__"]["error"] == "RuntimeError"
        nodes = http.get(f"/threads/{tid}/state").json()["values"]["nodes"]
        assert nodes["chat"]["status"] == "failed"
        assert nodes["chat"]["error"] == "RuntimeError: model down for [context]"
        again = http.post(f"/threads/{tid}/runs/wait", json={**body, "context": {}}).json()
        assert [(m["type"], m["content"]) for m in again["messages"]] == [
            ("human", "hi"),
            ("ai", "Back again."),
        ]
        assert again["nodes"]["chat"]["status"] == "completed"


def test_the_first_values_event_of_a_turn_ends_with_the_users_message_as_stored(
    http: TestClient,
) -> None:
    tid = new_thread(http)
    for text in ("Hi, I am Ada.", "Bye!"):
        body = {
            "assistant_id": "helper",
            "input": {"messages": [{"type": "human", "content": text}]},
            "stream_mode": ["values"],
        }
        with http.stream("POST", f"/threads/{tid}/runs/stream", json=body) as answer:
            events = sse_events(answer.read().decode())
        first = json.loads(next(data for event, data in events if event == "values"))
        shown = first["messages"][-1]
        stored = http.get(f"/threads/{tid}/state").json()["values"]["messages"]
        assert (shown["type"], shown["content"]) == ("human", text)
        assert shown == next(m for m in stored if m["id"] == shown["id"])
