"""W11: a chat, one ``invoke`` per turn, on a thread whose conversation grows.

Each turn sends one user message into a thread whose state has a messages field with the
``add_messages`` reducer; a one-node graph answers with one scripted assistant message. So
after turn ``n`` the conversation holds ``2 * n`` messages. The figure is the cost of one
turn (one ``invoke``) at turn 20 and at turn 1,000, on every nodestep store (memory, file,
SQLite, and PostgreSQL when a server is given, as for the DB workload) and on LangGraph
with ``InMemorySaver`` and ``SqliteSaver``, all in this one process.

* Turn 20: each sample opens a new thread, runs 19 turns (not timed) and times the 20th.
* Turn 1,000: one thread per store, built before the timing; each sample runs the next
  turn untimed and times the one after, so the timed turns are a few dozen around turn
  1,000 (from ``TURN_LONG - LONG_REPS`` on, two turns a sample). nodestep's thread is
  built by real turns; LangGraph's by one turn whose input is the conversation so far
  (the questions and answers before and a question), then real turns: the same state,
  and a shorter history in its database, which can only make its turns cheaper
  (building it turn by turn took 75 s here).

LangGraph is imported only by the LangGraph builders.
"""

from __future__ import annotations

import dataclasses
import itertools
import os
from collections.abc import Callable
from typing import Any

from harness import Budget, Stats, Timed, measure, now_ns
from report import SCALING, Row, Target, ratio

TURN_SHORT, TURN_LONG = 20, 1000
LONG_REPS = 25  # at most this many timed turns on the long thread (plus the warm-up)
TARGETS = {"flat": Target("<=", 1.5), "vs SqliteSaver": Target(">=", 30)}

_ids = itertools.count()


def _check(cond: bool, what: str) -> None:
    if not cond:
        raise AssertionError(f"chat workload misbehaved: {what}")


class ChatSide:
    """One store of one side: ``turn(thread, n)`` runs turn ``n`` of a thread, timed."""

    def __init__(self, turn: Callable[[str, int], int], size: Callable[[str], int]) -> None:
        self.turn = turn
        self.size = size  # the number of messages the thread holds

    def short(self) -> Timed:
        """Time turn ``TURN_SHORT`` of a new thread; its first turns are not timed."""

        def run() -> int:
            tid = f"w11-{next(_ids)}"
            for n in range(1, TURN_SHORT):
                self.turn(tid, n)
            took = self.turn(tid, TURN_SHORT)
            _check(self.size(tid) == 2 * TURN_SHORT, f"{self.size(tid)} messages at turn 20")
            return took

        return run

    def long(self, build: Callable[[str, int], None], warmup: int) -> Timed:
        """Time turns of one long thread, ``build`` up to just before the window.

        A sample runs one turn untimed, then times the next, as a turn-20 sample times the
        turn right after its 19th: so each timed turn follows a turn of its own thread, not
        only the harness's ``gc.collect()`` or the other side's turns, which left the first
        turn after them up to 50% slower (cold caches, emptied free lists).
        """
        tid = f"w11-{next(_ids)}"
        first = TURN_LONG - LONG_REPS - warmup
        build(tid, first - 1)
        _check(self.size(tid) == 2 * (first - 1), "the long thread's conversation")
        turns = itertools.count(first)

        def run() -> int:
            self.turn(tid, next(turns))
            return self.turn(tid, next(turns))

        return run


# ---------------------------------------------------------------- nodestep


def nodestep_side(store: Any) -> ChatSide:
    """A one-node chat graph on ``store``: the reply names the question it answers."""
    from nodestep import END, START, Graph, MessagesState, node
    from nodestep.agents import AssistantMessage, UserMessage

    @node
    def reply(state: MessagesState) -> dict[str, Any]:
        return {"messages": [AssistantMessage(content=f"re: {state.messages[-1].content}")]}

    graph = Graph(MessagesState, name="w11", state_store=store).flow(START >> reply, reply >> END)

    def turn(tid: str, n: int) -> int:
        question = {"messages": [UserMessage(content=f"question {n}")]}
        t0 = now_ns()
        graph.invoke(question, thread_id=tid)
        return now_ns() - t0

    def size(tid: str) -> int:
        messages = graph.get_state_sync(tid).value.messages
        _check(messages[-1].content == f"re: question {len(messages) // 2}", "nodestep reply")
        return len(messages)

    return ChatSide(turn, size)


