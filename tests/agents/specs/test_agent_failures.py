"""A failing node fails its step, never the agent: the error is in the step and the node's
record, the conversation stays whole, and the next step works. Retries, breakers and
``$is_error`` edges apply as declared."""

from __future__ import annotations

import threading
from pathlib import Path
from typing import Any

import anyio
import pytest
from specs_helpers import CHAT, FUNCTIONS, GET_USER, ByPrompt, write

from nodestep import (
    Agent,
    GraphConfigError,
    ModelError,
    Resume,
    ResumeError,
    ScriptedModel,
    SQLiteStateStore,
    ThreadBusyError,
)
from nodestep.agents import AssistantMessage, ScriptedReply


class FlakyModel:
    """A model that fails the calls whose numbers are in ``failing``, else asks ``inner``."""

    name = "flaky"

    def __init__(self, inner: ScriptedModel, failing: set[int]) -> None:
        self.inner = inner
        self.failing = failing
        self.count = 0

    async def complete(self, messages: Any, tools: Any = ()) -> AssistantMessage:
        self.count += 1
        if self.count in self.failing:
            raise ModelError("the model service is down", model=self.name)
        return await self.inner.complete(messages, tools)

    def stream(self, messages: Any, tools: Any = ()) -> Any:
        return self.inner.stream(messages, tools)


def test_a_failing_model_fails_the_step_and_the_next_step_works(tmp_path: Path):
    model = FlakyModel(ScriptedModel(["first", "second"]), failing={2})
    files = {"chat.yaml": CHAT, "tool.yaml": GET_USER}
    agent = Agent(
        write(tmp_path, files),
        "chat",
        llm=model,
        functions=FUNCTIONS,
        state_store=SQLiteStateStore(tmp_path / "a.db"),
    )
    assert agent.step_sync("one").output == "first"
    failed = agent.step_sync("two")
    assert (failed.status, failed.output, failed.failed_nodes) == ("failed", "", ("chat",))
    assert failed.error == "ModelError: the model service is down"
    chat = agent.node_state_sync("chat")
    assert (chat.status, chat.has_error, chat.error) == ("failed", True, failed.error)
    assert [m.content for m in chat.messages] == ["one", "first"]  # intact
    again = agent.step_sync("three")
    assert (again.status, again.output, again.execution_id) == (
        "completed",
        "second",
        failed.execution_id,
    )
    chat = agent.node_state_sync("chat")
    assert (chat.status, chat.has_error) == ("completed", False)
    assert [m.content for m in chat.messages] == ["one", "first", "three", "second"]


def test_a_tool_that_raises_goes_back_to_the_model_as_an_error(tmp_path: Path):
    def broken(user_id: int) -> str:
        raise LookupError(f"no user {user_id}")

    script = [
        ScriptedReply(tool_calls=[("get_user", {"user_id": 5})]),
        ScriptedReply("sorry", expect="LookupError"),
    ]
    agent = Agent(
        write(tmp_path, {"chat.yaml": CHAT, "tool.yaml": GET_USER}),
        "chat",
        llm=ScriptedModel(script),
        functions={"users.get_user": broken},
    )
    assert agent.step_sync("x").output == "sorry"
    tool = agent.node_state_sync("get_user")
    assert (tool.status, tool.has_error) == ("failed", True)
    assert tool.error == "Error: get_user raised LookupError: no user 5"


def test_a_declared_retry_runs_the_tool_again(tmp_path: Path):
    attempts: list[int] = []

    def flaky(user_id: int) -> str:
        attempts.append(user_id)
        if len(attempts) < 3:
            raise ConnectionError("try again")
        return "at last"

    tool = GET_USER + "retry: {attempts: 3, backoff: 0, on: ConnectionError}\n"
    script = [
        ScriptedReply(tool_calls=[("get_user", {"user_id": 5})]),
        ScriptedReply("ok", expect="at last"),
    ]
    agent = Agent(
        write(tmp_path, {"chat.yaml": CHAT, "tool.yaml": tool}),
        "chat",
        llm=ScriptedModel(script),
        functions={"users.get_user": flaky},
        state_store=SQLiteStateStore(tmp_path / "a.db"),
    )
    out = agent.step_sync("x")
    assert out.output == "ok" and attempts == [5, 5, 5]
    retried = [
        e for e in agent.graph.history_sync(out.execution_id).events if e.type == "task_retried"
    ]
    assert [e.data["node"] for e in retried] == ["get_user", "get_user"]


