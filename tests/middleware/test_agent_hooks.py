"""The model and tool hooks of the agents' nodes, and their errors."""

from __future__ import annotations

from collections.abc import AsyncIterator, Sequence
from typing import Any

import pytest

from nodestep import GraphConfigError, ModelError
from nodestep.agents import (
    AssistantMessage,
    MessageChunk,
    ScriptedModel,
    ScriptedReply,
    SystemMessage,
    ToolMessage,
    create_react_agent,
    tool,
)
from nodestep.middleware import (
    Middleware,
    MiddlewareError,
    ModelFallback,
    ModelMiddlewareContext,
    Replacement,
    ToolMiddlewareContext,
)

pytestmark = pytest.mark.anyio


@tool
def look(q: str) -> str:
    """Look it up."""
    return f"found {q}"


@tool
def broken(q: str) -> str:
    """Always fails."""
    raise ConnectionError(f"{q} is down")


class Down:
    """A chat model that fails every call, as a provider's outage does."""

    provider = "test.down"

    def __init__(self, name: str = "down") -> None:
        self.name = name
        self.calls = 0

    async def complete(self, messages: Sequence[Any], tools: Sequence[dict[str, Any]] = ()) -> Any:
        self.calls += 1
        raise ModelError(f"{self.name} is down", model=self.name, retryable=True)

    async def stream(
        self, messages: Sequence[Any], tools: Sequence[dict[str, Any]] = ()
    ) -> AsyncIterator[MessageChunk]:
        self.calls += 1
        raise ModelError(f"{self.name} is down", model=self.name, retryable=True)
        yield MessageChunk()  # pragma: no cover - makes this an async generator


async def test_before_model_rewrites_the_request_but_not_the_stored_conversation() -> None:
    class Dated(Middleware):
        def before_model(self, ctx: ModelMiddlewareContext) -> Replacement:
            assert ctx.request is not None
            note = SystemMessage(content="Today is Monday.")
            return ctx.replace(ctx.request.replace(messages=[note, *ctx.request.messages]))

    model = ScriptedModel(["hello"])
    agent = create_react_agent(model, [look], middleware=[Dated()])
    result = await agent.ainvoke({"messages": ["hi"]})
    assert model.calls[0][0].content == "Today is Monday."
    assert [m.content for m in result.state.messages] == ["hi", "hello"]


async def test_after_model_replaces_the_reply_and_keeps_its_id() -> None:
    class Shout(Middleware):
        async def after_model(self, ctx: ModelMiddlewareContext) -> Replacement:
            assert ctx.response is not None and ctx.model == "scripted"
            return ctx.replace(AssistantMessage(content=ctx.response.content.upper()))

    agent = create_react_agent(ScriptedModel(["hello"]), [look], middleware=[Shout()])
    reply = (await agent.ainvoke({"messages": ["hi"]})).state.messages[-1]
    assert (reply.content, reply.id) == ("HELLO", "agent-2")


async def test_before_model_may_answer_without_calling_the_model() -> None:
    class Stop(Middleware):
        def before_model(self, ctx: ModelMiddlewareContext) -> Replacement:
            return ctx.replace(AssistantMessage(content="I stop here."))

    model = ScriptedModel(["never"])
    agent = create_react_agent(model, [look], middleware=[Stop()])
    result = await agent.ainvoke({"messages": ["hi"]})
    assert result.state.messages[-1].content == "I stop here."
    assert model.calls == []


async def test_a_model_hook_replacing_with_the_wrong_kind_is_an_error_naming_it() -> None:
    class Wrong(Middleware):
        def before_model(self, ctx: ModelMiddlewareContext) -> Replacement:
            return ctx.replace("just text")

    agent = create_react_agent(ScriptedModel(["x"]), [look], middleware=[Wrong()])
    with pytest.raises(MiddlewareError, match=r"Wrong's before_model returned ctx\.replace"):
        await agent.ainvoke({"messages": ["hi"]})


