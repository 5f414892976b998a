"""The model node's retry policy (429/5xx through RetryPolicy) and its private conversation."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest
from chat_server import Answer, chat_server, completion
from hypothesis import given, settings
from hypothesis import strategies as st

from nodestep import (
    END,
    START,
    FilesystemStateStore,
    Graph,
    GraphConfigError,
    InMemoryStateStore,
    MessagesState,
    ModelError,
    RetryPolicy,
    ScriptedModel,
    ScriptedReply,
    create_react_agent,
    model_node,
    tool,
)
from nodestep.agents import (
    AssistantMessage,
    ModelMemory,
    OpenAIChatModel,
    RemoveMessage,
    UserMessage,
    retryable_model_error,
)
from nodestep.agents._model_memory import take_in
from nodestep.testing import FakeTime

pytest.importorskip("openai")

POLICY = RetryPolicy(attempts=3, backoff=1.0, jitter=0, retry_on=retryable_model_error)


def _graph(agent: Any, store: Any = None) -> Graph[MessagesState]:
    fake = FakeTime()
    g = Graph(
        MessagesState, state_store=store or InMemoryStateStore(), clock=fake, sleep=fake.sleep
    )
    return g.flow(START >> agent, agent >> END)


def _openai(url: str) -> OpenAIChatModel:
    return OpenAIChatModel("local-model", base_url=url, api_key="k")


@pytest.mark.slow  # a real server and the openai client
@pytest.mark.parametrize("stream", [False, True])
def test_a_429_then_200_is_one_task_retried_record_and_the_reply(stream: bool):
    with chat_server() as server:
        busy = Answer(429, {"error": {"message": "slow down"}})
        server.answers += [busy, completion("fine")] if not stream else [busy, completion("x")]
        if stream:
            from chat_server import chunk

            server.answers[1] = Answer(events=[chunk({"role": "assistant", "content": "fine"})])
        g = _graph(model_node(_openai(server.url), retry=POLICY, stream=stream))
        result = g.invoke({"messages": ["hi"]}, thread_id="t")
    assert result.state.messages[-1].content == "fine"
    assert len(server.requests) == 2  # the openai client's own retries are off
    retried = [e.data for e in g.history_sync("t").events if e.type == "task_retried"]
    assert [(r["attempt"], r["error"]) for r in retried] == [(1, "ModelError")]
    assert "HTTP 429" in retried[0]["message"]


def test_a_400_is_not_retried_and_fails_the_run_with_its_status():
    with chat_server() as server:
        server.answers.append(Answer(400, {"error": {"message": "bad request"}}))
        g = _graph(model_node(_openai(server.url), retry=POLICY, stream=False))
        with pytest.raises(ModelError, match="HTTP 400") as caught:
            g.invoke({"messages": ["hi"]}, thread_id="t")
    assert (caught.value.status, caught.value.retryable) == (400, False)
    assert len(server.requests) == 1
    assert not [e for e in g.history_sync("t").events if e.type == "task_retried"]


def test_without_a_policy_a_429_fails_at_once_marked_retryable():
    with chat_server() as server:
        server.answers.append(Answer(429, {"error": {"message": "slow down"}}))
        with pytest.raises(ModelError) as caught:
            g = _graph(model_node(_openai(server.url), stream=False))
            g.invoke({"messages": ["hi"]}, thread_id="t")
    assert (caught.value.status, caught.value.retryable) == (429, True)
    assert len(server.requests) == 1


def test_an_unreachable_server_is_retryable_and_the_last_attempt_fails_the_run():
    g = _graph(model_node(_openai("http://127.0.0.1:9/v1"), retry=POLICY, stream=False))
    with pytest.raises(ModelError) as caught:
        g.invoke({"messages": ["hi"]}, thread_id="t")
    assert caught.value.retryable and caught.value.status is None
    assert len([e for e in g.history_sync("t").events if e.type == "task_retried"]) == 2


def test_retryable_model_error_retries_only_model_errors_marked_so():
    assert retryable_model_error(ModelError("x", status=503, retryable=True))
    assert not retryable_model_error(ModelError("x", status=401))
    assert not retryable_model_error(ConnectionError("x"))


def test_the_react_agent_passes_the_policy_to_its_model_node():
    agent = create_react_agent(ScriptedModel(["hi"]), [_echo], retry=POLICY)
    assert agent.nodes["agent"].retry is POLICY


@tool
def _echo(text: str) -> str:
    """Say it back."""
    return text


def _private_graph(store: Any, script: list[Any]) -> Graph[MessagesState]:
    agent = model_node(ScriptedModel(script), conversation="private")
    return _graph(agent, store)


def test_a_private_conversation_survives_a_restart_of_the_file_store(tmp_path: Path):
    script = ["Hello Alice.", ScriptedReply("You are Alice.", expect="my name")]
    first = _private_graph(FilesystemStateStore(tmp_path / "history.jsonl"), script)
    first.invoke({"messages": ["I am Alice."]}, thread_id="t")
    # A new graph and store on the same directory: the process restarted.
    again = _private_graph(FilesystemStateStore(tmp_path / "history.jsonl"), script)
    result = again.invoke({"messages": ["What is my name?"]}, thread_id="t")
    assert result.state.messages[-1].content == "You are Alice."
    memory = again.node_state_sync("t", "agent")
    assert isinstance(memory, ModelMemory)
    assert [m.content for m in memory.messages] == [
        "I am Alice.",
        "Hello Alice.",
        "What is my name?",
        "You are Alice.",
    ]


def test_a_private_conversation_keeps_what_the_shared_state_dropped():
    script = ["one", ScriptedReply("two", expect="second")]
    g = _private_graph(InMemoryStateStore(), script)
    first = g.invoke({"messages": ["first"]}, thread_id="t")
    removals = [RemoveMessage(id=m.id) for m in first.state.messages]
    g.update_state_sync("t", {"messages": removals})
    result = g.invoke({"messages": ["second"]}, thread_id="t")
    assert [m.content for m in result.state.messages] == ["second", "two"]
    memory = g.node_state_sync("t", "agent")
    assert [m.content for m in memory.messages] == ["first", "one", "second", "two"]


def test_the_shared_state_default_sends_the_shared_messages():
    model = ScriptedModel(["one", "two"])
    g = _graph(model_node(model), InMemoryStateStore())
    g.invoke({"messages": ["first"]}, thread_id="t")
    g.invoke({"messages": ["second"]}, thread_id="t")
    assert [m.content for m in model.calls[-1]] == ["first", "one", "second"]
    with pytest.raises(GraphConfigError, match="no private state"):
        g.node_state_sync("t", "agent")


def test_an_unknown_conversation_choice_names_the_two():
    with pytest.raises(GraphConfigError, match=r"conversation='shared'.*'state'.*'private'"):
        model_node(ScriptedModel([]), conversation="shared")  # type: ignore[arg-type]


def test_a_user_message_object_is_taken_in_once():
    model = ScriptedModel(["one", "two"])
    g = _graph(model_node(model, conversation="private"), InMemoryStateStore())
    g.invoke({"messages": [UserMessage(content="a")]}, thread_id="t")
    g.invoke({"messages": [UserMessage(content="b")]}, thread_id="t")
    assert [m.content for m in model.calls[-1]] == ["a", "one", "b"]


def test_a_retry_policy_retries_a_retryable_model_error_and_no_other_of_nodesteps():
    default = RetryPolicy()
    assert default.retries(ModelError("busy", status=429, retryable=True))
    assert not default.retries(ModelError("bad key", status=401))
    assert not default.retries(GraphConfigError("bad graph"))


@pytest.mark.slow
@settings(max_examples=60, deadline=None)
@given(st.lists(st.lists(st.sampled_from(["a", "b", "a"]), max_size=3), max_size=5))
def test_taking_in_appended_messages_mirrors_the_shared_conversation(turns: list[list[str]]):
    memory, shared = ModelMemory(), []
    for n, texts in enumerate(turns):
        shared.extend(UserMessage(content=t, id=f"msg-{n}-{i}") for i, t in enumerate(texts))
        take_in(memory, shared)
        assert memory.messages == shared
        reply = AssistantMessage(content=f"reply {n}", id=f"agent-{n}")
        memory.messages.append(reply)
        shared.append(reply)
