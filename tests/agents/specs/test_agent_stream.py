"""Agent.stream: a step's tokens, tool calls and results as they happen, then its AgentStep.

A streamed step is the same run as ``step``'s (the same records are stored); a stream
closed early, or a step cancelled, is recorded as a stopped step and the next one works.
"""

from __future__ import annotations

import asyncio
from contextlib import aclosing
from pathlib import Path
from typing import Any

import anyio
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from specs_helpers import CHAT, FUNCTIONS, GET_USER, write

from nodestep import Agent, GraphConfigError, ResumeError, ScriptedModel, SQLiteStateStore
from nodestep.agents import (
    AgentStep,
    AgentToken,
    AgentToolCall,
    AgentToolResult,
    AssistantMessage,
    ScriptedReply,
)

pytestmark = pytest.mark.anyio


def _agent(folder: Path, model: Any, files: dict[str, str] | None = None, **options: Any) -> Agent:
    files = files or {"chat.yaml": CHAT, "tool.yaml": GET_USER}
    options.setdefault("functions", FUNCTIONS)
    return Agent(write(folder, files), start_node="chat", llm=model, **options)


async def _all(agent: Agent, *args: Any, **kwargs: Any) -> list[Any]:
    return [event async for event in agent.stream(*args, **kwargs)]


async def test_a_streamed_step_yields_calls_results_and_tokens_then_its_step(tmp_path: Path):
    script = [
        ScriptedReply(tool_calls=[("get_user", {"user_id": "seven"}), ("get_usr", {})]),
        ScriptedReply(tool_calls=[("get_user", {"user_id": 7})]),
        ScriptedReply("User 7 is Ada."),
    ]
    agent = _agent(tmp_path, ScriptedModel(script))
    events = await _all(agent, "who is 7?")
    calls = [e for e in events if isinstance(e, AgentToolCall)]
    assert [(c.node, c.tool, c.args) for c in calls] == [
        ("chat", "get_user", {"user_id": "seven"}),
        ("chat", "get_usr", {}),
        ("chat", "get_user", {"user_id": 7}),
    ]
    results = [e for e in events if isinstance(e, AgentToolResult)]
    assert [(r.node, r.tool, r.status) for r in results] == [
        ("chat", "get_usr", "error"),  # the model named no tool of chat's: chat answers it
        ("get_user", "get_user", "error"),
        ("get_user", "get_user", "ok"),
    ]
    assert results[0].text.startswith("Error: there is no tool 'get_usr'")
    assert "user_id: Input should be a valid integer" in results[1].text
    assert results[2].text == "user 7 (int)"
    assert {r.call_id for r in results} == {c.call_id for c in calls}
    tokens = [e for e in events if isinstance(e, AgentToken)]
    assert [t.text for t in tokens] == ["User", " 7", " is", " Ada."]
    last = events[-1]
    assert isinstance(last, AgentStep) and (last.status, last.output) == (
        "completed",
        "User 7 is Ada.",
    )
    assert events.index(calls[-1]) < events.index(results[-1]) < events.index(tokens[0])
    # The tokens name the reply that was stored.
    chat = await agent.node_state("chat")
    assert {t.message_id for t in tokens} == {chat.messages[-1].id}


class Counting:
    """A scripted model that counts how it was asked: ``complete()`` or ``stream()``."""

    name = "counting"

    def __init__(self, script: list[Any]) -> None:
        self.inner = ScriptedModel(script)
        self.asked: list[str] = []

    async def complete(self, messages: Any, tools: Any = ()) -> AssistantMessage:
        self.asked.append("complete")
        return await self.inner.complete(messages, tools)

    def stream(self, messages: Any, tools: Any = ()) -> Any:
        self.asked.append("stream")
        return self.inner.stream(messages, tools)


async def test_step_asks_the_model_whole_and_stream_token_by_token(tmp_path: Path):
    model = Counting(["one", "two"])
    agent = _agent(tmp_path, model)
    assert (await agent.step("a")).output == "one"
    assert (await _all(agent, "b"))[-1].output == "two"
    assert model.asked == ["complete", "stream"]


words = st.lists(st.sampled_from(["tea", "is", "hot", "ready", "7", "—", "ok."]), max_size=6)
turn = st.tuples(words, st.booleans())


@settings(
    max_examples=20, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture]
)
@given(turns=st.lists(turn, min_size=1, max_size=3))
def test_a_streamed_conversation_stores_what_a_stepped_one_does(
    tmp_path_factory: pytest.TempPathFactory, turns: list[tuple[list[str], bool]]
) -> None:
    script: list[Any] = []
    for text, calls_tool in turns:
        if calls_tool:
            script.append(ScriptedReply(tool_calls=[("get_user", {"user_id": len(text)})]))
        script.append(ScriptedReply(" ".join(text)))
    folder = tmp_path_factory.mktemp("specs")
    stepped = _agent(folder / "a", ScriptedModel(script))
    streamed = _agent(folder / "b", ScriptedModel(script))
    for n in range(len(turns)):
        want = stepped.step_sync(f"turn {n}", execution_id="c")
        events = list(streamed.stream_sync(f"turn {n}", execution_id="c"))
        assert events[-1] == want
        tokens = "".join(e.text for e in events if isinstance(e, AgentToken))
        assert tokens == want.output
    for name in ("chat", "get_user"):
        assert stepped.node_state_sync(name) == streamed.node_state_sync(name)


