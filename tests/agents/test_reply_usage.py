"""Token usage and finish_reason on replies, and the GenAI spans of model and tool calls."""

from __future__ import annotations

from typing import Any

import anyio
import pytest
from chat_server import Answer, chat_server, completion
from hypothesis import given
from hypothesis import strategies as st

from nodestep import InMemoryStateStore, ModelError, ScriptedModel, create_react_agent, tool
from nodestep.agents import (
    AssistantMessage,
    OpenAIChatModel,
    ScriptedReply,
    TokenUsage,
    ToolCall,
    UserMessage,
)
from nodestep.state import to_json_value
from span_capture import by_name

otel_sdk = pytest.importorskip("opentelemetry.sdk.trace")  # the module is skipped without it
from opentelemetry import trace  # noqa: E402  (after the skip)
from opentelemetry.sdk.trace.export.in_memory_span_exporter import (  # noqa: E402
    InMemorySpanExporter,
)


@tool
def stock(item: str) -> int:
    """Return how many of the item are in stock."""
    return 12


@tool
def broken(item: str) -> int:
    """Fail."""
    raise LookupError(f"no {item}")


def _with_usage(answer: Answer, reason: str, prompt: int, completion: int) -> Answer:
    assert answer.body is not None
    answer.body["choices"][0]["finish_reason"] = reason
    answer.body["usage"] = {
        "prompt_tokens": prompt,
        "completion_tokens": completion,
        "total_tokens": prompt + completion,
    }
    return answer


# -- the replies ----------------------------------------------------------------------


@pytest.mark.slow  # the first test of the module imports openai
def test_an_openai_reply_carries_the_servers_usage_and_finish_reason() -> None:
    with chat_server() as server:
        server.answers.append(_with_usage(completion("Cut off"), "length", 31, 4))
        model = OpenAIChatModel("local-model", base_url=server.url, api_key="k")
        reply = anyio.run(model.complete, [UserMessage(content="Tell me everything")])
    assert reply.usage == TokenUsage(input_tokens=31, output_tokens=4, total_tokens=35)
    assert reply.finish_reason == "length"


def test_an_openai_reply_without_usage_has_none() -> None:
    with chat_server() as server:
        server.answers.append(completion("Hi"))
        model = OpenAIChatModel("local-model", base_url=server.url, api_key="k")
        reply = anyio.run(model.complete, [UserMessage(content="Hi")])
    assert (reply.usage, reply.finish_reason) == (None, "stop")


def test_a_streamed_openai_request_asks_for_the_usage() -> None:
    with chat_server() as server:
        server.answers.append(Answer(events=[]))
        model = OpenAIChatModel("local-model", base_url=server.url, api_key="k")
        agent = create_react_agent(model, [stock], stream=True)
        agent.invoke({"messages": "hi"})
    assert server.requests[0]["body"]["stream_options"] == {"include_usage": True}


def test_stream_options_none_leaves_the_field_out_for_a_server_that_refuses_it() -> None:
    with chat_server() as server:
        server.answers.append(Answer(events=[]))
        model = OpenAIChatModel("m", base_url=server.url, api_key="k", stream_options=None)
        create_react_agent(model, [stock]).invoke({"messages": "hi"})
    assert "stream_options" not in server.requests[0]["body"]


def test_the_scripted_model_counts_words_unless_the_script_gives_the_usage() -> None:
    model = ScriptedModel(
        [
            ScriptedReply(tool_calls=[("stock", {"item": "tea"})]),
            ScriptedReply("Twelve.", usage=(500, 3), finish_reason="length"),
        ]
    )
    first = anyio.run(model.complete, [UserMessage(content="how much tea is left")])
    assert first.usage == TokenUsage(input_tokens=5, output_tokens=2)
    assert first.finish_reason == "tool_calls"
    second = anyio.run(model.complete, [UserMessage(content="how much tea is left"), first])
    assert second.usage == TokenUsage(input_tokens=500, output_tokens=3, total_tokens=503)
    assert second.finish_reason == "length"


def test_the_scripted_word_count_of_a_long_conversation_matches_a_fresh_count() -> None:
    # The model counts a conversation from the one it saw before; a fresh model counts
    # it whole. Both must agree.
    script = [f"reply number {n}" for n in range(6)]
    kept, fresh = ScriptedModel(script), None
    talk: list[Any] = []
    for n in range(6):
        talk.append(UserMessage(content=f"question {n} has five words"))
        reply = anyio.run(kept.complete, list(talk))
        fresh = ScriptedModel(script)
        assert anyio.run(fresh.complete, list(talk)).usage == reply.usage
        talk.append(reply)


def test_a_model_node_stores_the_model_name_usage_and_reason_with_the_reply() -> None:
    model = ScriptedModel(["It is 12."], name="small-model")
    agent = create_react_agent(model, [stock], state_store=InMemoryStateStore())
    agent.invoke({"messages": "stock?"}, thread_id="t")
    stored = agent.load_sync("t")["messages"][-1]
    assert stored.model == "small-model"
    assert stored.usage == TokenUsage(input_tokens=1, output_tokens=3)
    assert stored.finish_reason == "stop"


