"""OpenAIChatModel against a real chat-completions server on 127.0.0.1 (no internet, no key)."""

from __future__ import annotations

import sys

import pytest
from chat_server import Answer, chat_server, chunk, completion

from nodestep import (
    GraphConfigError,
    InMemoryStateStore,
    ModelError,
    ScriptedModel,
    create_react_agent,
    tool,
)
from nodestep.agents import (
    AssistantMessage,
    OpenAIChatModel,
    TokenUsage,
    ToolCall,
    ToolMessage,
    UserMessage,
)
from nodestep.agents._models import assemble

pytest.importorskip("openai")
pytestmark = pytest.mark.anyio


@pytest.fixture
def anyio_backend() -> str:
    return "asyncio"  # the openai client's retries sleep on asyncio


@tool
def specs(topic: str) -> str:
    """Look up the specifications."""
    return "720 Watts" if topic == "rated_capacity" else "no match"


def _model(url: str, **options) -> OpenAIChatModel:
    return OpenAIChatModel("local-model", base_url=url, api_key="test-key", **options)


@pytest.mark.slow  # the first test of the module imports openai
async def test_complete_sends_the_conversation_and_tools_in_the_wire_format():
    with chat_server() as server:
        server.answers.append(completion("Hello!"))
        model = _model(server.url, temperature=0)
        conversation = [
            UserMessage(content="hi"),
            AssistantMessage(
                content="", tool_calls=[ToolCall(name="specs", args={"topic": "x"}, id="c1")]
            ),
            ToolMessage(content="no match", tool_call_id="c1", name="specs"),
        ]
        reply = await model.complete(conversation, [specs.spec])
    assert reply == AssistantMessage(content="Hello!", finish_reason="stop")
    request = server.requests[0]
    assert request["path"] == "/v1/chat/completions"
    assert request["auth"] == "Bearer test-key"
    body = request["body"]
    assert (body["model"], body["temperature"]) == ("local-model", 0)
    assert body["messages"] == [
        {"role": "user", "content": "hi"},
        {
            "role": "assistant",
            "content": None,
            "tool_calls": [
                {
                    "id": "c1",
                    "type": "function",
                    "function": {"name": "specs", "arguments": '{"topic":"x"}'},
                }
            ],
        },
        {"role": "tool", "tool_call_id": "c1", "content": "no match"},
    ]
    assert body["tools"] == [{"type": "function", "function": specs.spec}]


async def test_complete_reads_tool_calls():
    with chat_server() as server:
        server.answers.append(
            completion(
                tool_calls=[
                    {"id": "c9", "name": "specs", "arguments": '{"topic": "rated_capacity"}'}
                ]
            )
        )
        reply = await _model(server.url).complete([UserMessage(content="max?")], [specs.spec])
    assert reply.tool_calls == (ToolCall(name="specs", args={"topic": "rated_capacity"}, id="c9"),)


def _streamed_tool_call() -> list[dict]:
    return [
        chunk({"role": "assistant", "content": "Let"}),
        chunk({"content": " me look."}),
        chunk(
            {
                "tool_calls": [
                    {
                        "index": 0,
                        "id": "c1",
                        "type": "function",
                        "function": {"name": "specs", "arguments": ""},
                    }
                ]
            }
        ),
        chunk({"tool_calls": [{"index": 0, "function": {"arguments": '{"topic": '}}]}),
        chunk({"tool_calls": [{"index": 0, "function": {"arguments": '"rated_capacity"}'}}]}),
    ]


async def test_an_agent_streams_tokens_and_tool_call_deltas_from_the_server():
    with chat_server() as server:
        server.answers.append(Answer(events=_streamed_tool_call()))
        usage_only = {
            **chunk({}),
            "choices": [],
            "usage": {"prompt_tokens": 9, "total_tokens": 11, "completion_tokens": 2},
        }
        server.answers.append(
            Answer(events=[chunk({"content": "720"}), chunk({"content": " W."}), usage_only])
        )
        graph = create_react_agent(_model(server.url), [specs], state_store=InMemoryStateStore())
        events = [
            e
            async for e in graph.astream(
                {"messages": "max?"}, thread_id="t", stream_mode="messages"
            )
        ]
    assert all(r["body"]["stream"] is True for r in server.requests)
    tokens = [(e.node, e.data.message_id, e.data.content) for e in events if e.mode == "messages"]
    assert tokens[:2] == [("agent", "agent-2", "Let"), ("agent", "agent-2", " me look.")]
    assert tokens[-2:] == [("agent", "agent-4", "720"), ("agent", "agent-4", " W.")]
    messages = events[-1].data.state.messages
    assert messages[1] == AssistantMessage(
        content="Let me look.",
        tool_calls=[ToolCall(name="specs", args={"topic": "rated_capacity"}, id="c1")],
        id="agent-2",
        model="local-model",
    )
    assert (messages[2].content, messages[3].content) == ("720 Watts", "720 W.")
    # the usage the server sent in its last chunk, without choices
    assert messages[3].usage == TokenUsage(input_tokens=9, output_tokens=2, total_tokens=11)
    # the tool result went back to the server in the second request
    assert server.requests[1]["body"]["messages"][-1] == {
        "role": "tool",
        "tool_call_id": "c1",
        "content": "720 Watts",
    }