def test_a_failed_streamed_step_ends_failed_and_the_next_step_works(tmp_path: Path):
    agent = _agent(tmp_path, ScriptedModel(["only one reply"]))
    assert list(agent.stream_sync("a"))[-1].output == "only one reply"
    failed = list(agent.stream_sync("b"))
    assert len(failed) == 1 and failed[0].status == "failed"
    assert failed[0].failed_nodes == ("chat",) and "ModelError" in (failed[0].error or "")
    assert agent.node_state_sync("chat").status == "failed"
    assert [m.content for m in agent.node_state_sync("chat").messages] == ["a", "only one reply"]


def _asking(tmp_path: Path) -> Agent:
    from nodestep import interrupt

    def approve(text: str) -> str:
        return "sent: " + str(interrupt(f"send {text!r}?", id="approve"))

    chat = CHAT.replace("tools:\n  - get_user\n", "nodes: [approve]\n")
    files = {"chat.yaml": chat, "approve.yaml": "kind: Node\nname: approve\nfunc: ok.approve\n"}
    model = ScriptedModel(["draft one"])
    store = SQLiteStateStore(tmp_path / "a.db")
    return _agent(tmp_path, model, files, functions={"ok.approve": approve}, state_store=store)


async def test_a_paused_streamed_step_ends_paused_and_a_streamed_resume_answers(tmp_path: Path):
    agent = _asking(tmp_path)
    paused = (await _all(agent, "go"))[-1]
    assert paused.status == "paused"
    assert [i.payload for i in paused.interrupts] == ["send 'draft one'?"]
    with pytest.raises(ResumeError, match=r"is paused: .*step\(resume=answer\)"):
        await _all(agent, "are you there?")
    assert (await agent.node_state("approve")).status == "running"  # still paused
    done = (await _all(agent, resume="yes"))[-1]
    assert (done.status, done.output) == ("completed", "sent: yes")
    with pytest.raises(ResumeError, match="is not paused"):
        await _all(agent, resume="yes")


async def test_stream_refuses_what_step_refuses_naming_stream(tmp_path: Path):
    agent = _agent(tmp_path, ScriptedModel(["x"]))
    with pytest.raises(GraphConfigError, match=r"Agent\.stream takes the user's text as a string"):
        await _all(agent, 42)
    with pytest.raises(GraphConfigError, match=r"answer the paused step with stream\(resume="):
        await _all(agent, "x", resume="yes")


class Slow:
    """A model whose stream sends one word, then waits until the test lets it go on."""

    name = "slow"

    def __init__(self) -> None:
        # A scripted reply is picked by the conversation's length: a stopped call and the
        # next step's call get the same one.
        self.inner = ScriptedModel(["the answer"])
        self.hold = True

    async def complete(self, messages: Any, tools: Any = ()) -> AssistantMessage:
        if self.hold:
            await anyio.sleep_forever()
        return await self.inner.complete(messages, tools)

    async def stream(self, messages: Any, tools: Any = ()) -> Any:
        async with aclosing(self.inner.stream(messages, tools)) as chunks:
            async for chunk in chunks:
                yield chunk
                if self.hold:
                    await anyio.sleep_forever()


async def test_a_stream_closed_early_stops_the_step_and_the_next_one_goes_on(tmp_path: Path):
    model = Slow()
    agent = _agent(tmp_path, model, state_store=SQLiteStateStore(tmp_path / "a.db"))
    async with aclosing(agent.stream("first")) as events:
        async for event in events:
            assert event == AgentToken("chat", "the", "chat-2")
            break
    chat = await agent.node_state("chat")
    assert (chat.status, chat.has_error) == ("failed", True)
    assert chat.error is not None and chat.error.startswith("Stopped:")
    kinds = [e.type for e in await agent.graph.history(agent.execution_id or "")]
    assert "run_stopped" in kinds
    model.hold = False
    again = await agent.step("second")
    assert (again.status, again.output) == ("completed", "the answer")
    # As a failed step's, the stopped step's text is not in the conversation.
    messages = (await agent.node_state("chat")).messages
    assert [m.content for m in messages] == ["second", "the answer"]


async def test_a_cancelled_step_is_recorded_stopped_and_the_next_one_goes_on(tmp_path: Path):
    model = Slow()
    agent = _agent(tmp_path, model)
    with anyio.move_on_after(0.2):
        await agent.step("first")
    assert (await agent.node_state("chat")).status == "failed"
    model.hold = False
    assert (await agent.step("second")).output == "the answer"


def test_leaving_a_sync_stream_stops_the_step_at_once(tmp_path: Path):
    model = Slow()
    agent = _agent(tmp_path, model)
    for _ in agent.stream_sync("first"):
        break
    assert agent.node_state_sync("chat").status == "failed"
    model.hold = False
    assert agent.step_sync("second").output == "the answer"


def test_stream_sync_works_inside_a_running_loop(tmp_path: Path):
    agent = _agent(tmp_path, ScriptedModel(["hello there"]))

    async def in_a_notebook_cell() -> list[Any]:
        return list(agent.stream_sync("hi"))

    events = asyncio.run(in_a_notebook_cell())
    assert [e.text for e in events[:-1]] == ["hello", " there"]
    assert events[-1].output == "hello there"


async def test_a_tool_result_in_the_stream_masks_the_context_as_stored(tmp_path: Path):
    def get_user(user_id: int) -> str:
        return "user 7 is ada@example.com"

    script = [ScriptedReply(tool_calls=[("get_user", {"user_id": 7})]), "done"]
    agent = _agent(tmp_path, ScriptedModel(script), functions={"users.get_user": get_user})
    context = {"user": {"email": "ada@example.com"}}
    events = await _all(agent, "who?", context=context)
    (result,) = [e for e in events if isinstance(e, AgentToolResult)]
    assert result.text == "user 7 is [context]"
    assert (await agent.node_state("get_user")).output == result.text
