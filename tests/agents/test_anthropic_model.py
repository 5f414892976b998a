"""AnthropicChatModel against a real Messages API server on 127.0.0.1 (no internet, no key)."""

from __future__ import annotations

import logging
import sys
from typing import Any

import pytest
from anthropic_server import Answer, error, events_of, messages_server, reply, text, tool_use

from nodestep import (
    END,
    START,
    Graph,
    GraphConfigError,
    InMemoryStateStore,
    ModelError,
    RetryPolicy,
    create_react_agent,
    model_node,
    tool,
)
from nodestep.agents import (
    AnthropicChatModel,
    AssistantMessage,
    ChatModel,
    MessagesState,
    SystemMessage,
    TokenUsage,
    ToolCall,
    ToolMessage,
    UserMessage,
    retryable_model_error,
)
from nodestep.testing import FakeTime

pytest.importorskip("anthropic")
pytestmark = pytest.mark.anyio

KEY = "sk-ant-test-9f8e7d6c"
POLICY = RetryPolicy(attempts=3, backoff=1.0, jitter=0, retry_on=retryable_model_error)


@pytest.fixture
def anyio_backend() -> str:
    return "asyncio"  # the anthropic client's retries sleep on asyncio


@tool
def specs(topic: str) -> str:
    """Look up the specifications."""
    return "720 Watts" if topic == "rated_capacity" else "no match"


def _model(url: str, **options: Any) -> AnthropicChatModel:
    return AnthropicChatModel("claude-test", base_url=url, api_key=KEY, **options)


def _key_sent(request: dict[str, Any]) -> str | None:
    """The key a request carried, in whichever header the SDK puts it."""
    headers = {k.lower(): v for k, v in request["headers"].items()}
    if "x-api-key" in headers:
        return headers["x-api-key"]
    return headers.get("authorization", "").removeprefix("Bearer ") or None


# -- the request ---------------------------------------------------------------------


@pytest.mark.slow  # the first test of the module imports anthropic
async def test_complete_sends_the_system_prompt_tool_calls_and_results_in_the_messages_format():
    conversation = [
        SystemMessage(content="You answer from the specifications."),
        UserMessage(content="What is the max load?"),
        AssistantMessage(
            content="Let me look.",
            tool_calls=[
                ToolCall(name="specs", args={"topic": "rated_capacity"}, id="tu_1"),
                ToolCall(name="specs", args={"topic": "peak"}, id="tu_2"),
            ],
        ),
        ToolMessage(content="720 Watts", tool_call_id="tu_1", name="specs"),
        ToolMessage(content="no peak", tool_call_id="tu_2", name="specs", status="error"),
        UserMessage(content="In kW, please."),
    ]
    with messages_server() as server:
        server.answers.append(Answer(body=reply(text("0.72 kW."))))
        answer = await _model(server.url, temperature=0).complete(conversation, [specs.spec])
    assert answer == AssistantMessage(
        content="0.72 kW.",
        usage=TokenUsage(input_tokens=10, output_tokens=5),
        finish_reason="stop",
    )
    request = server.requests[0]
    assert request["path"] == "/v1/messages"
    assert _key_sent(request) == KEY
    body = request["body"]
    assert (body["model"], body["max_tokens"], body["temperature"]) == ("claude-test", 4096, 0)
    assert body["system"] == "You answer from the specifications."
    assert body["messages"] == [
        {"role": "user", "content": [{"type": "text", "text": "What is the max load?"}]},
        {
            "role": "assistant",
            "content": [
                {"type": "text", "text": "Let me look."},
                {
                    "type": "tool_use",
                    "id": "tu_1",
                    "name": "specs",
                    "input": {"topic": "rated_capacity"},
                },
                {"type": "tool_use", "id": "tu_2", "name": "specs", "input": {"topic": "peak"}},
            ],
        },
        {  # the two results and the user's next words: one user turn, as the API wants
            "role": "user",
            "content": [
                {"type": "tool_result", "tool_use_id": "tu_1", "content": "720 Watts"},
                {
                    "type": "tool_result",
                    "tool_use_id": "tu_2",
                    "content": "no peak",
                    "is_error": True,
                },
                {"type": "text", "text": "In kW, please."},
            ],
        },
    ]
    assert body["tools"] == [
        {
            "name": "specs",
            "description": "Look up the specifications.",
            "input_schema": specs.spec["parameters"],
        }
    ]
    assert "tool_choice" not in body and "stream" not in body


