"""W10: an agent's conversation turn by turn, on SQLite, nodestep's ``Agent`` vs LangGraph.

Each turn is one user message; the model calls one tool, reads its result and answers:
two model calls and one tool call per turn. The conversation is kept on a durable store of
the same kind on both sides, SQLite with ``synchronous=FULL``: nodestep's
``SQLiteStateStore`` under ``Agent`` (a specs folder with one LLMNode and one ToolNode), and
LangGraph's ``SqliteSaver`` under ``langgraph.prebuilt.create_react_agent``.

The model is scripted on both sides and picks its reply the same way, from the
conversation it is given (the n-th reply answers a conversation holding n - 1 assistant
messages): nodestep's ``ScriptedModel``, and langchain_core's ``FakeMessagesListChatModel``
with that choice of reply (its own cycles through a counter shared by every conversation)
and a ``bind_tools`` that returns the model, which the prebuilt agent calls.

A *conversation* is an object whose ``turn()`` runs its next turn and returns the time
that took in nanoseconds; building it (the agent, the thread) is outside the timed
interval. LangGraph is imported only by the LangGraph builder.
"""

from __future__ import annotations

import itertools
import os
from collections.abc import Callable
from typing import Any

from harness import now_ns

Conversation = Callable[[], int]
"""Run the conversation's next turn; return how long it took, in nanoseconds."""

ORDERS_TOOL = "lookup_order"
_ids = itertools.count()


def _check(cond: bool, what: str) -> None:
    if not cond:
        raise AssertionError(f"agent turns workload misbehaved: {what}")


def question(turn: int) -> str:
    return f"Where is order {turn}?"


def shipping(order: int) -> str:
    """The tool: where an order is."""
    return f"order {order}: shipped on day {order % 7}"


def answer(turn: int) -> str:
    return f"Order {turn} shipped on day {turn % 7}."


def three_turns(new: Callable[[], Conversation]) -> Callable[[], int]:
    """A timed callable: a new conversation (untimed), then its first three turns."""

    def run() -> int:
        conversation = new()
        return sum(conversation() for _ in range(3))

    return run


def langgraph_conversations(
    tmpdir: str, max_turns: int, synchronous: str, tag: str
) -> Callable[[], Conversation]:
    """A factory of LangGraph conversations, each a new thread of one ``SqliteSaver``."""
    import warnings

    from langchain_core.language_models.fake_chat_models import FakeMessagesListChatModel
    from langchain_core.messages import AIMessage, BaseMessage
    from langchain_core.outputs import ChatGeneration, ChatResult
    from langchain_core.tools import tool
    from workloads_langgraph import open_sqlite

    with warnings.catch_warnings():  # moved to langchain.agents in LangGraph 1.0; still there
        warnings.simplefilter("ignore")
        from langgraph.prebuilt import create_react_agent

    class ConversationFake(FakeMessagesListChatModel):
        def bind_tools(self, tools: Any, **kwargs: Any) -> Any:
            return self

        def _generate(
            self, messages: list[BaseMessage], stop: Any = None, run_manager: Any = None, **kw: Any
        ) -> ChatResult:
            replied = sum(isinstance(m, AIMessage) for m in messages)
            return ChatResult(generations=[ChatGeneration(message=self.responses[replied])])

    @tool(ORDERS_TOOL)
    def lookup_order(order: int) -> str:
        """Find where an order is."""
        return shipping(order)

    script: list[BaseMessage] = []
    for turn in range(max_turns):
        call = {"name": ORDERS_TOOL, "args": {"order": turn}, "id": f"call-{turn}"}
        # Ids as a provider gives them: add_messages would merge two replies with one id.
        script.append(AIMessage(content="", tool_calls=[call], id=f"reply-{turn}-call"))
        script.append(AIMessage(content=answer(turn), id=f"reply-{turn}-answer"))
    _, saver = open_sqlite(os.path.join(tmpdir, f"w10-{tag}.sqlite"), synchronous)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        agent = create_react_agent(
            ConversationFake(responses=script), [lookup_order], checkpointer=saver
        )

    def new() -> Conversation:
        config = {"configurable": {"thread_id": f"w10-{next(_ids)}"}, "recursion_limit": 10}
        turns = itertools.count()

        def turn() -> int:
            n = next(turns)
            t0 = now_ns()
            messages = agent.invoke({"messages": [("user", question(n))]}, config)["messages"]
            elapsed = now_ns() - t0
            _check(len(messages) == 4 * (n + 1), f"langgraph turn {n}: {len(messages)} messages")
            _check(messages[-1].content == answer(n), f"langgraph turn {n}: {messages[-1]}")
            return elapsed

        return turn

    return new


CHAT_SPEC = f"""\
kind: LLMNode
name: chat
prompts:
  system:
    en: You are the order desk. Look orders up before you answer.
tools:
  - {ORDERS_TOOL}
"""
TOOL_SPEC = f"""\
kind: ToolNode
name: {ORDERS_TOOL}
description: Find where an order is
func: bench.{ORDERS_TOOL}
arguments:
  - name: order
    type: integer
    description: The order's number
"""


