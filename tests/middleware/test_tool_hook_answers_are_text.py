"""``ctx.respond`` and ``ctx.refuse`` take text: anything else fails the run naming the call.

The model reads what they give as a tool message; a value that is not a str is refused
there, by the method the hook called, never by pydantic inside a ``ToolMessage`` the hook
never made.
"""

from __future__ import annotations

from typing import Any

import pytest

from nodestep import InMemoryStateStore, ScriptedModel, ScriptedReply, create_react_agent, tool
from nodestep.middleware import Middleware, MiddlewareError, Replacement, ToolMiddlewareContext


@tool
def search(query: str) -> str:
    """Search the manual."""
    return "found"


class Answer(Middleware):
    def __init__(self, method: str, value: Any) -> None:
        self.method, self.value = method, value

    def before_tool(self, ctx: ToolMiddlewareContext) -> Replacement:
        answer: Replacement = getattr(ctx, self.method)(self.value)
        return answer


@pytest.mark.parametrize(
    ("method", "value", "shown", "example"),
    [
        ("respond", 42, "int 42", "ctx.respond(json.dumps(value))"),
        ("respond", {"hits": 3}, "dict {'hits': 3}", "ctx.respond(json.dumps(value))"),
        ("refuse", None, "NoneType None", "ctx.refuse('the budget is spent')"),
    ],
)
def test_an_answer_that_is_not_text_is_refused_naming_the_method(
    method: str, value: Any, shown: str, example: str
) -> None:
    model = ScriptedModel([ScriptedReply(tool_calls=[("search", {"query": "q"})]), "done"])
    store = InMemoryStateStore()
    agent = create_react_agent(
        model, [search], middleware=[Answer(method, value)], state_store=store
    )
    with pytest.raises(MiddlewareError) as caught:
        agent.invoke({"messages": "hi"}, thread_id="t")
    assert (caught.value.middleware, caught.value.hook) == ("Answer", "before_tool")
    cause = caught.value.__cause__
    assert isinstance(cause, TypeError)
    assert str(cause) == (
        f"ctx.{method}(...) takes the text the model reads, a str; got {shown}. Give it "
        f"text, e.g. {example}."
    )
    assert agent.get_state_sync("t").status == "failed"


def test_text_answers_still_reach_the_model() -> None:
    model = ScriptedModel([ScriptedReply(tool_calls=[("search", {"query": "q"})]), "done"])
    agent = create_react_agent(model, [search], middleware=[Answer("refuse", "no budget")])
    messages = agent.invoke({"messages": "hi"}).state.messages
    assert (messages[2].status, messages[2].content) == ("error", "no budget")