async def test_complete_reads_text_tool_calls_cached_input_and_the_stop_reason():
    with messages_server() as server:
        body = reply(
            text("Checking."),
            tool_use("tu_9", "specs", {"topic": "rated_capacity"}),
            stop_reason="tool_use",
            input_tokens=4,
            output_tokens=7,
            cache_read=30,
        )
        server.answers.append(Answer(body=body))
        answer = await _model(server.url).complete([UserMessage(content="max?")], [specs.spec])
    assert answer == AssistantMessage(
        content="Checking.",
        tool_calls=[ToolCall(name="specs", args={"topic": "rated_capacity"}, id="tu_9")],
        # the prompt's tokens count the ones read from the cache, which Anthropic counts apart
        usage=TokenUsage(input_tokens=34, output_tokens=7, total_tokens=41),
        finish_reason="tool_calls",
    )


@pytest.mark.parametrize(
    ("stop_reason", "finish_reason"),
    [
        ("end_turn", "stop"),
        ("stop_sequence", "stop"),
        ("max_tokens", "length"),
        ("refusal", "content_filter"),
        ("pause_turn", "pause_turn"),  # no common word for it: as Anthropic says it
    ],
)
async def test_a_stop_reason_becomes_the_finish_reason_other_providers_use(
    stop_reason: str, finish_reason: str
):
    with messages_server() as server:
        server.answers.append(Answer(body=reply(text("..."), stop_reason=stop_reason)))
        answer = await _model(server.url).complete([UserMessage(content="go on")])
    assert answer.finish_reason == finish_reason


@pytest.mark.parametrize(
    ("choice", "sent"),
    [
        ("auto", {"type": "auto"}),
        ("required", {"type": "any"}),
        ("none", {"type": "none"}),
        ("specs", {"type": "tool", "name": "specs"}),
        ({"type": "auto", "disable_parallel_tool_use": True}, None),  # Anthropic's own form
    ],
)
async def test_tool_choice_is_sent_in_anthropics_form(choice: Any, sent: Any):
    with messages_server() as server:
        server.answers.append(Answer(body=reply(text("ok"))))
        await _model(server.url).complete(
            [UserMessage(content="hi")], [specs.spec], tool_choice=choice
        )
    assert server.requests[0]["body"]["tool_choice"] == (sent or choice)


async def test_a_calls_tool_choice_wins_over_the_models_and_none_is_left_out_without_tools():
    with messages_server() as server:
        server.answers += [Answer(body=reply(text("ok"))), Answer(body=reply(text("ok")))]
        model = _model(server.url, tool_choice="required")
        await model.complete([UserMessage(content="hi")], [specs.spec], tool_choice="specs")
        await _model(server.url, tool_choice="auto").complete([UserMessage(content="hi")])
    assert server.requests[0]["body"]["tool_choice"] == {"type": "tool", "name": "specs"}
    assert "tool_choice" not in server.requests[1]["body"]


async def test_a_tool_choice_that_names_no_tool_is_refused_before_a_request():
    with messages_server() as server:
        model = _model(server.url)
        with pytest.raises(GraphConfigError) as caught:
            await model.complete([UserMessage(content="hi")], [specs.spec], tool_choice="search")
        with pytest.raises(GraphConfigError, match="no tools to call"):
            await model.complete([UserMessage(content="hi")], [], tool_choice="required")
    assert str(caught.value) == (
        "AnthropicChatModel 'claude-test' got tool_choice='search', which is neither 'auto', "
        "'required', 'none' nor a tool's name; the tools are 'specs'."
    )
    assert server.requests == []


# -- streaming and the ReAct agent ------------------------------------------------------