async def test_model_fallback_sends_a_failed_call_to_the_next_model() -> None:
    first, second = Down("first"), Down("second")
    backup = ScriptedModel(["from the backup"], name="backup")
    agent = create_react_agent(
        first, [look], middleware=[ModelFallback([second, backup])], stream=False
    )
    result = await agent.ainvoke({"messages": ["hi"]})
    reply = result.state.messages[-1]
    assert (reply.content, reply.model) == ("from the backup", "backup")
    assert (first.calls, second.calls) == (1, 1)


async def test_model_fallback_gives_up_with_the_last_error_when_every_model_fails() -> None:
    agent = create_react_agent(Down("a"), [look], middleware=[ModelFallback([Down("b")])])
    with pytest.raises(ModelError, match="b is down"):
        await agent.ainvoke({"messages": ["hi"]})


async def test_model_fallback_leaves_errors_its_when_refuses() -> None:
    fallback = ModelFallback([ScriptedModel(["x"])], when=lambda e: False)
    agent = create_react_agent(Down("a"), [look], middleware=[fallback])
    with pytest.raises(ModelError, match="a is down"):
        await agent.ainvoke({"messages": ["hi"]})


def test_model_fallback_refuses_what_is_not_a_model() -> None:
    with pytest.raises(GraphConfigError, match="list of chat models"):
        ModelFallback(["gpt"])  # type: ignore[list-item]


def _calls(*calls: tuple[str, dict[str, Any]]) -> ScriptedReply:
    return ScriptedReply(tool_calls=list(calls))


async def test_before_tool_rewrites_refuses_or_answers_a_call() -> None:
    class Gate(Middleware):
        def before_tool(self, ctx: ToolMiddlewareContext) -> Replacement | None:
            if ctx.args["q"] == "secret":
                return ctx.refuse("not allowed")
            if ctx.args["q"] == "cached":
                return ctx.respond("from the cache")
            return ctx.replace({"q": ctx.args["q"] + "!"})

    script = [_calls(("look", {"q": "a"}), ("look", {"q": "secret"}), ("look", {"q": "cached"}))]
    agent = create_react_agent(ScriptedModel([*script, "done"]), [look], middleware=[Gate()])
    messages = (await agent.ainvoke({"messages": ["hi"]})).state.messages
    results = [(m.content, m.status) for m in messages if isinstance(m, ToolMessage)]
    assert results == [("found a!", "ok"), ("not allowed", "error"), ("from the cache", "ok")]


async def test_after_tool_replaces_the_result_and_on_tool_error_sees_the_failure() -> None:
    seen: list[str] = []

    class Watch(Middleware):
        def after_tool(self, ctx: ToolMiddlewareContext) -> Replacement | None:
            assert ctx.result is not None
            return ctx.replace(ctx.result.content + " (checked)")

        def on_tool_error(self, ctx: ToolMiddlewareContext, error: Exception) -> None:
            seen.append(f"{ctx.tool_name}: {error}")

    script = [_calls(("look", {"q": "a"}), ("broken", {"q": "b"})), "done"]
    agent = create_react_agent(ScriptedModel(script), [look, broken], middleware=[Watch()])
    messages = (await agent.ainvoke({"messages": ["hi"]})).state.messages
    results = [m.content for m in messages if isinstance(m, ToolMessage)]
    assert results[0] == "found a (checked)"
    assert (
        results[1].startswith("Error: broken raised ConnectionError") and "(checked)" in results[1]
    )
    assert seen == ["broken: b is down"]


class _RaisesBefore(Middleware):
    async def before_tool(self, ctx: ToolMiddlewareContext) -> None:
        raise RuntimeError("hook bug")


class _RaisesAfter(Middleware):
    def after_tool(self, ctx: ToolMiddlewareContext) -> None:
        raise RuntimeError("hook bug")


class _RaisesOnError(Middleware):
    def on_tool_error(self, ctx: ToolMiddlewareContext, error: Exception) -> None:
        raise RuntimeError("hook bug")


class _ReturnsNoReplacement(Middleware):
    def before_tool(self, ctx: ToolMiddlewareContext) -> Any:
        return 42