async def test_a_429_is_tried_again_and_then_succeeds():
    with chat_server() as server:
        busy = Answer(429, {"error": {"message": "slow down"}}, headers={"retry-after-ms": "1"})
        server.answers += [busy, completion("fine")]
        reply = await _model(server.url, max_retries=2).complete([UserMessage(content="hi")])
    assert reply.content == "fine"
    assert len(server.requests) == 2


async def test_a_server_error_after_the_retries_is_a_model_error_naming_the_status():
    with chat_server() as server:
        down = Answer(500, {"error": {"message": "down"}}, headers={"retry-after-ms": "1"})
        server.answers += [down, down]
        with pytest.raises(
            ModelError, match=r"failed \(HTTP 500\).*retryable_model_error"
        ) as caught:
            await _model(server.url, max_retries=1).complete([UserMessage(content="hi")])
    assert (caught.value.model, caught.value.status, caught.value.retryable) == (
        "local-model",
        500,
        True,
    )
    assert len(server.requests) == 2


@pytest.mark.parametrize(
    ("status", "retryable"), [(400, False), (401, False), (408, True), (429, True), (503, True)]
)
async def test_an_http_error_is_a_model_error_retryable_only_when_it_may_pass(status, retryable):
    with chat_server() as server:
        server.answers.append(Answer(status, {"error": {"message": "no"}}))
        with pytest.raises(ModelError, match=rf"failed \(HTTP {status}\)") as caught:
            await _model(server.url).complete([UserMessage(content="hi")])
    assert (caught.value.status, caught.value.retryable) == (status, retryable)


async def test_arguments_that_are_not_json_are_a_model_error():
    with chat_server() as server:
        server.answers.append(
            completion(tool_calls=[{"id": "c1", "name": "specs", "arguments": "{oops"}])
        )
        with pytest.raises(ModelError, match="not a JSON object"):
            await _model(server.url).complete([UserMessage(content="hi")])


def test_a_missing_openai_package_names_the_extra(monkeypatch):
    monkeypatch.setitem(sys.modules, "openai", None)
    with pytest.raises(GraphConfigError, match=r"pip install 'nodestep\[openai\]'"):
        OpenAIChatModel("m")


def test_the_scripted_and_openai_models_are_chat_models():
    from nodestep.agents import ChatModel

    assert isinstance(ScriptedModel([]), ChatModel)
    assert isinstance(OpenAIChatModel("m", base_url="http://127.0.0.1:9/v1"), ChatModel)


async def test_the_key_comes_from_the_environment_or_is_none_for_a_local_server(monkeypatch):
    with chat_server() as server:
        server.answers += [completion("one"), completion("two")]
        monkeypatch.setenv("OPENAI_API_KEY", "from-env")
        await OpenAIChatModel("m", base_url=server.url).complete([UserMessage(content="hi")])
        monkeypatch.delenv("OPENAI_API_KEY")
        await OpenAIChatModel("m", base_url=server.url).complete([UserMessage(content="hi")])
    assert [r["auth"] for r in server.requests] == ["Bearer from-env", "Bearer none"]


@pytest.mark.slow
async def test_a_request_past_its_timeout_is_a_model_error():
    with chat_server() as server:
        server.answers.append(Answer(delay=0.5, body=completion("late").body))
        model = _model(server.url, timeout=0.2, max_retries=0)
        with pytest.raises(ModelError, match="timed out"):
            await model.complete([UserMessage(content="hi")])


def _two_choices() -> Answer:
    answer = completion("First.")
    assert answer.body is not None
    second = {**answer.body["choices"][0], "index": 1}
    second["message"] = {"role": "assistant", "content": "Second."}
    answer.body["choices"].append(second)
    return answer


async def test_a_reply_with_two_choices_is_refused_not_cut_to_the_first():
    with chat_server() as server:
        server.answers.append(_two_choices())
        model = _model(server.url)
        with pytest.raises(ModelError) as caught:
            await model.complete([UserMessage(content="hi")])
    assert str(caught.value) == (
        f"Model 'local-model' at {server.url}/ replied with 2 choices, but a model node takes "
        f"one reply. The request asked for one (no n=): set the server to send one choice "
        f"per request."
    )
    assert "n" not in server.requests[0]["body"]


async def test_a_stream_with_a_second_choice_is_refused():
    second = chunk({"content": "Second."})
    second["choices"][0]["index"] = 1
    with chat_server() as server:
        server.answers.append(Answer(events=[chunk({"content": "First."}), second]))
        model = _model(server.url)
        with pytest.raises(ModelError, match="replied with 2 choices"):
            async for _ in model.stream([UserMessage(content="hi")]):
                pass