def test_a_message_stored_before_usage_existed_still_loads() -> None:
    old = {"role": "assistant", "content": "hi", "tool_calls": [], "id": "agent-2"}
    message = AssistantMessage.model_validate(old)
    assert (message.model, message.usage, message.finish_reason) == (None, None, None)


@given(
    st.integers(0, 2**40),
    st.integers(0, 2**40),
    st.one_of(st.none(), st.sampled_from(["stop", "length", "tool_calls"])),
)
def test_usage_and_finish_reason_survive_a_json_round_trip(
    inputs: int, outputs: int, reason: str | None
) -> None:
    message = AssistantMessage(
        content="x",
        tool_calls=(ToolCall(name="t", args={}, id="c"),),
        model="m",
        usage=TokenUsage(input_tokens=inputs, output_tokens=outputs),
        finish_reason=reason,
    )
    assert AssistantMessage.model_validate(to_json_value(message)) == message
    assert message.usage is not None and message.usage.total_tokens == inputs + outputs


def test_a_negative_token_count_is_refused() -> None:
    with pytest.raises(ValueError, match="input_tokens"):
        TokenUsage(input_tokens=-1)


# -- the spans -----------------------------------------------------------------------


def test_a_react_run_has_genai_model_spans_with_token_counts_inside_their_node_spans(
    spans: InMemorySpanExporter,
) -> None:
    model = ScriptedModel(
        [ScriptedReply(tool_calls=[("stock", {"item": "tea"})], usage=(40, 7)), "We have 12."],
        name="small-model",
    )
    agent = create_react_agent(model, [stock], state_store=InMemoryStateStore())
    agent.invoke({"messages": "how much tea is left"}, thread_id="t")
    named = by_name(spans)
    chats = sorted(named["chat small-model"], key=lambda s: s.start_time)
    assert len(chats) == 2
    first = dict(chats[0].attributes)
    assert first == {
        "gen_ai.operation.name": "chat",
        "gen_ai.request.model": "small-model",
        "gen_ai.response.model": "small-model",
        "gen_ai.provider.name": "nodestep.scripted",
        "gen_ai.system": "nodestep.scripted",
        "gen_ai.usage.input_tokens": 40,
        "gen_ai.usage.output_tokens": 7,
        "gen_ai.response.finish_reasons": ("tool_calls",),
        "nodestep.streamed": True,
    }
    assert chats[0].kind == trace.SpanKind.CLIENT
    assert dict(chats[1].attributes)["gen_ai.response.finish_reasons"] == ("stop",)
    nodes = {s.context.span_id: s for s in named["nodestep.node agent"]}
    for chat in chats:
        assert chat.parent.span_id in nodes
    tool_span = named["execute_tool stock"][0]
    assert dict(tool_span.attributes) == {
        "gen_ai.operation.name": "execute_tool",
        "gen_ai.tool.name": "stock",
        "gen_ai.tool.call.id": "call-1-1",
    }
    assert tool_span.parent.span_id == named["nodestep.node tools"][0].context.span_id


def test_an_openai_model_span_names_the_provider_and_the_servers_counts(
    spans: InMemorySpanExporter,
) -> None:
    with chat_server() as server:
        server.answers.append(_with_usage(completion("Hello"), "stop", 12, 2))
        model = OpenAIChatModel("local-model", base_url=server.url, api_key="k")
        agent = create_react_agent(model, [stock], stream=False)
        agent.invoke({"messages": "hi"})
    chat = by_name(spans)["chat local-model"][0]
    attributes = dict(chat.attributes)
    assert attributes["gen_ai.provider.name"] == "openai"
    assert (attributes["gen_ai.usage.input_tokens"], attributes["gen_ai.usage.output_tokens"]) == (
        12,
        2,
    )


def test_a_failed_model_call_and_a_failed_tool_call_mark_their_spans(
    spans: InMemorySpanExporter,
) -> None:
    model = ScriptedModel([ScriptedReply(tool_calls=[("broken", {"item": "tea"})])])
    agent = create_react_agent(model, [broken])
    with pytest.raises(ModelError):
        agent.invoke({"messages": "go"})  # the script has no second reply
    named = by_name(spans)
    failed_tool = named["execute_tool broken"][0]
    assert failed_tool.status.status_code == trace.StatusCode.ERROR
    assert dict(failed_tool.events[0].attributes)["exception.type"] == "LookupError"
    failed_chat = sorted(named["chat scripted"], key=lambda s: s.start_time)[-1]
    assert failed_chat.status.status_code == trace.StatusCode.ERROR
    assert dict(failed_chat.events[0].attributes)["exception.type"] == "ModelError"