async def test_a_react_agent_streams_text_and_tool_input_deltas_and_calls_the_tool():
    first = reply(
        text("Let me look."),
        tool_use("tu_1", "specs", {"topic": "rated_capacity"}),
        stop_reason="tool_use",
        input_tokens=20,
        output_tokens=9,
    )
    second = reply(text("It is 720 W."), input_tokens=35, output_tokens=6)
    with messages_server() as server:
        server.answers += [Answer(events=events_of(first)), Answer(events=events_of(second))]
        agent = create_react_agent(
            _model(server.url), [specs], system="Be brief.", state_store=InMemoryStateStore()
        )
        events = [
            e
            async for e in agent.astream(
                {"messages": "max?"}, thread_id="t", stream_mode="messages"
            )
        ]
    assert all(r["body"]["stream"] is True for r in server.requests)
    assert all(r["body"]["system"] == "Be brief." for r in server.requests)
    pieces = [e.data for e in events if e.mode == "messages"]
    words = [(p.message_id, p.content) for p in pieces if p.content]
    assert words == [
        ("agent-2", "Let"),
        ("agent-2", " me"),
        ("agent-2", " look."),
        ("agent-4", "It"),
        ("agent-4", " is"),
        ("agent-4", " 720"),
        ("agent-4", " W."),
    ]
    calls = [c for p in pieces for c in p.tool_call_chunks]
    assert [(c.index, c.id, c.name) for c in calls] == [
        (0, "tu_1", "specs"),
        (0, None, None),
        (0, None, None),
    ]
    assert "".join(c.args for c in calls) == '{"topic": "rated_capacity"}'
    messages = events[-1].data.state.messages
    assert messages[1] == AssistantMessage(
        content="Let me look.",
        tool_calls=[ToolCall(name="specs", args={"topic": "rated_capacity"}, id="tu_1")],
        id="agent-2",
        model="claude-test",
        usage=TokenUsage(input_tokens=20, output_tokens=9),
        finish_reason="tool_calls",
    )
    assert (messages[2].content, messages[3].content) == ("720 Watts", "It is 720 W.")
    assert (messages[3].usage, messages[3].finish_reason) == (
        TokenUsage(input_tokens=35, output_tokens=6),
        "stop",
    )
    # the tool's result went back as a tool_result block of a user turn
    assert server.requests[1]["body"]["messages"][-1] == {
        "role": "user",
        "content": [{"type": "tool_result", "tool_use_id": "tu_1", "content": "720 Watts"}],
    }


async def test_a_react_agent_without_streaming_gets_the_same_reply():
    first = reply(tool_use("tu_1", "specs", {"topic": "rated_capacity"}), stop_reason="tool_use")
    with messages_server() as server:
        server.answers += [Answer(body=first), Answer(body=reply(text("720 W.")))]
        agent = create_react_agent(_model(server.url), [specs], stream=False)
        result = await agent.ainvoke({"messages": "max?"})
    assert "stream" not in server.requests[0]["body"]
    assert [m.content for m in result.state.messages] == ["max?", "", "720 Watts", "720 W."]
    assert result.state.messages[1].tool_calls[0].id == "tu_1"


async def test_a_stream_of_two_tool_calls_after_text_numbers_them_from_zero():
    both = reply(
        text("Two lookups."),
        tool_use("tu_1", "specs", {"topic": "a"}),
        tool_use("tu_2", "specs", {"topic": "b"}),
        stop_reason="tool_use",
    )
    with messages_server() as server:
        server.answers.append(Answer(events=events_of(both)))
        chunks = [c async for c in _model(server.url).stream([UserMessage(content="hi")])]
    starts = [c for chunk in chunks for c in chunk.tool_call_chunks if c.id]
    assert [(c.index, c.id) for c in starts] == [(0, "tu_1"), (1, "tu_2")]
    assert chunks[-1].finish_reason == "tool_calls" and chunks[-1].usage is not None


# -- errors and retries -------------------------------------------------------------------


async def test_an_overloaded_529_is_a_retryable_model_error_naming_the_status():
    with messages_server() as server:
        server.answers.append(error(529, "overloaded_error", "Overloaded"))
        with pytest.raises(
            ModelError, match=r"failed \(HTTP 529\).*retryable_model_error"
        ) as caught:
            await _model(server.url).complete([UserMessage(content="hi")])
    assert (caught.value.model, caught.value.status, caught.value.retryable) == (
        "claude-test",
        529,
        True,
    )
    assert len(server.requests) == 1  # the client's own retries are off


@pytest.mark.parametrize(
    ("status", "kind", "retryable"),
    [
        (400, "invalid_request_error", False),
        (401, "authentication_error", False),
        (404, "not_found_error", False),
        (429, "rate_limit_error", True),
        (500, "api_error", True),
    ],
)
async def test_an_http_error_is_a_model_error_retryable_only_when_it_may_pass(
    status: int, kind: str, retryable: bool
):
    with messages_server() as server:
        server.answers.append(error(status, kind, "no"))
        with pytest.raises(ModelError) as caught:
            await _model(server.url).complete([UserMessage(content="hi")])
    assert (caught.value.status, caught.value.retryable) == (status, retryable)
    if not retryable:
        assert str(caught.value).endswith(
            "Check the base URL, the model name, the key and the request."
        )


