"""A failed tool call's error tool message is cleaned as a failed run's message is.

The tool node turns a tool's exception into a tool message that the run stores in its
state, and a tool that read a secret of the run's ``context=`` (through ``ToolContext``)
may show it in its error. A plain node's failure stored in ``run_failed`` has the
context's ``SecretStr`` values masked (``_engine.redact``); the tool message gets the
same, whatever made its text (the default text, or a ``handle_errors`` function).
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

import pytest
from pydantic import SecretStr

from nodestep import InMemoryStateStore, ScriptedModel, ScriptedReply, create_react_agent, tool
from nodestep.agents import ToolContext

KEY = "sk-live-93f1c2"


@dataclass
class Account:
    api_key: SecretStr
    user: str


@tool
def fetch(item: str, run: ToolContext) -> str:
    """Fetch an item.

    Args:
        item: The item to fetch.
    """
    raise PermissionError(f"key {run.context.api_key.get_secret_value()} refused for {item}")


@tool
def ping() -> str:
    """Answer pong."""
    return "pong"


def _stored_tool_texts(calls: list[tuple[str, dict[str, Any]]], **options: Any) -> list[str]:
    model = ScriptedModel([ScriptedReply(tool_calls=calls), ScriptedReply("sorry")])
    store = InMemoryStateStore()
    agent = create_react_agent(model, [fetch, ping], state_store=store, **options)
    agent.invoke({"messages": "go"}, thread_id="t", context=Account(SecretStr(KEY), "ada"))
    again = create_react_agent(model, [fetch, ping], state_store=store)  # from the store
    return [m.content for m in again.get_state_sync("t").value.messages if m.role == "tool"]


@pytest.mark.parametrize(
    "calls",
    [[("fetch", {"item": "x"})], [("fetch", {"item": "x"}), ("ping", {})]],
    ids=["one call", "calls run concurrently"],
)
def test_a_tools_error_message_has_the_contexts_secrets_masked(
    calls: list[tuple[str, dict[str, Any]]],
) -> None:
    texts = _stored_tool_texts(calls)
    assert texts[0] == "Error: fetch raised PermissionError: key ********** refused for x"
    assert texts[1:] == ["pong"] * (len(calls) - 1)


def test_a_handle_errors_functions_text_has_them_masked_too() -> None:
    texts = _stored_tool_texts([("fetch", {"item": "x"})], handle_errors=str)
    assert texts == ["key ********** refused for x"]