def test_an_is_error_edge_takes_a_function_nodes_failure(tmp_path: Path):
    def check(text: str) -> str:
        raise ValueError(f"cannot check {text!r}")

    chat = CHAT.replace("tools:\n  - get_user\n", "nodes: [check]\n")
    checker = """
    kind: Node
    name: check
    func: rules.check
    llm_nodes:
      - target: apologize
        when: $is_error('ValueError')
    """
    apologize = "kind: LLMNode\nname: apologize\nprompts: {system: Apologize.}\n"
    sorry = ScriptedModel([ScriptedReply("Sorry, that failed.", expect="check failed: ValueError")])
    model = ByPrompt({"You answer": ScriptedModel(["draft"]), "Apologize": sorry})
    files = {"chat.yaml": chat, "check.yaml": checker, "sorry.yaml": apologize}
    agent = Agent(write(tmp_path, files), "chat", llm=model, functions={"rules.check": check})
    out = agent.step_sync("go")
    assert (out.status, out.output) == ("completed", "Sorry, that failed.")
    state = agent.node_state_sync("check")
    assert (state.status, state.error) == ("failed", "ValueError: cannot check 'draft'")


def test_an_open_breaker_fails_fast_and_its_is_error_edge_takes_the_refusal(tmp_path: Path):
    calls: list[str] = []

    def check(text: str) -> str:
        calls.append(text)
        raise ConnectionError("down")

    chat = CHAT.replace("tools:\n  - get_user\n", "nodes: [check]\n")
    checker = """
    kind: FunctionNode
    name: check
    func: rules.check
    circuit_breaker: {failures: 1, cooldown: 600}
    llm_nodes:
      - target: apologize
        when: $is_error('CircuitOpenError')
    """
    apologize = "kind: LLMNode\nname: apologize\nprompts: {system: Apologize.}\n"
    sorry = ScriptedModel(["Still down, sorry."])
    model = ByPrompt({"You answer": ScriptedModel(["a", "b"]), "Apologize": sorry})
    files = {"chat.yaml": chat, "check.yaml": checker, "sorry.yaml": apologize}
    agent = Agent(write(tmp_path, files), "chat", llm=model, functions={"rules.check": check})
    first = agent.step_sync("one")
    assert (first.status, first.error) == ("failed", "ConnectionError: down")
    second = agent.step_sync("two")  # the breaker is open: check is not called
    assert (second.status, second.output) == ("completed", "Still down, sorry.")
    assert calls == ["a"]
    refusal = (
        "CircuitOpenError: Node 'check' was not run: its circuit breaker is open after "
        "repeated failures, and lets a trial call through in 600s. Step again after that; "
        "the breaker is declared by the node's circuit_breaker, and starts closed when the "
        "agent is made anew."
    )
    assert sorry.calls[0][-1].content == f"check failed: {refusal}"  # the error, whole
    state = agent.node_state_sync("check")
    assert (state.status, state.has_error, state.error) == ("failed", True, refusal)


class _Down:
    """A chat model whose service is down: each call raises ``ConnectionError``."""

    name = "down"

    def __init__(self) -> None:
        self.calls = 0

    async def complete(self, messages: Any, tools: Any = ()) -> AssistantMessage:
        self.calls += 1
        raise ConnectionError("the provider is down")

    def stream(self, messages: Any, tools: Any = ()) -> Any:
        raise AssertionError("not streamed")


FALLBACK = """
kind: Node
name: fallback
func: rules.fallback
"""


def test_a_breaker_counts_the_failures_its_is_error_edge_takes(tmp_path: Path):
    # The edge takes the model's failure, and the breaker counts it all the same: the
    # second step is refused without calling the model, and the edge takes the refusal.
    chat = """
    kind: LLMNode
    name: chat
    prompts: {system: You answer.}
    circuit_breaker: {failures: 1, cooldown: 600, on: ConnectionError}
    nodes:
      - {target: fallback, when: $is_error()}
    """
    seen: list[str] = []
    model = _Down()
    files = {"chat.yaml": chat, "fallback.yaml": FALLBACK}
    agent = Agent(
        write(tmp_path, files),
        "chat",
        llm=model,
        functions={"rules.fallback": lambda text: seen.append(text) or "sorry"},
    )
    assert [agent.step_sync(x).output for x in ("one", "two")] == ["sorry", "sorry"]
    assert model.calls == 1
    assert seen[0] == "chat failed: ConnectionError: the provider is down"
    assert seen[1].startswith("chat failed: CircuitOpenError: Node 'chat' was not run")
    assert agent.node_state_sync("chat").error == seen[1].removeprefix("chat failed: ")


