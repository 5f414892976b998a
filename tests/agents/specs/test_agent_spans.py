"""An Agent's model and tool calls have GenAI spans inside their node spans, as a model
node's and a tool node's do (tracing on)."""

from __future__ import annotations

from pathlib import Path

import pytest
from specs_helpers import CHAT, FUNCTIONS, GET_USER, write

from nodestep import Agent, ScriptedModel
from nodestep.agents import ScriptedReply
from span_capture import by_name

otel_sdk = pytest.importorskip("opentelemetry.sdk.trace")  # the module is skipped without it
from opentelemetry import trace  # noqa: E402  (after the skip)
from opentelemetry.sdk.trace.export.in_memory_span_exporter import (  # noqa: E402
    InMemorySpanExporter,
)


def test_an_agents_model_and_tool_calls_have_spans_in_their_nodes(
    spans: InMemorySpanExporter, tmp_path: Path
) -> None:
    script = [
        ScriptedReply(tool_calls=[("get_user", {"user_id": 7})], usage=(40, 7)),
        "User 7 is Ann.",
    ]
    model = ScriptedModel(script, name="small-model")
    specs = write(tmp_path, {"chat.yaml": CHAT, "tool.yaml": GET_USER})
    agent = Agent(specs, "chat", llm=model, functions=FUNCTIONS)
    assert agent.step_sync("Who is 7?").output == "User 7 is Ann."
    named = by_name(spans)
    chats = sorted(named["chat small-model"], key=lambda s: s.start_time)
    assert len(chats) == 2
    assert dict(chats[0].attributes) == {
        "gen_ai.operation.name": "chat",
        "gen_ai.request.model": "small-model",
        "gen_ai.response.model": "small-model",
        "gen_ai.provider.name": "nodestep.scripted",
        "gen_ai.system": "nodestep.scripted",
        "gen_ai.usage.input_tokens": 40,
        "gen_ai.usage.output_tokens": 7,
        "gen_ai.response.finish_reasons": ("tool_calls",),
        "nodestep.streamed": False,
    }
    assert chats[0].kind == trace.SpanKind.CLIENT
    nodes = {s.context.span_id for s in named["nodestep.node chat"]}
    assert {chat.parent.span_id for chat in chats} <= nodes
    (tool,) = named["execute_tool get_user"]
    assert dict(tool.attributes)["gen_ai.tool.call.id"] == "call-1-1"
    assert tool.parent.span_id == named["nodestep.node get_user"][0].context.span_id


def test_a_call_whose_arguments_do_not_fit_marks_its_tool_span_failed(
    spans: InMemorySpanExporter, tmp_path: Path
) -> None:
    script = [ScriptedReply(tool_calls=[("get_user", {"user_id": "seven"})]), "Sorry."]
    specs = write(tmp_path, {"chat.yaml": CHAT, "tool.yaml": GET_USER})
    agent = Agent(specs, "chat", llm=ScriptedModel(script), functions=FUNCTIONS)
    assert agent.step_sync("Who is seven?").output == "Sorry."
    (tool,) = by_name(spans)["execute_tool get_user"]
    assert tool.status.status_code == trace.StatusCode.ERROR