def test_n_other_than_one_is_refused_when_the_model_is_made():
    with pytest.raises(GraphConfigError) as caught:
        _model("http://127.0.0.1:9/v1", n=2)
    assert str(caught.value).startswith(
        "OpenAIChatModel got n=2: a model node takes one reply per call"
    )
    assert _model("http://127.0.0.1:9/v1", n=1).params == {"n": 1}


async def test_a_stream_cut_before_its_finish_reason_and_done_is_a_retryable_model_error():
    with chat_server() as server:
        server.answers.append(Answer(events=[chunk({"content": "Do NOT"})], cut=True))
        with pytest.raises(ModelError) as caught:
            async for _ in _model(server.url).stream([UserMessage(content="hi")]):
                pass
    assert str(caught.value) == (
        f"Model 'local-model' at {server.url}/ ended its stream before the reply's "
        f"finish_reason and its 'data: [DONE]': the connection was cut. It may pass on: "
        f"retry it with RetryPolicy(retry_on=retryable_model_error)."
    )
    assert (caught.value.status, caught.value.retryable) == (None, True)


async def test_a_stream_with_a_finish_reason_or_done_is_whole():
    finished = chunk({"content": "Fine."})
    finished["choices"][0]["finish_reason"] = "stop"
    with chat_server() as server:
        server.answers += [
            Answer(events=[finished], cut=True),  # a server that sends no [DONE]
            Answer(events=[chunk({"content": "Fine."})]),  # [DONE] without a finish_reason
        ]
        for reason in ("stop", None):
            pieces = [c async for c in _model(server.url).stream([UserMessage(content="hi")])]
            assert (pieces[-1].content, pieces[-1].finish_reason) == ("Fine.", reason)


async def test_a_server_that_answers_a_stream_with_one_json_reply_has_it_taken():
    answer = completion(
        "Let me look.", tool_calls=[{"id": "c1", "name": "specs", "arguments": '{"topic": "x"}'}]
    )
    assert answer.body is not None
    answer.body["usage"] = {"prompt_tokens": 9, "completion_tokens": 7, "total_tokens": 16}
    with chat_server() as server:
        server.answers += [answer, answer]
        model = _model(server.url)
        whole = await model.complete([UserMessage(content="hi")], [specs.spec])
        chunks = [c async for c in model.stream([UserMessage(content="hi")], [specs.spec])]
    assert assemble(chunks, message_id="") == whole.model_copy(update={"id": ""})
    assert whole.content == "Let me look." and whole.usage is not None


@pytest.mark.parametrize(
    ("raw", "content_type", "retryable", "match"),
    [
        (b"<html><body>Welcome to nginx!</body></html>", "text/html", False, "not JSON"),
        (b'{"id": "c1", "object": "chat.comp', "application/json", True, "does not parse"),
    ],
)
@pytest.mark.parametrize("stream", [False, True])
async def test_a_200_whose_body_is_not_the_apis_json_is_a_model_error(
    raw: bytes, content_type: str, retryable: bool, match: str, stream: bool
):
    with chat_server() as server:
        server.answers.append(Answer(raw=raw, content_type=content_type))
        model = _model(server.url)
        with pytest.raises(ModelError, match=match) as caught:
            if stream:
                async for _ in model.stream([UserMessage(content="hi")]):
                    pass
            else:
                await model.complete([UserMessage(content="hi")])
    assert str(caught.value).startswith(f"Model 'local-model' at {server.url}/ answered HTTP 200")
    assert (caught.value.status, caught.value.retryable) == (200, retryable)


async def test_an_error_body_that_quotes_the_key_is_masked_in_the_error_and_its_cause():
    import traceback

    quoted = {"error": {"message": "Incorrect API key provided: Bearer test-key."}}
    with chat_server() as server:
        server.answers += [Answer(401, quoted), Answer(401, quoted)]
        model = _model(server.url)
        for call in ("complete", "stream"):
            with pytest.raises(ModelError) as caught:
                if call == "stream":
                    async for _ in model.stream([UserMessage(content="hi")]):
                        pass
                else:
                    await model.complete([UserMessage(content="hi")])
            assert "Bearer **********." in str(caught.value)
            assert "test-key" not in "".join(traceback.format_exception(caught.value))


async def test_an_emoji_split_between_two_chunks_is_one_character_and_a_lone_half_is_fffd():
    with chat_server() as server:
        server.answers += [
            Answer(events=[chunk({"content": "Hi \ud83d"}), chunk({"content": "\ude00!"})]),
            Answer(events=[chunk({"content": "Cut \ud83d"})]),
        ]
        graph = create_react_agent(_model(server.url), [], state_store=InMemoryStateStore())
        first = await graph.ainvoke({"messages": "hi"}, thread_id="t")
        second = await graph.ainvoke({"messages": "again"}, thread_id="t")
    assert first.state.messages[-1].content == "Hi \U0001f600!"
    assert second.state.messages[-1].content == "Cut \ufffd"
