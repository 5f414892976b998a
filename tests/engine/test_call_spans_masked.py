"""A failed tool call's span holds its error as the run stores failures: masked.

The message of a tool's error may quote what the tool saw: a secret of the call's
context, or (in an ``Agent`` from specs) any value of the context. The node and run spans
always had the stored, masked message; the ``execute_tool`` span had the raw one.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest
from pydantic import BaseModel, SecretStr

from nodestep import (
    Agent,
    InMemoryStateStore,
    NodeContext,
    ScriptedModel,
    ScriptedReply,
    create_react_agent,
    tool,
)
from span_capture import by_name

otel_sdk = pytest.importorskip("opentelemetry.sdk.trace")  # the module is skipped without it
from opentelemetry import trace  # noqa: E402  (after the skip)
from opentelemetry.sdk.trace.export.in_memory_span_exporter import (  # noqa: E402
    InMemorySpanExporter,
)

KEY = "sk-live-5c0ffee"


class Deps(BaseModel):
    api_key: SecretStr


@tool
def stock(item: str) -> int:
    """Return how many of the item are in stock.

    Args:
        item: The item.
    """
    raise PermissionError(f"the stock API refused key {KEY} for {item}")


def failed_call(spans: InMemorySpanExporter, name: str) -> dict[str, Any]:
    (span,) = by_name(spans)[f"execute_tool {name}"]
    assert span.status.status_code == trace.StatusCode.ERROR
    return dict(span.events[0].attributes or {})


def test_a_tool_error_quoting_a_context_secret_is_masked_on_its_span(
    spans: InMemorySpanExporter,
) -> None:
    model = ScriptedModel([ScriptedReply(tool_calls=[("stock", {"item": "tea"})]), "Sorry."])
    agent = create_react_agent(model, [stock], state_store=InMemoryStateStore())
    agent.invoke({"messages": "Tea?"}, thread_id="t", context=Deps(api_key=SecretStr(KEY)))

    event = failed_call(spans, "stock")

    assert event["exception.type"] == "PermissionError"
    assert event["exception.message"] == "the stock API refused key ********** for tea"


SPECS = """
kind: LLMNode
name: chat
tools: [whoami]
---
kind: ToolNode
name: whoami
description: Who is calling
func: shop.whoami
"""


def whoami(ctx: NodeContext) -> str:
    raise LookupError(f"no account for {ctx.context['email']}")


def test_an_agents_tool_error_quoting_the_context_is_masked_on_its_span(
    spans: InMemorySpanExporter, tmp_path: Path
) -> None:
    (tmp_path / "chat.yaml").write_text(SPECS)
    model = ScriptedModel([ScriptedReply(tool_calls=[("whoami", {})]), "Done."])
    agent = Agent(tmp_path, start_node="chat", llm=model, functions={"shop.whoami": whoami})
    agent.step_sync("Who am I?", context={"email": "ann@example.com"})

    event = failed_call(spans, "whoami")

    assert event["exception.message"] == "no account for [context]"
    every = [(s.name, dict(s.attributes or {}), s.events) for s in spans.get_finished_spans()]
    assert "ann@example.com" not in repr(every)