def nodestep_build(side: ChatSide) -> Callable[[str, int], None]:
    def build(tid: str, turns: int) -> None:
        for n in range(1, turns + 1):
            side.turn(tid, n)

    return build


# ---------------------------------------------------------------- LangGraph


def langgraph_side(saver: Any) -> tuple[ChatSide, Callable[[str, int], None]]:
    """The same graph on LangGraph's ``MessagesState`` and ``saver``."""
    from langchain_core.messages import AIMessage, HumanMessage
    from langgraph.graph import END, START, MessagesState, StateGraph

    def reply(state: MessagesState) -> dict[str, Any]:
        return {"messages": [AIMessage(content=f"re: {state['messages'][-1].content}")]}

    b = StateGraph(MessagesState)
    b.add_node("reply", reply)
    b.add_edge(START, "reply")
    b.add_edge("reply", END)
    graph = b.compile(checkpointer=saver)

    def config(tid: str) -> dict[str, Any]:
        return {"configurable": {"thread_id": tid}}

    def turn(tid: str, n: int) -> int:
        question = {"messages": [HumanMessage(content=f"question {n}")]}
        cfg = config(tid)
        t0 = now_ns()
        graph.invoke(question, cfg)
        return now_ns() - t0

    def size(tid: str) -> int:
        messages = graph.get_state(config(tid)).values["messages"]
        _check(messages[-1].content == f"re: question {len(messages) // 2}", "LangGraph reply")
        return len(messages)

    def build(tid: str, turns: int) -> None:
        """Run turn ``turns`` with every earlier question and answer as its input."""
        before: list[Any] = []
        for n in range(1, turns):
            before += [
                HumanMessage(content=f"question {n}"),
                AIMessage(content=f"re: question {n}"),
            ]
        graph.invoke(
            {"messages": [*before, HumanMessage(content=f"question {turns}")]}, config(tid)
        )

    return ChatSide(turn, size), build


# ---------------------------------------------------------------- the workload


NODESTEP_STORES = ("memory", "file", "sqlite", "postgres")
NAMES = {
    "memory": "InMemoryStateStore",
    "file": "FilesystemStateStore",
    "sqlite": "SQLiteStateStore",
    "postgres": "PostgresStateStore",
    "lg_memory": "LangGraph InMemorySaver",
    "lg_sqlite": "LangGraph SqliteSaver",
}


def _sides(ctx: Any, stores: Any) -> tuple[dict[str, ChatSide], dict[str, Callable[..., None]]]:
    """The chat on every store of the selected sides, and how to build each long thread."""
    import workloads_db

    sides: dict[str, ChatSide] = {}
    builds: dict[str, Callable[[str, int], None]] = {}
    if ctx.has("nodestep"):
        from nodestep import FilesystemStateStore, InMemoryStateStore

        file_store = FilesystemStateStore(os.path.join(ctx.tmpdir, "w11.jsonl"))
        stores.open.append(file_store)
        made: dict[str, Any] = {
            "memory": InMemoryStateStore(),
            "file": file_store,
            "sqlite": stores.sqlite(os.path.join(ctx.tmpdir, "w11.db"), "NORMAL"),
        }
        if workloads_db.dsn():
            made["postgres"] = stores.postgres()
        else:
            ctx.notes.append("W11: the PostgresStateStore row is skipped: no PostgreSQL server")
        for name, store in made.items():
            sides[name] = nodestep_side(store)
            builds[name] = nodestep_build(sides[name])
    if ctx.has("langgraph"):
        import workloads_langgraph as lgw
        from langgraph.checkpoint.memory import InMemorySaver

        _, saver = lgw.open_sqlite(os.path.join(ctx.tmpdir, "w11-lg.sqlite"))
        for name, lg_saver in (("lg_memory", InMemorySaver()), ("lg_sqlite", saver)):
            sides[name], builds[name] = langgraph_side(lg_saver)
    return sides, builds