def nodestep_conversations(
    tmpdir: str, max_turns: int, synchronous: str | None, tag: str
) -> Callable[[], Conversation]:
    """A factory of nodestep conversations: one ``Agent`` on one ``SQLiteStateStore``.

    ``synchronous=None`` puts the agent on an ``InMemoryStateStore`` instead: the same
    turn without a durable store, which shows how much of a turn the store takes.

    Each conversation is a new ``execution_id``, as a server's one agent serves many. The
    agent runs on an event loop that lives as long as the benchmark (an anyio blocking
    portal), as in a server: a worker thread that ran a plain ``def`` tool stays for the
    next call, where a loop run anew for each turn would start a thread every time. The
    turn is timed on that loop, around ``await agent.step(...)``.
    """
    from anyio.from_thread import start_blocking_portal

    from nodestep import Agent, InMemoryStateStore, ScriptedModel, ScriptedReply, SQLiteStateStore
    from nodestep.agents import ToolCall

    specs = os.path.join(tmpdir, "w10-specs")
    os.makedirs(specs, exist_ok=True)
    for name, text in (("chat.yaml", CHAT_SPEC), ("tool.yaml", TOOL_SPEC)):
        with open(os.path.join(specs, name), "w", encoding="utf-8") as f:
            f.write(text)
    script: list[Any] = []
    for turn in range(max_turns):
        call = ToolCall(name=ORDERS_TOOL, args={"order": turn}, id=f"call-{turn}")
        script += [ScriptedReply(tool_calls=[call]), answer(turn)]
    store: InMemoryStateStore | SQLiteStateStore = (
        InMemoryStateStore()
        if synchronous is None
        else SQLiteStateStore(os.path.join(tmpdir, f"w10-{tag}.db"), synchronous=synchronous)
    )
    model = ScriptedModel(script)
    agent = Agent(
        specs,
        start_node="chat",
        llm=model,
        state_store=store,
        functions={f"bench.{ORDERS_TOOL}": shipping},
    )
    portal_cm = start_blocking_portal()
    portal = portal_cm.__enter__()
    _opened.append((portal_cm, portal, store))

    async def step(conversation: str, n: int) -> tuple[int, Any]:
        t0 = now_ns()
        out = await agent.step(question(n), execution_id=conversation)
        return now_ns() - t0, out

    def new() -> Conversation:
        # The scripted model keeps every conversation it was asked about; only memory.
        model.calls.clear()
        conversation = f"w10-{next(_ids)}"
        turns = itertools.count()

        def turn() -> int:
            n = next(turns)
            elapsed, out = portal.call(step, conversation, n)
            _check(out.status == "completed", f"nodestep turn {n}: {out.status} {out.error}")
            _check(out.output == answer(n), f"nodestep turn {n}: {out.output!r}")
            return int(elapsed)

        return turn

    return new


def floor_conversations(
    tmpdir: str, max_turns: int, synchronous: str, tag: str
) -> Callable[[], Conversation]:
    """W10's floor: each turn hand-written, committed step by step to SQLite.

    What any durable agent must do at the least, with nothing an engine adds: the
    conversation is a list of dicts; each turn appends the user's message and the model's
    tool call, the tool's result, then the model's answer, and commits each of those three
    steps to the database (one ``INSERT`` of the step's orjson each, in a transaction of its
    own, in WAL mode), so that a crash loses no finished step. With ``synchronous="FULL"``
    the turn's last commit also flushes, so that a power cut loses no answered turn (a
    flush of the log covers the commits before it; nodestep's store does the same). The
    scripted reply is looked up by the turn's number, the tool's argument checked to be an
    int. No lease, no prompt, no events.
    """
    import sqlite3

    import orjson

    path = os.path.join(tmpdir, f"w10-{tag}.sqlite")
    db = sqlite3.connect(path, isolation_level=None, check_same_thread=False)
    db.execute("PRAGMA journal_mode=WAL")
    db.execute("PRAGMA synchronous=NORMAL")
    flush = synchronous == "FULL"
    db.execute("CREATE TABLE steps (thread TEXT, seq INT, body BLOB, PRIMARY KEY (thread, seq))")
    _floors.append(db)
    insert = "INSERT INTO steps VALUES (?, ?, ?)"

    def new() -> Conversation:
        thread = f"w10-{next(_ids)}"
        messages: list[dict[str, Any]] = []
        turns = itertools.count()

        def commit(*step: dict[str, Any], last: bool = False) -> None:
            if last and flush:
                db.execute("PRAGMA synchronous=FULL")
            db.execute("BEGIN IMMEDIATE")
            db.execute(insert, (thread, len(messages), orjson.dumps(step)))
            db.execute("COMMIT")
            if last and flush:
                db.execute("PRAGMA synchronous=NORMAL")

        def turn() -> int:
            n = next(turns)
            _check(n < max_turns, f"floor turn {n}: past the script")
            t0 = now_ns()
            call = {"name": ORDERS_TOOL, "args": {"order": n}, "id": f"call-{n}"}
            asked = {"role": "user", "content": question(n)}
            called = {"role": "assistant", "content": "", "tool_calls": [call]}
            messages.extend((asked, called))
            commit(asked, called)
            order = call["args"]["order"]  # type: ignore[index]
            _check(type(order) is int, f"floor turn {n}: order {order!r}")
            result = {"role": "tool", "content": shipping(order), "tool_call_id": call["id"]}
            messages.append(result)
            commit(result)
            answered = {"role": "assistant", "content": answer(n)}
            messages.append(answered)
            commit(answered, last=True)
            elapsed = now_ns() - t0
            _check(len(messages) == 4 * (n + 1), f"floor turn {n}: {len(messages)} messages")
            return elapsed

        return turn

    return new


_opened: list[tuple[Any, Any]] = []
_floors: list[Any] = []


def close() -> None:
    """Close the stores and loops the nodestep side opened, and the floor's databases;
    never timed."""
    while _floors:
        _floors.pop().close()
    while _opened:
        portal_cm, portal, store = _opened.pop()
        portal.call(store.aclose)
        portal_cm.__exit__(None, None, None)