@pytest.mark.parametrize("calls", [1, 2], ids=["alone", "concurrent"])
@pytest.mark.parametrize(
    ("hook", "message"),
    [
        (_RaisesBefore, "_RaisesBefore raised in before_tool: RuntimeError: hook bug"),
        (_RaisesAfter, "_RaisesAfter raised in after_tool: RuntimeError: hook bug"),
        (_RaisesOnError, "_RaisesOnError raised in on_tool_error: RuntimeError: hook bug"),
        (_ReturnsNoReplacement, "_ReturnsNoReplacement's before_tool returned 42"),
    ],
)
async def test_a_raising_tool_hook_fails_the_run_naming_the_middleware(
    calls: int, hook: type[Middleware], message: str
) -> None:
    # Several calls of one reply fail the run with the first call's MiddlewareError too,
    # not with a group of the calls' failures.
    tool_name = "broken" if hook is _RaisesOnError else "look"
    reply = _calls(*[(tool_name, {"q": str(i)}) for i in range(calls)])
    agent = create_react_agent(ScriptedModel([reply, "done"]), [look, broken], middleware=[hook()])
    with pytest.raises(MiddlewareError, match=message) as caught:
        await agent.ainvoke({"messages": ["hi"]})
    assert caught.value.middleware == hook.__name__


async def test_middleware_tools_are_added_and_a_name_twice_is_refused() -> None:
    class Offers(Middleware):
        def tools(self) -> list[Any]:
            return [look]

    agent = create_react_agent(ScriptedModel(["x"]), [broken], middleware=[Offers()])
    assert "look" in agent.nodes["tools"].fn.__doc__
    with pytest.raises(GraphConfigError, match="Two tools are named 'look'"):
        create_react_agent(ScriptedModel(["x"]), [look], middleware=[Offers()])


@pytest.mark.parametrize(("on_parent", "on_child", "seen"), [(True, False, 0), (False, True, 1)])
async def test_model_hooks_apply_to_the_model_nodes_of_their_own_graph_only(
    on_parent: bool, on_child: bool, seen: int
) -> None:
    from nodestep import END, START, Graph, MessagesState

    calls: list[str] = []

    class Count(Middleware):
        def before_model(self, ctx: ModelMiddlewareContext) -> None:
            calls.append(ctx.graph_name)

    child = create_react_agent(
        ScriptedModel(["hi"]), [look], name="child", middleware=[Count()] if on_child else None
    )
    parent = Graph(MessagesState, middleware=[Count()] if on_parent else None).flow(
        START >> child, child >> END
    )
    await parent.ainvoke({"messages": ["hello"]})
    assert calls == ["child"] * seen


async def test_on_model_error_may_retry_the_same_request() -> None:
    class Flaky:
        name = "flaky"

        def __init__(self) -> None:
            self.calls = 0

        async def complete(self, messages: Sequence[Any], tools: Sequence[Any] = ()) -> Any:
            self.calls += 1
            if self.calls == 1:
                raise ModelError("429 Too Many Requests", model="flaky", retryable=True)
            return AssistantMessage(content="second time lucky")

        async def stream(self, messages: Sequence[Any], tools: Sequence[Any] = ()) -> Any:
            raise NotImplementedError  # the agent is built with stream=False

    class RetryOnce(Middleware):
        def on_model_error(self, ctx: ModelMiddlewareContext, error: Exception) -> Any:
            return ctx.replace(ctx.request) if len(ctx.attempts) < 2 else None

    model = Flaky()
    agent = create_react_agent(model, [look], middleware=[RetryOnce()], stream=False)
    result = await agent.ainvoke({"messages": ["hi"]})
    assert (result.state.messages[-1].content, model.calls) == ("second time lucky", 2)


async def test_a_hook_that_always_retries_gives_up_after_ten_attempts() -> None:
    class Forever(Middleware):
        def on_model_error(self, ctx: ModelMiddlewareContext, error: Exception) -> Any:
            return ctx.replace(ctx.request)

    model = Down()
    agent = create_react_agent(model, [look], middleware=[Forever()], stream=False)
    with pytest.raises(ModelError, match="down is down") as caught:
        await agent.ainvoke({"messages": ["hi"]})
    assert model.calls == 10
    assert "the model was tried 10 times; giving up" in caught.value.__notes__