def run(ctx: Any, head_row: Callable[..., None]) -> None:
    """Run W11 into ``ctx`` (run.py's context), rows as run.py adds them."""
    import workloads_db

    stores = workloads_db.Stores(ctx.driver)
    try:
        sides, builds = _sides(ctx, stores)
        budget: Budget = dataclasses.replace(
            ctx.budget, max_reps=min(ctx.budget.max_reps, LONG_REPS)
        )
        short = measure({k: s.short() for k, s in sides.items()}, budget=budget)
        print("  W11 building the long threads ...", flush=True)
        long: dict[str, Any] = {}
        # Each library's long threads are timed in a group of their own: a LangGraph turn
        # at turn 1,000 decodes its 2,000 messages into new objects, and round-robin with it
        # left the memory store's next turn up to 40% slower (1.57 against 1.15 alone, on
        # a quiet machine), a cost of the other side's garbage, not of the conversation.
        for group in (NODESTEP_STORES, ("lg_memory", "lg_sqlite")):
            cases = {k: sides[k].long(builds[k], budget.warmup) for k in group if k in sides}
            if cases:
                long.update(measure(cases, budget=budget))
        _rows(ctx, head_row, short, long)
    finally:
        stores.close()
    ctx.durability["W11"] = (
        "nodestep: FilesystemStateStore and SQLiteStateStore as they ship (no fsync per "
        "append; SQLite WAL + synchronous=NORMAL); LangGraph SqliteSaver as it ships (WAL + "
        "SQLite's default, FULL)"
    )


def _rows(
    ctx: Any, head_row: Callable[..., None], short: dict[str, Stats], long: dict[str, Stats]
) -> None:
    for name in (*NODESTEP_STORES, "lg_memory", "lg_sqlite"):
        if name not in short:
            continue
        ours = not name.startswith("lg_")
        ctx.add(
            Row(
                SCALING,
                "W11",
                f"{'nodestep ' if ours else ''}{NAMES[name]}, a chat turn (`invoke`): turn "
                f"{TURN_LONG:,} vs turn {TURN_SHORT}",
                "µs per turn",
                {"small": short[name], "large": long[name]},
                ratio=ratio(long[name], short[name]),
                ratio_of="turn 1,000 / turn 20",
                target=TARGETS["flat"] if ours else None,
                note=(
                    f"a turn adds 2 messages: {2 * TURN_SHORT} vs {2 * TURN_LONG} messages "
                    "after it; long = turns around 1,000 on one thread"
                    if name == "memory"
                    else ""
                ),
            )
        )
    both = {f"s|{k}": v for k, v in short.items()} | {f"l|{k}": v for k, v in long.items()}
    for ns, lg, target in (
        ("memory", "lg_memory", None),
        ("file", "lg_sqlite", TARGETS["vs SqliteSaver"]),
        ("sqlite", "lg_sqlite", TARGETS["vs SqliteSaver"]),
    ):
        for when, turn in (("s", TURN_SHORT), ("l", TURN_LONG)):
            head_row(
                ctx,
                "W11",
                f"chat turn {turn:,} (`invoke`); {NAMES[ns]} vs {NAMES[lg][10:]}",
                "µs per turn",
                both,
                ns=f"{when}|{ns}",
                lg=f"{when}|{lg}",
                floor=None,
                target=target if when == "l" else None,
                note="LangGraph's long thread holds the same conversation, stored by one turn"
                if when == "l" and ns == "file"
                else "",
            )