async def test_an_error_event_in_a_stream_is_a_model_error_with_the_status_its_type_means():
    started = events_of(reply(text("Partial answer")))[:4]
    overloaded = {"type": "error", "error": {"type": "overloaded_error", "message": "Overloaded"}}
    with messages_server() as server:
        server.answers.append(Answer(events=[*started, overloaded]))
        with pytest.raises(ModelError, match=r"HTTP 529") as caught:
            async for _ in _model(server.url).stream([UserMessage(content="hi")]):
                pass
    assert (caught.value.status, caught.value.retryable) == (529, True)


async def test_a_stream_cut_before_its_message_stop_is_a_retryable_model_error():
    cut = events_of(reply(tool_use("tu_1", "specs", {"topic": "rated_capacity"})))[:5]
    with messages_server() as server:
        server.answers.append(Answer(events=cut))
        with pytest.raises(ModelError, match="before the reply's message_stop") as caught:
            async for _ in _model(server.url).stream([UserMessage(content="hi")]):
                pass
    assert (caught.value.status, caught.value.retryable) == (None, True)


async def test_a_tool_call_whose_input_is_not_an_object_is_a_model_error():
    with messages_server() as server:
        server.answers.append(Answer(body=reply(tool_use("tu_1", "specs", ["x"]))))
        with pytest.raises(ModelError) as caught:
            await _model(server.url).complete([UserMessage(content="hi")], [specs.spec])
    assert str(caught.value) == (
        "Model 'claude-test' called tool 'specs' with the input ['x'], which is not a JSON "
        "object. A tool's arguments are an object of named values."
    )
    assert not caught.value.retryable


@pytest.mark.slow
async def test_a_request_past_its_timeout_is_a_retryable_model_error():
    with messages_server() as server:
        server.answers.append(Answer(delay=0.5, body=reply(text("late"))))
        with pytest.raises(ModelError, match="timed out") as caught:
            await _model(server.url, timeout=0.2).complete([UserMessage(content="hi")])
    assert (caught.value.status, caught.value.retryable) == (None, True)


@pytest.mark.slow
async def test_a_stream_that_stalls_past_the_timeout_is_a_retryable_model_error():
    events = events_of(reply(text("Partial answer")))
    with messages_server() as server:
        server.answers.append(Answer(events=events, pause_at=4, delay=0.5))
        pieces = []
        with pytest.raises(ModelError, match="timed out") as caught:
            async for chunk in _model(server.url, timeout=0.2).stream([UserMessage(content="hi")]):
                pieces.append(chunk.content)
    assert pieces == ["Partial"]  # what came before the stall
    assert (caught.value.status, caught.value.retryable) == (None, True)


async def test_a_refused_connection_is_a_retryable_model_error():
    with pytest.raises(ModelError) as caught:
        await _model("http://127.0.0.1:9").complete([UserMessage(content="hi")])
    assert (caught.value.status, caught.value.retryable) == (None, True)


async def test_the_clients_own_retries_try_a_529_again_when_asked_for():
    with messages_server() as server:
        busy = error(529, "overloaded_error", "Overloaded")
        busy.headers["retry-after-ms"] = "1"
        server.answers += [busy, Answer(body=reply(text("fine")))]
        answer = await _model(server.url, max_retries=2).complete([UserMessage(content="hi")])
    assert answer.content == "fine"
    assert len(server.requests) == 2


@pytest.mark.parametrize("stream", [False, True])
def test_a_model_nodes_retry_policy_retries_an_overloaded_answer(stream: bool):
    with messages_server() as server:
        answer = reply(text("fine"))
        done = Answer(events=events_of(answer)) if stream else Answer(body=answer)
        server.answers += [error(529, "overloaded_error", "Overloaded"), done]
        agent = model_node(_model(server.url), retry=POLICY, stream=stream)
        graph = _graph().flow(START >> agent, agent >> END)
        result = graph.invoke({"messages": ["hi"]}, thread_id="t")
    assert result.state.messages[-1].content == "fine"
    retried = [e.data for e in graph.history_sync("t").events if e.type == "task_retried"]
    assert [(r["attempt"], r["error"]) for r in retried] == [(1, "ModelError")]
    assert "HTTP 529" in retried[0]["message"]