def test_an_llm_nodes_timeout_reaches_its_is_error_edge_with_its_error(tmp_path: Path):
    # The timeout is the node's own failure: the edge's target reads it, and a function the
    # condition calls gets the call's context, as on any other edge.
    chat = """
    kind: LLMNode
    name: chat
    prompts: {system: You answer.}
    timeout: 0.05
    nodes:
      - {target: fallback, when: "$is_error('TimeoutError') and rules.patient"}
    """

    class Stuck:
        name = "stuck"

        async def complete(self, messages: Any, tools: Any = ()) -> AssistantMessage:
            await anyio.sleep_forever()
            raise AssertionError("unreachable")

        def stream(self, messages: Any, tools: Any = ()) -> Any:
            raise AssertionError("not streamed")

    seen: list[Any] = []
    functions = {
        "rules.fallback": lambda text: seen.append(text) or "sorry",
        "rules.patient": lambda context: seen.append(context) or context["patient"],
    }
    files = {"chat.yaml": chat, "fallback.yaml": FALLBACK}
    agent = Agent(write(tmp_path, files), "chat", llm=Stuck(), functions=functions)
    out = agent.step_sync("hi", context={"patient": True})
    assert (out.status, out.output) == ("completed", "sorry")
    error = (
        "NodeTimeoutError: Node 'chat' timed out after 0.05s; give it a longer timeout in "
        "its manifest if it needs one, or a retry to try again"
    )
    assert seen == [{"patient": True}, f"chat failed: {error}"]
    assert agent.node_state_sync("chat").error == error
    impatient = agent.step_sync("hi", context={"patient": False})
    assert (impatient.status, impatient.failed_nodes) == ("failed", ("chat",))
    assert impatient.error == error


def test_a_tools_open_breaker_answers_the_model_without_calling_the_function(tmp_path: Path):
    calls: list[int] = []

    def offline(user_id: int) -> str:
        calls.append(user_id)
        raise ConnectionError("the database is offline")

    tool = GET_USER + "circuit_breaker: {failures: 2, cooldown: 600, on: ConnectionError}\n"
    asks = [{"user_id": "seven"}, {"user_id": 1}, {"user_id": 2}, {"user_id": 3}]
    script: list[Any] = []
    for args in asks:
        script += [ScriptedReply(tool_calls=[("get_user", args)]), "sorry"]
    model = ScriptedModel(script)
    agent = Agent(
        write(tmp_path, {"chat.yaml": CHAT, "tool.yaml": tool}),
        "chat",
        llm=model,
        functions={"users.get_user": offline},
    )
    read = []
    for _ in asks:
        assert agent.step_sync("who?").status == "completed"
        read.append(model.calls[-1][-1].content)
    assert calls == [1, 2]  # a call that does not fit is not counted; the third is refused
    assert "not valid" in read[0]
    assert read[1:3] == ["Error: get_user raised ConnectionError: the database is offline"] * 2
    refusal = (
        "Error: get_user was not called: its circuit breaker opened after it failed "
        "(last: ConnectionError: the database is offline), and lets a trial call through "
        "in 600s. Answer without it until then."
    )
    assert read[3] == refusal
    state = agent.node_state_sync("get_user")
    assert (state.status, state.has_error, state.error) == ("failed", True, refusal)


SLOW = """
kind: ToolNode
name: slow
description: Takes too long
func: users.slow
timeout: 0.05
"""


async def _stuck() -> str:
    await anyio.sleep_forever()
    return "never"


def test_a_tools_timeout_answers_the_model_and_spares_the_other_calls(tmp_path: Path):
    chat = CHAT.replace("  - get_user\n", "  - get_user\n  - slow\n")
    script = [
        ScriptedReply(tool_calls=[("get_user", {"user_id": 1}), ("slow", {})]),
        "one of them timed out",
    ]
    model = ScriptedModel(script)
    agent = Agent(
        write(tmp_path, {"chat.yaml": chat, "tool.yaml": GET_USER, "slow.yaml": SLOW}),
        "chat",
        llm=model,
        functions={**FUNCTIONS, "users.slow": _stuck},
    )
    out = agent.step_sync("go")
    assert (out.status, out.output, out.failed_nodes) == ("completed", "one of them timed out", ())
    timed_out = "Error: slow did not answer within its 0.05s timeout."
    assert [m.content for m in model.calls[-1][-2:]] == ["user 1 (int)", timed_out]
    quick, slow = agent.node_state_sync("get_user"), agent.node_state_sync("slow")
    assert (quick.status, quick.has_error, quick.output) == ("completed", False, "user 1 (int)")
    assert (slow.status, slow.has_error, slow.error) == ("failed", True, timed_out)


