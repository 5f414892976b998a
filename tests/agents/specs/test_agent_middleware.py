"""``Agent(..., middleware=[...])``: the hooks run around an Agent's steps, nodes, model
calls and tool calls, as around ``create_react_agent``'s."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest
from specs_helpers import CHAT, FUNCTIONS, GET_USER, write

from nodestep import Agent, GraphConfigError, Middleware, ScriptedModel
from nodestep.agents import AssistantMessage, ScriptedReply
from nodestep.middleware import (
    GraphMiddlewareContext,
    ModelMiddlewareContext,
    NodeMiddlewareContext,
    RunOutcome,
    ToolMiddlewareContext,
)

pytestmark = pytest.mark.anyio

ASK_7 = ScriptedReply(tool_calls=[("get_user", {"user_id": 7})])
FAIL_EDGE = "llm_nodes:\n  - target: chat\n    when: $is_error('ValueError')\n"


class Log(Middleware):
    """Logs each hook it sees, with what it saw."""

    def __init__(self) -> None:
        self.seen: list[str] = []

    def before_graph(self, ctx: GraphMiddlewareContext) -> None:
        self.seen.append("before_graph")

    def on_run_end(self, ctx: GraphMiddlewareContext, outcome: RunOutcome) -> None:
        self.seen.append(f"end {outcome.status}")

    def before_node(self, ctx: NodeMiddlewareContext) -> None:
        self.seen.append(f"node {ctx.node_name}")

    def before_model(self, ctx: ModelMiddlewareContext) -> None:
        self.seen.append(f"model {[m.role for m in ctx.request.messages]}")

    def before_tool(self, ctx: ToolMiddlewareContext) -> None:
        self.seen.append(f"tool {ctx.tool_name} {ctx.args}")

    def after_tool(self, ctx: ToolMiddlewareContext) -> None:
        assert ctx.result is not None
        self.seen.append(f"result {ctx.result.content} {ctx.result.status}")


def _agent(tmp_path: Path, script: list[Any], *middleware: Middleware, **kw: Any) -> Agent:
    specs = write(tmp_path, {"chat.yaml": CHAT, "tool.yaml": kw.pop("tool", GET_USER)})
    functions = kw.pop("functions", FUNCTIONS)
    model = ScriptedModel(script)
    return Agent(specs, "chat", llm=model, functions=functions, middleware=middleware, **kw)


async def test_the_hooks_run_around_an_agents_run_nodes_model_and_tool_calls(
    tmp_path: Path,
) -> None:
    log = Log()
    agent = _agent(tmp_path, [ASK_7, "User 7 is Ann."], log)
    assert (await agent.step("Who is 7?")).output == "User 7 is Ann."
    assert log.seen == [
        "before_graph",
        "node chat",
        "model ['system', 'user']",
        "node get_user",
        "tool get_user {'user_id': 7}",
        "result user 7 (int) ok",
        "node chat",
        "model ['system', 'user', 'assistant', 'tool']",
        "end completed",
    ]


class Guard(Middleware):
    """Answers the model itself for a question about 13, and edits and censors tool calls."""

    def before_model(self, ctx: ModelMiddlewareContext) -> Any:
        if "13" in str(ctx.request.messages[-1].content):
            return ctx.replace(AssistantMessage(content="I may not say."))
        return None

    def after_model(self, ctx: ModelMiddlewareContext) -> Any:
        assert ctx.response is not None
        return ctx.replace(ctx.response.model_copy(update={"content": ctx.response.content + "!"}))

    def before_tool(self, ctx: ToolMiddlewareContext) -> Any:
        if ctx.args.get("user_id") == 0:
            return ctx.refuse("user 0 is the system")
        if ctx.args.get("user_id") == 8:
            return ctx.replace({"user_id": 9})
        return None

    def after_tool(self, ctx: ToolMiddlewareContext) -> Any:
        assert ctx.result is not None
        return ctx.replace(ctx.result.content.replace("user", "person"))


async def test_model_and_tool_hooks_change_what_the_agent_sends_and_keeps(tmp_path: Path) -> None:
    script = [
        "(the hook answers instead)",  # the script is read by the replies in the conversation
        ScriptedReply(tool_calls=[("get_user", {"user_id": 8})]),
        "Found them.",
        ScriptedReply(tool_calls=[("get_user", {"user_id": 0})]),
        "Refused.",
    ]
    agent = _agent(tmp_path, script, Guard())
    assert (await agent.step("Who is 13?")).output == "I may not say.!"
    assert (await agent.step("Who is 8?")).output == "Found them.!"
    tool = await agent.node_state("get_user")
    assert (tool.input, tool.output) == (
        {"name": "get_user", "args": {"user_id": 8}},
        "person 9 (int)",
    )
    assert (await agent.step("Who is 0?")).output == "Refused.!"
    tool = await agent.node_state("get_user")
    assert tool.has_error and tool.error == "person 0 is the system"  # after_tool saw it too
    chat = await agent.node_state("chat")
    tool_messages = [m for m in chat.messages if m.role == "tool"]
    assert [m.status for m in tool_messages] == ["ok", "error"]
    assert tool_messages[0].content == "person 9 (int)"


class Watch(Middleware):
    def __init__(self) -> None:
        self.errors: list[str] = []

    def on_tool_error(self, ctx: ToolMiddlewareContext, error: Exception) -> None:
        self.errors.append(f"{ctx.tool_name}: {error}")


async def test_on_tool_error_sees_a_tools_error_routed_or_not(tmp_path: Path) -> None:
    def broken(user_id: int) -> str:
        raise ValueError(f"no user {user_id}")

    watch = Watch()
    functions = {"users.get_user": broken}
    agent = _agent(tmp_path, [ASK_7, "It failed."], watch, functions=functions)
    assert (await agent.step("Who is 7?")).output == "It failed."
    assert watch.errors == ["get_user: no user 7"]
    routed = _agent(tmp_path / "r", [ASK_7], watch, functions=functions, tool=GET_USER + FAIL_EDGE)
    step = await routed.step("Who is 7?")
    assert watch.errors == ["get_user: no user 7", "get_user: no user 7"]
    assert (await routed.node_state("get_user")).status == "failed", step


class Broken(Middleware):
    def before_tool(self, ctx: ToolMiddlewareContext) -> Any:
        return 42  # not a replacement


async def test_a_broken_hook_fails_the_step_not_the_agent(tmp_path: Path) -> None:
    agent = _agent(tmp_path, [ASK_7, ASK_7, "Fine."], Broken())
    step = await agent.step("Who is 7?")
    assert step.status == "failed" and "MiddlewareError" in (step.error or "")
    assert "Broken" in (step.error or "") and "before_tool" in (step.error or "")
    agent_ok = _agent(tmp_path / "ok", [ASK_7, "Fine."])
    assert (await agent_ok.step("Who is 7?")).output == "Fine."


def test_middleware_must_be_middleware(tmp_path: Path) -> None:
    with pytest.raises(GraphConfigError, match="middleware"):
        _agent(tmp_path, [], object())  # type: ignore[arg-type]


class Echo(Middleware):
    """Puts a value it was given into every tool result (as a careless hook might)."""

    def __init__(self, value: str) -> None:
        self.value = value

    def after_tool(self, ctx: ToolMiddlewareContext) -> Any:
        return ctx.replace(f"{ctx.result.content if ctx.result else ''} for {self.value}")


async def test_what_a_hook_puts_in_a_result_is_masked_like_the_tools_own(tmp_path: Path) -> None:
    secret = "tok-5e1f9a77"
    agent = _agent(tmp_path, [ASK_7, "Done."], Echo(secret))
    assert (await agent.step("Who is 7?", context={"token": secret})).output == "Done."
    tool = await agent.node_state("get_user")
    assert secret not in str(tool.output) and str(tool.output).startswith("user 7 (int) for ")
    history = await agent.graph.history(agent.execution_id or "")
    assert secret not in str([event.record for event in history])