def _graph() -> Graph[MessagesState]:
    fake = FakeTime()  # the policy's backoff waits on it, not on the wall clock
    return Graph(MessagesState, state_store=InMemoryStateStore(), clock=fake, sleep=fake.sleep)


# -- the model itself ----------------------------------------------------------------------


async def test_the_key_is_in_no_repr_error_or_log_line(caplog: pytest.LogCaptureFixture):
    caplog.set_level(logging.DEBUG)
    with messages_server() as server:
        server.answers += [
            Answer(body=reply(text("hi"))),
            error(401, "authentication_error", "bad key"),
        ]
        model = _model(server.url)
        await model.complete([UserMessage(content="hi")])
        with pytest.raises(ModelError) as caught:
            await model.complete([UserMessage(content="hi")])
    assert _key_sent(server.requests[0]) == KEY  # it was sent, so there was one to leak
    assert repr(model) == f"AnthropicChatModel('claude-test', base_url='{server.url}')"
    assert KEY not in str(caught.value) and KEY not in repr(caught.value)
    assert caplog.records  # the client logged the requests at DEBUG
    assert not [r for r in caplog.records if KEY in r.getMessage()]


async def test_the_key_comes_from_the_argument_or_the_environment(monkeypatch: pytest.MonkeyPatch):
    with messages_server() as server:
        server.answers += [Answer(body=reply(text("one"))), Answer(body=reply(text("two")))]
        monkeypatch.setenv("ANTHROPIC_API_KEY", "from-env")
        await AnthropicChatModel("m", base_url=server.url).complete([UserMessage(content="hi")])
        await _model(server.url).complete([UserMessage(content="hi")])
    assert [_key_sent(r) for r in server.requests] == ["from-env", KEY]


def test_anthropics_own_api_without_a_key_is_refused_when_the_model_is_made(
    monkeypatch: pytest.MonkeyPatch,
):
    monkeypatch.delenv("ANTHROPIC_API_KEY", raising=False)
    monkeypatch.delenv("ANTHROPIC_BASE_URL", raising=False)
    with pytest.raises(GraphConfigError) as caught:
        AnthropicChatModel("claude-test")
    assert str(caught.value) == (
        "AnthropicChatModel 'claude-test' has no API key: pass api_key=, or set the "
        "ANTHROPIC_API_KEY environment variable."
    )


def test_request_fields_the_model_fills_in_are_refused():
    with pytest.raises(GraphConfigError, match=r"got stream, system as request fields"):
        AnthropicChatModel("m", base_url="http://127.0.0.1:9", system="hi", stream=True)


@pytest.mark.parametrize("bound", [0, -5, 2.5, True])
def test_max_tokens_that_is_not_a_positive_whole_number_is_refused(bound: Any):
    with pytest.raises(GraphConfigError) as caught:
        AnthropicChatModel("m", base_url="http://127.0.0.1:9", max_tokens=bound)
    assert str(caught.value) == (
        f"AnthropicChatModel got max_tokens={bound!r}: it is the most tokens a reply may "
        f"have, a whole number of at least 1, e.g. max_tokens=4096."
    )


def test_a_missing_anthropic_package_names_the_extra(monkeypatch: pytest.MonkeyPatch):
    monkeypatch.setitem(sys.modules, "anthropic", None)
    with pytest.raises(GraphConfigError, match=r"pip install 'nodestep\[anthropic\]'"):
        AnthropicChatModel("m", base_url="http://127.0.0.1:9")


def test_the_anthropic_model_is_a_chat_model_with_its_provider_name():
    model = AnthropicChatModel("m", base_url="http://127.0.0.1:9")
    assert isinstance(model, ChatModel)
    assert model.provider == "anthropic"


def test_a_traced_call_counts_its_tokens_on_the_model_nodes_span_alone(
    monkeypatch: pytest.MonkeyPatch,
):
    sdk = pytest.importorskip("opentelemetry.sdk.trace")
    from opentelemetry import trace
    from opentelemetry.sdk.trace.export import SimpleSpanProcessor
    from opentelemetry.sdk.trace.export.in_memory_span_exporter import InMemorySpanExporter

    from nodestep.tracing import disable_tracing, enable_tracing

    exporter = InMemorySpanExporter()
    provider = sdk.TracerProvider()
    provider.add_span_processor(SimpleSpanProcessor(exporter))
    # The anthropic client traces through the global provider, when it traces at all.
    monkeypatch.setattr(trace, "get_tracer_provider", lambda: provider)
    enable_tracing(provider)
    try:
        with messages_server() as server:
            server.answers.append(
                Answer(body=reply(text("Hello"), input_tokens=12, output_tokens=2))
            )
            create_react_agent(_model(server.url), [specs], stream=False).invoke({"messages": "hi"})
    finally:
        disable_tracing()
    counted = [
        s for s in exporter.get_finished_spans() if "gen_ai.usage.input_tokens" in s.attributes
    ]
    assert [(s.name, s.attributes["gen_ai.provider.name"]) for s in counted] == [
        ("chat claude-test", "anthropic")
    ]
    assert (
        counted[0].attributes["gen_ai.usage.input_tokens"],
        counted[0].attributes["gen_ai.usage.output_tokens"],
    ) == (12, 2)