def test_a_plain_def_tools_timeout_stops_waiting_for_its_thread(tmp_path: Path):
    release = threading.Event()

    def blocked() -> str:
        release.wait(5)
        return "late"

    model = ScriptedModel([ScriptedReply(tool_calls=[("slow", {})]), "too slow"])
    files = {"chat.yaml": CHAT.replace("get_user", "slow"), "slow.yaml": SLOW}
    agent = Agent(write(tmp_path, files), "chat", llm=model, functions={"users.slow": blocked})
    try:
        assert agent.step_sync("go").output == "too slow"
        assert model.calls[-1][-1].content == "Error: slow did not answer within its 0.05s timeout."
        assert not release.is_set()  # answered while the thread still waits
    finally:
        release.set()


def test_an_is_error_edge_takes_a_tools_timeout_with_its_error(tmp_path: Path):
    chat = CHAT.replace("get_user", "slow")
    slow = SLOW + "nodes:\n  - {target: apologize, when: \"$is_error('TimeoutError')\"}\n"
    apologize = "kind: LLMNode\nname: apologize\nprompts: {system: Apologize.}\n"
    sorry = ScriptedModel(["Sorry, it is slow today."])
    chat_model = ScriptedModel([ScriptedReply(tool_calls=[("slow", {})])])
    model = ByPrompt({"You answer": chat_model, "Apologize": sorry})
    files = {"chat.yaml": chat, "slow.yaml": slow, "sorry.yaml": apologize}
    agent = Agent(write(tmp_path, files), "chat", llm=model, functions={"users.slow": _stuck})
    out = agent.step_sync("go")
    assert (out.status, out.output) == ("completed", "Sorry, it is slow today.")
    error = "NodeTimeoutError: Node 'slow' timed out after 0.05s"
    assert sorry.calls[0][-1].content.startswith(f"slow failed: {error}")
    state = agent.node_state_sync("slow")
    assert state.status == "failed" and (state.error or "").startswith(error)


def test_a_node_that_asks_a_person_pauses_the_step(tmp_path: Path):
    from nodestep import interrupt

    def approve(text: str) -> str:
        return str(interrupt(f"send {text!r}?", id="approve"))

    chat = CHAT.replace("tools:\n  - get_user\n", "nodes: [approve]\n")
    files = {"chat.yaml": chat, "approve.yaml": "kind: Node\nname: approve\nfunc: ok.approve\n"}
    store = SQLiteStateStore(tmp_path / "a.db")
    agent = Agent(
        write(tmp_path, files),
        "chat",
        llm=ScriptedModel(["draft"]),
        functions={"ok.approve": approve},
        state_store=store,
    )
    out = agent.step_sync("go")
    assert (out.status, out.output) == ("paused", "")
    assert agent.node_state_sync("approve").status == "running"


def _asking_agent(tmp_path: Path, store: SQLiteStateStore) -> Agent:
    from nodestep import interrupt

    def approve(text: str) -> str:
        return "sent: " + str(interrupt(f"send {text!r}?", id="approve"))

    chat = CHAT.replace("tools:\n  - get_user\n", "nodes: [approve]\n")
    files = {"chat.yaml": chat, "approve.yaml": "kind: Node\nname: approve\nfunc: ok.approve\n"}
    return Agent(
        write(tmp_path, files),
        "chat",
        llm=ScriptedModel(["draft one", "draft two"]),
        functions={"ok.approve": approve},
        state_store=store,
    )


