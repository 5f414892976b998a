"""The agent workloads: W9 (a ReAct agent's steps) and W7 with typed messages.

W9 runs a prebuilt ReAct agent whose model calls one tool ``rounds`` times, then answers:
``2 * rounds + 1`` node steps per run (model, tools, model, ..., model). The model is
scripted on both sides: nodestep's ``ScriptedModel``, and for LangGraph's
``create_react_agent`` langchain_core's ``FakeMessagesListChatModel`` (with a
``bind_tools`` that returns the model, which the prebuilt agent calls). So the figure is
the overhead of the model node and the tool node, without any model.

LangGraph is imported only by the LangGraph builders.
"""

from __future__ import annotations

import itertools
import os
from typing import Any

from harness import AsyncDriver, Timed, now_ns, time_sync

MANUAL = {"rated_capacity": "720 Watts", "model": "PureSine 900VA"}
_paths = itertools.count()


def _check(cond: bool, what: str) -> None:
    if not cond:
        raise AssertionError(f"agent workload misbehaved: {what}")


def nodestep_agent(rounds: int, driver: AsyncDriver) -> dict[str, Timed]:
    """W9 on nodestep: ``create_react_agent`` with a ``ScriptedModel``, no store."""
    from nodestep import ScriptedModel, ScriptedReply, create_react_agent, tool

    @tool
    def lookup(topic: str) -> str:
        """Look up a topic in the manual."""
        return MANUAL.get(topic, "no match")

    script: list[Any] = [
        ScriptedReply(tool_calls=[("lookup", {"topic": "rated_capacity"})]) for _ in range(rounds)
    ]
    model = ScriptedModel([*script, "It handles 720 W."])
    agent = create_react_agent(model, [lookup], max_steps=2 * rounds + 5)
    question = {"messages": [("user", "What load can it handle?")]}

    result = agent.invoke(question).state.messages
    _check(len(result) == 2 * rounds + 2 and result[-1].content == "It handles 720 W.", "ns")
    done = driver.run(agent.ainvoke(question)).state.messages
    _check(len(done) == 2 * rounds + 2, "nodestep agent async")
    return {
        "sync": lambda: time_sync(lambda: agent.invoke(question)),
        "async": lambda: driver.timed(lambda: agent.ainvoke(question)),
    }


def langgraph_agent(rounds: int, driver: AsyncDriver) -> dict[str, Timed]:
    """W9 on LangGraph: ``create_react_agent`` with ``FakeMessagesListChatModel``."""
    import warnings

    from langchain_core.language_models.fake_chat_models import FakeMessagesListChatModel
    from langchain_core.messages import AIMessage
    from langchain_core.tools import tool

    with warnings.catch_warnings():  # moved to langchain.agents in LangGraph 1.0; still there
        warnings.simplefilter("ignore")
        from langgraph.prebuilt import create_react_agent

    class ToolCallingFake(FakeMessagesListChatModel):
        def bind_tools(self, tools: Any, **kwargs: Any) -> Any:
            return self

    @tool
    def lookup(topic: str) -> str:
        """Look up a topic in the manual."""
        return MANUAL.get(topic, "no match")

    calls = [
        AIMessage(
            content="",
            tool_calls=[{"name": "lookup", "args": {"topic": "rated_capacity"}, "id": f"c{i}"}],
        )
        for i in range(rounds)
    ]
    # The fake model cycles through its responses, so each run starts at the first.
    model = ToolCallingFake(responses=[*calls, AIMessage(content="It handles 720 W.")])
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        agent = create_react_agent(model, [lookup])
    config = {"recursion_limit": 2 * rounds + 5}
    question = {"messages": [("user", "What load can it handle?")]}

    result = agent.invoke(question, config)["messages"]
    _check(len(result) == 2 * rounds + 2 and result[-1].content == "It handles 720 W.", "lg")
    done = driver.run(agent.ainvoke(question, config))["messages"]
    _check(len(done) == 2 * rounds + 2, "langgraph agent async")
    return {
        "sync": lambda: time_sync(lambda: agent.invoke(question, config)),
        "async": lambda: driver.timed(lambda: agent.ainvoke(question, config)),
    }


def floor_agent(rounds: int) -> Timed:
    """W9's floor: the same replies and tool calls in a plain loop, dict messages."""

    def lookup(topic: str) -> str:
        return MANUAL.get(topic, "no match")

    def run() -> int:
        t0 = now_ns()
        messages: list[dict[str, Any]] = [{"role": "user", "content": "What load?"}]
        for i in range(rounds):
            call = {"id": f"c{i}", "name": "lookup", "args": {"topic": "rated_capacity"}}
            messages = [*messages, {"role": "assistant", "content": "", "tool_calls": [call]}]
            result = lookup(**call["args"])  # type: ignore[arg-type]
            messages = [*messages, {"role": "tool", "content": result, "tool_call_id": call["id"]}]
        messages = [*messages, {"role": "assistant", "content": "It handles 720 W."}]
        _check(len(messages) == 2 * rounds + 2, "floor agent")
        return now_ns() - t0

    return run


def nodestep_typed_chat(history: int, steps: int, tmpdir: str | None, driver: AsyncDriver) -> Timed:
    """W7 with typed messages: a node reads the conversation and appends a reply.

    The state is a ``MessagesState`` holding ``history`` typed messages; each step reads
    ``state.messages`` (as a model node does) and writes one ``AssistantMessage`` through
    ``add_messages``. ``tmpdir`` None = no store; otherwise a file store on a fresh file.
    """
    from nodestep import END, START, Command, FilesystemStateStore, Graph, MessagesState, node
    from nodestep.agents import AssistantMessage, UserMessage

    class Chat(MessagesState):
        turn: int = 0

    @node(goto=["reply", END])
    def reply(state: Chat) -> Command:
        seen = len(state.messages)
        return Command(
            update={
                "messages": [AssistantMessage(content=f"reply {seen}")],
                "turn": state.turn + 1,
            },
            goto=reply if state.turn + 1 < steps else END,
        )

    start = [UserMessage(content=f"message number {i}", id=f"m-{i}") for i in range(history)]
    opened: list[Any] = []

    def graph_and_kw() -> tuple[Any, dict[str, Any]]:
        store = None
        kw: dict[str, Any] = {}
        for old in opened:
            driver.run(old.aclose())
            os.remove(old.path)
        opened.clear()
        if tmpdir is not None:
            store = FilesystemStateStore(os.path.join(tmpdir, f"ns-typed-{next(_paths)}.jsonl"))
            opened.append(store)
            kw = {"thread_id": "typed"}
        graph = Graph(Chat, name="typed_chat", max_steps=steps + 10, state_store=store)
        return graph.flow(START >> reply), kw

    graph, kw = graph_and_kw()
    state = graph.invoke({"messages": start}, **kw).state
    _check(len(state.messages) == history + steps and state.turn == steps, "typed chat")
    memory_graph = graph

    def run() -> int:
        g, k = (memory_graph, {}) if tmpdir is None else graph_and_kw()
        return time_sync(lambda: g.invoke({"messages": start}, **k))

    return run