def test_tool_input_streamed_as_broken_json_fails_the_node_with_a_model_error():
    events = events_of(reply(tool_use("tu_1", "specs", {"topic": "x"}), stop_reason="tool_use"))
    for event in events:
        if event["type"] == "content_block_delta":
            event["delta"]["partial_json"] = '{"topic'  # both halves: '{"topic{"topic'
    with messages_server() as server:
        server.answers.append(Answer(events=events))
        agent = create_react_agent(_model(server.url), [specs])
        with pytest.raises(ModelError) as caught:
            agent.invoke({"messages": "hi"})
    assert str(caught.value).startswith(
        "Model 'claude-test' streamed tool call 0 of message 'agent-2' with name 'specs' and "
        "arguments '{\"topic{\"topic': a tool call needs a name and a JSON object of arguments."
    )


async def test_an_error_body_that_quotes_the_key_is_masked_in_the_error_and_its_cause():
    import traceback

    with messages_server() as server:
        server.answers += [
            error(429, "rate_limit_error", f"key {KEY} is over its limit"),
            error(401, "authentication_error", f"key x-api-key: {KEY.upper()} rejected"),
        ]
        model = _model(server.url)
        for status in (429, 401):
            with pytest.raises(ModelError) as caught:
                await model.complete([UserMessage(content="hi")])
            shown = "".join(traceback.format_exception(caught.value))
            assert caught.value.status == status
            assert "**********" in str(caught.value)
            assert KEY.lower() not in shown.lower()


def test_a_stored_retry_and_failure_never_hold_a_key_the_error_body_quotes():
    import json

    with messages_server() as server:
        server.answers += [
            error(429, "rate_limit_error", f"key {KEY} is over its limit"),
            error(401, "authentication_error", f"key {KEY} rejected"),
        ]
        chat = model_node(_model(server.url), stream=False, retry=POLICY)
        graph = _graph().flow(START >> chat, chat >> END)
        with pytest.raises(ModelError):
            graph.invoke({"messages": "hi"}, thread_id="t")
    events = graph.history_sync("t").events
    assert {e.type for e in events} >= {"task_retried", "run_failed"}
    assert not [e for e in events if KEY in json.dumps(e.data, default=str)]


@pytest.mark.parametrize(
    ("raw", "content_type", "retryable", "match"),
    [
        (b"<html><body>Welcome to nginx!</body></html>", "text/html", False, "not JSON"),
        (b'{"id": "msg_01", "type": "mess', "application/json", True, "does not parse"),
    ],
)
async def test_a_200_whose_body_is_not_the_apis_json_is_a_model_error(
    raw: bytes, content_type: str, retryable: bool, match: str
):
    with messages_server() as server:
        server.answers.append(Answer(raw=raw, content_type=content_type))
        with pytest.raises(ModelError, match=match) as caught:
            await _model(server.url).complete([UserMessage(content="hi")])
    assert str(caught.value).startswith(f"Model 'claude-test' at {server.url} answered HTTP 200")
    assert (caught.value.status, caught.value.retryable) == (200, retryable)


async def test_an_emoji_split_between_two_text_deltas_is_one_character_in_the_reply():
    events = events_of(reply(text("Hi \U0001f600!")))
    deltas = [e for e in events if e["type"] == "content_block_delta"]
    deltas[0]["delta"]["text"], deltas[1]["delta"]["text"] = "Hi \ud83d", "\ude00!"
    with messages_server() as server:
        server.answers.append(Answer(events=events))
        chat = model_node(_model(server.url))
        result = _graph().flow(START >> chat, chat >> END).invoke({"messages": "hi"}, thread_id="t")
    assert result.state.messages[-1].content == "Hi \U0001f600!"