def test_a_paused_step_says_what_it_asks_and_resume_answers_it(tmp_path: Path):
    store = SQLiteStateStore(tmp_path / "a.db")
    agent = _asking_agent(tmp_path, store)
    paused = agent.step_sync("go")
    assert paused.status == "paused"
    assert [(i.node, i.id, i.payload) for i in paused.interrupts] == [
        ("approve", "approve", "send 'draft one'?")
    ]
    done = agent.step_sync(resume="yes")
    assert (done.status, done.output, done.interrupts) == ("completed", "sent: yes", ())
    assert done.execution_id == paused.execution_id
    assert agent.node_state_sync("approve").output == "sent: yes"
    # The conversation goes on, and a new Agent on the store answers its next pause.
    assert agent.step_sync("and another").status == "paused"
    again = _asking_agent(tmp_path, store)
    out = again.step_sync(resume=Resume("no"), execution_id=paused.execution_id)
    assert (out.status, out.output) == ("completed", "sent: no")


def test_text_sent_to_a_paused_conversation_is_refused_saying_to_resume(tmp_path: Path):
    agent = _asking_agent(tmp_path, SQLiteStateStore(tmp_path / "a.db"))
    paused = agent.step_sync("go")
    with pytest.raises(ResumeError, match=r"is paused: .*'approve:approve'.*step\(resume=answer\)"):
        agent.step_sync("are you there?")
    # Nothing was recorded as failed: the step is still paused and can be answered.
    assert agent.node_state_sync("approve").status == "running"
    assert agent.step_sync(resume="yes", execution_id=paused.execution_id).output == "sent: yes"


class HandsOverAfterRefusing(SQLiteStateStore):
    """A store whose other writer gives the branch back just after a run was refused."""

    held: Any = None

    async def acquire_lease(self, *args: Any, **kwargs: Any) -> Any:
        try:
            return await super().acquire_lease(*args, **kwargs)
        except ThreadBusyError:
            await self._hand_over()
            raise

    async def acquire_and_append(self, *args: Any, **kwargs: Any) -> Any:
        # A run on a conversation its agent knows takes the lease with its first records.
        try:
            return await super().acquire_and_append(*args, **kwargs)
        except ThreadBusyError:
            await self._hand_over()
            raise

    async def _hand_over(self) -> None:
        if self.held is not None:
            await self.release_lease(self.held)
            self.held = None


@pytest.mark.anyio
async def test_a_step_refused_by_another_writer_leaves_that_writers_records_alone(
    tmp_path: Path,
) -> None:
    store = HandsOverAfterRefusing(tmp_path / "a.db")
    agent = _asking_agent(tmp_path, store)
    thread = (await agent.step("go")).execution_id
    # Another writer holds the paused conversation and lets go right after refusing us.
    # Its paused node reads "running", and the conversation waits for its answer.
    store.held = await store.acquire_lease(thread, "main", "other", ttl=30)
    refused = await agent.step(resume="yes", execution_id=thread)
    assert store.held is None  # given back before the refusal was handled
    assert (refused.status, refused.failed_nodes) == ("failed", ())
    assert refused.error is not None and refused.error.startswith("ThreadBusyError: ")
    approve = await agent.node_state("approve", execution_id=thread)
    assert (approve.status, approve.has_error, approve.error) == ("running", False, None)
    done = await agent.step(resume="yes", execution_id=thread)
    assert (done.status, done.output) == ("completed", "sent: yes")


@pytest.mark.anyio
async def test_record_failure_records_nothing_for_another_writers_refusal(tmp_path: Path) -> None:
    agent = _asking_agent(tmp_path, SQLiteStateStore(tmp_path / "a.db"))
    thread = (await agent.step("go")).execution_id
    for error in ("ThreadBusyError: held by run 1", "ThreadConflictError: moved on"):
        assert await agent.record_failure(thread, error) == ()
    assert (await agent.node_state("approve")).status == "running"
    assert await agent.record_failure(thread, RuntimeError("the disk is full")) == ("approve",)
    approve = await agent.node_state("approve")
    assert (approve.status, approve.error) == ("failed", "RuntimeError: the disk is full")


def test_resume_on_a_conversation_that_is_not_paused_is_refused(tmp_path: Path):
    agent = _asking_agent(tmp_path, SQLiteStateStore(tmp_path / "a.db"))
    agent.step_sync("go")
    agent.step_sync(resume="yes")
    with pytest.raises(ResumeError, match=r"is not paused: .*agent\.step\(text\)"):
        agent.step_sync(resume="yes")
    with pytest.raises(GraphConfigError, match=r"the user's text or resume=, not both"):
        agent.step_sync("text", resume="yes")
    with pytest.raises(GraphConfigError, match=r"pass step\(resume=answer\)"):
        agent.step_sync()
