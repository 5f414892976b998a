"""The benchmark workloads written against LangGraph.

State schemas are ``TypedDict`` (LangGraph's documented default and its fastest
schema kind); reducers use ``operator.add``.  Every builder runs its graph once and
checks the result before handing back timed callables, so a figure is never taken
from a graph that does the wrong thing.
"""

from __future__ import annotations

import asyncio
import itertools
import operator
import os
import sqlite3
from collections.abc import Callable
from dataclasses import dataclass
from typing import Annotated, Any, TypedDict

from harness import GET_STATE_CALLS, AsyncDriver, Timed, now_ns, time_sync
from langgraph.checkpoint.memory import InMemorySaver
from langgraph.checkpoint.sqlite import SqliteSaver
from langgraph.graph import END, START, StateGraph
from langgraph.types import Command

_ids = itertools.count()


def _thread() -> dict[str, Any]:
    return {"configurable": {"thread_id": f"lg-{next(_ids)}"}}


def _check(cond: bool, what: str) -> None:
    if not cond:
        raise AssertionError(f"langgraph workload misbehaved: {what}")


# ---------------------------------------------------------------- W1 / W2: chain


class CounterState(TypedDict):
    n: int


def _inc_sync() -> Any:
    def inc(state: CounterState) -> dict[str, int]:
        return {"n": state["n"] + 1}

    return inc


def _inc_async() -> Any:
    async def inc(state: CounterState) -> dict[str, int]:
        return {"n": state["n"] + 1}

    return inc


def _chain_graph(length: int, make: Any, checkpointer: Any = None) -> Any:
    b = StateGraph(CounterState)
    for i in range(length):
        b.add_node(f"n{i}", make())
    b.add_edge(START, "n0")
    for i in range(length - 1):
        b.add_edge(f"n{i}", f"n{i + 1}")
    b.add_edge(f"n{length - 1}", END)
    return b.compile(checkpointer=checkpointer)


def chain(length: int, driver: AsyncDriver, *, memory_store: bool = False) -> dict[str, Timed]:
    """W1 (no checkpointer) or W2 (InMemorySaver, fresh thread id per run)."""
    saver = InMemorySaver() if memory_store else None
    g_sync = _chain_graph(length, _inc_sync, saver)
    g_async = _chain_graph(length, _inc_async, saver)
    recursion = {"recursion_limit": length + 10}

    def cfg() -> dict[str, Any]:
        return {**recursion, **_thread()} if memory_store else dict(recursion)

    _check(g_sync.invoke({"n": 0}, config=cfg())["n"] == length, "chain sync result")
    _check(driver.run(g_async.ainvoke({"n": 0}, config=cfg()))["n"] == length, "chain async")

    def run_sync() -> int:
        c = cfg()
        return time_sync(lambda: g_sync.invoke({"n": 0}, config=c))

    def run_async() -> int:
        c = cfg()
        return driver.timed(lambda: g_async.ainvoke({"n": 0}, config=c))

    return {"sync": run_sync, "async": run_async}


# ---------------------------------------------------------------- W3: fan-out


class FanState(TypedDict):
    items: Annotated[list[int], operator.add]
    total: int


def _fan_graph(width: int, is_async: bool, joined: bool = False) -> Any:
    """``joined``: one waiting edge ``add_edge([p0, ...], "join")`` instead of 50 edges."""
    b = StateGraph(FanState)

    if is_async:

        async def start(state: FanState) -> dict[str, Any]:
            return {"total": 0}

        async def join(state: FanState) -> dict[str, Any]:
            return {"total": len(state["items"])}

        def leaf(i: int) -> Any:
            async def f(state: FanState) -> dict[str, Any]:
                return {"items": [i]}

            return f
    else:

        def start(state: FanState) -> dict[str, Any]:
            return {"total": 0}

        def join(state: FanState) -> dict[str, Any]:
            return {"total": len(state["items"])}

        def leaf(i: int) -> Any:
            def f(state: FanState) -> dict[str, Any]:
                return {"items": [i]}

            return f

    b.add_node("start", start)
    b.add_node("join", join)
    b.add_edge(START, "start")
    for i in range(width):
        b.add_node(f"p{i}", leaf(i))
        b.add_edge("start", f"p{i}")
        if not joined:
            b.add_edge(f"p{i}", "join")
    if joined:
        b.add_edge([f"p{i}" for i in range(width)], "join")
    b.add_edge("join", END)
    return b.compile()


def fanout(width: int, driver: AsyncDriver, joined: bool = False) -> dict[str, Timed]:
    g_sync = _fan_graph(width, False, joined)
    g_async = _fan_graph(width, True, joined)
    r = g_sync.invoke({"items": [], "total": 0})
    _check(r["total"] == width and sorted(r["items"]) == list(range(width)), "fan-out sync")
    r = driver.run(g_async.ainvoke({"items": [], "total": 0}))
    _check(r["total"] == width and sorted(r["items"]) == list(range(width)), "fan-out async")

    def run_sync() -> int:
        return time_sync(lambda: g_sync.invoke({"items": [], "total": 0}))

    def run_async() -> int:
        return driver.timed(lambda: g_async.ainvoke({"items": [], "total": 0}))

    return {"sync": run_sync, "async": run_async}


# ---------------------------------------------------------------- W4 / W5: durable loop

SQLITE_SYNC_NAMES = {0: "OFF", 1: "NORMAL", 2: "FULL", 3: "EXTRA"}


def _loop_graph(target: int, checkpointer: Any) -> Any:
    def loop(state: CounterState) -> Command[Any]:
        n = state["n"] + 1
        return Command(update={"n": n}, goto="loop" if n < target else END)

    b = StateGraph(CounterState)
    b.add_node("loop", loop, destinations=("loop", END))
    b.add_edge(START, "loop")
    return b.compile(checkpointer=checkpointer)


def open_sqlite(path: str, synchronous: str | None = None) -> tuple[sqlite3.Connection, Any]:
    """A connection and saver as the LangGraph docs show them; ``synchronous``
    optionally overrides SQLite's default (used only for the labelled variant)."""
    conn = sqlite3.connect(path, check_same_thread=False)
    saver = SqliteSaver(conn)
    saver.setup()  # creates tables and switches to WAL; kept out of timed runs
    if synchronous is not None:
        conn.execute(f"PRAGMA synchronous={synchronous}")
    return conn, saver


def sqlite_settings(conn: sqlite3.Connection) -> str:
    mode = conn.execute("PRAGMA journal_mode").fetchone()[0]
    sync = conn.execute("PRAGMA synchronous").fetchone()[0]
    return f"journal_mode={mode}, synchronous={SQLITE_SYNC_NAMES.get(sync, sync)}"


def remove_db(path: str) -> None:
    for p in (path, path + "-wal", path + "-shm"):
        if os.path.exists(p):
            os.remove(p)


def db_bytes(path: str) -> int:
    return sum(os.path.getsize(p) for p in (path, path + "-wal") if os.path.exists(p))


@dataclass
class DurableLoop:
    run: Timed
    settings: str
    last_path: list[str]
    stored_bytes: Callable[[], int]


def durable_loop(
    target: int,
    tmpdir: str,
    driver: AsyncDriver | None = None,
    *,
    synchronous: str | None = None,
    tag: str = "default",
) -> DurableLoop:
    """W4: one node looping ``target`` times, SqliteSaver on a fresh database per run."""
    counter = itertools.count()
    last: list[str] = []
    conns: list[sqlite3.Connection] = []

    def fresh() -> tuple[Any, str]:
        for c in conns:
            c.close()
        conns.clear()
        path = os.path.join(tmpdir, f"lg-loop-{tag}-{next(counter)}.sqlite")
        conn, saver = open_sqlite(path, synchronous)
        conns.append(conn)
        return _loop_graph(target, saver), path

    g, path = fresh()
    settings = sqlite_settings(conns[0])
    cfg = {"recursion_limit": 2 * target, **_thread()}
    _check(g.invoke({"n": 0}, config=cfg)["n"] == target, "durable loop result")
    last.append(path)

    def run() -> int:
        graph, p = fresh()
        if last:
            remove_db(last[0])
        last[:] = [p]
        c = {"recursion_limit": 2 * target, **_thread()}
        return time_sync(lambda: graph.invoke({"n": 0}, config=c))

    def stored_bytes() -> int:
        """Size of the last run's database once its WAL is checkpointed into it."""
        conns[0].execute("PRAGMA wal_checkpoint(TRUNCATE)")
        return db_bytes(last[0])

    return DurableLoop(run=run, settings=settings, last_path=last, stored_bytes=stored_bytes)


def build_long_thread(target: int, path: str) -> tuple[Any, dict[str, Any], sqlite3.Connection]:
    conn, saver = open_sqlite(path)
    g = _loop_graph(target, saver)
    cfg = _thread()
    g.invoke({"n": 0}, config={"recursion_limit": 2 * target, **cfg})
    return g, cfg, conn


def history_reads(target: int, path: str) -> dict[str, Timed]:
    """W5: full history and latest state of a ``target``-step thread in SQLite."""
    g, cfg, _conn = build_long_thread(target, path)
    hist = list(g.get_state_history(cfg))
    _check(len(hist) >= target, f"history has {len(hist)} checkpoints, expected >= {target}")
    _check(g.get_state(cfg).values["n"] == target, "get_state value")

    # "cold": a new sqlite3 connection and SqliteSaver per call, as a fresh process
    # would open them; the compiled graph is reused, so building it is not timed.
    g_cold = _loop_graph(target, None)

    def cold(call: Callable[[Any], object]) -> int:
        t0 = now_ns()
        conn2 = sqlite3.connect(path, check_same_thread=False)
        g_cold.checkpointer = SqliteSaver(conn2)
        call(g_cold)
        dt = now_ns() - t0
        conn2.close()
        return dt

    def history_cold() -> int:
        return cold(lambda gr: list(gr.get_state_history(cfg)))

    def get_state_cold() -> int:
        return cold(lambda gr: gr.get_state(cfg))

    return {
        "history": lambda: time_sync(lambda: list(g.get_state_history(cfg))),
        "get_state": lambda: time_sync(lambda: g.get_state(cfg), repeat=GET_STATE_CALLS),
        "history_cold": history_cold,
        "get_state_cold": get_state_cold,
    }


# ---------------------------------------------------------------- W7: chat state


class ChatState(TypedDict):
    messages: Annotated[list[dict[str, str]], operator.add]
    turn: int
    user: str
    topic: str


def _chat_graph(steps: int, checkpointer: Any) -> Any:
    def reply(state: ChatState) -> Command[Any]:
        turn = state["turn"]
        return Command(
            update={
                "messages": [{"role": "assistant", "content": f"reply {turn}"}],
                "turn": turn + 1,
            },
            goto="reply" if turn + 1 < steps else END,
        )

    b = StateGraph(ChatState)
    b.add_node("reply", reply, destinations=("reply", END))
    b.add_edge(START, "reply")
    return b.compile(checkpointer=checkpointer)


def chat(
    history: int,
    steps: int,
    tmpdir: str | None,
    messages: list[dict[str, str]],
    driver: AsyncDriver | None = None,
) -> Timed:
    """W7: ``steps`` appends to a state already holding ``history`` messages.

    ``tmpdir`` None = no checkpointer; otherwise SqliteSaver on a fresh file per run.
    """
    msgs = messages
    counter = itertools.count()
    conns: list[sqlite3.Connection] = []
    paths: list[str] = []

    def inp() -> dict[str, Any]:
        return {"messages": list(msgs), "turn": 0, "user": "u-1", "topic": "benchmarks"}

    def graph_and_cfg() -> tuple[Any, dict[str, Any]]:
        limit = {"recursion_limit": steps + 10}
        if tmpdir is None:
            return _chat_graph(steps, None), limit
        for c in conns:
            c.close()
        conns.clear()
        for old in paths:
            remove_db(old)
        path = os.path.join(tmpdir, f"lg-chat-{history}-{steps}-{next(counter)}.sqlite")
        paths[:] = [path]
        conn, saver = open_sqlite(path)
        conns.append(conn)
        return _chat_graph(steps, saver), {**limit, **_thread()}

    g, cfg = graph_and_cfg()
    r = g.invoke(inp(), config=cfg)
    _check(len(r["messages"]) == history + steps and r["turn"] == steps, "chat result")
    mem_graph = g

    def run() -> int:
        graph, c = (mem_graph, cfg) if tmpdir is None else graph_and_cfg()
        i = inp()
        return time_sync(lambda: graph.invoke(i, config=c))

    return run


# ---------------------------------------------------------------- W8: concurrent durable runs


def concurrent_runs(threads: int, runs: int, tmpdir: str, driver: AsyncDriver) -> Timed:
    """W8: ``threads`` threads at once, ``runs`` one-node runs each, on ``AsyncSqliteSaver``.

    WAL with ``synchronous=FULL`` (a flush per commit, which survives power loss, as
    nodestep's ``fsync=True``). A sample is all ``threads * runs`` runs, on a fresh
    database; opening it is not timed.
    """
    import aiosqlite  # only W8 needs them: the other workloads run without
    from langgraph.checkpoint.sqlite.aio import AsyncSqliteSaver

    counter = itertools.count()
    b = StateGraph(CounterState)
    b.add_node("inc", _inc_async())
    b.add_edge(START, "inc")
    b.add_edge("inc", END)

    async def body() -> int:
        path = os.path.join(tmpdir, f"lg-w8-{next(counter)}.sqlite")
        conn = await aiosqlite.connect(path)
        saver = AsyncSqliteSaver(conn)
        await saver.setup()
        await conn.execute("PRAGMA synchronous=FULL")
        mode = await (await conn.execute("PRAGMA journal_mode")).fetchone()
        sync = await (await conn.execute("PRAGMA synchronous")).fetchone()
        _check((mode[0], sync[0]) == ("wal", 2), f"W8 SQLite settings {mode[0]}, {sync[0]}")
        graph = b.compile(checkpointer=saver)
        prefix = f"lg-w8-{next(_ids)}"

        async def thread(k: int) -> int:
            n = 0
            for _ in range(runs):
                cfg = {"configurable": {"thread_id": f"{prefix}-{k}"}}
                n = (await graph.ainvoke({"n": n}, config=cfg))["n"]
            return n

        t0 = now_ns()
        done = await asyncio.gather(*(thread(k) for k in range(threads)))
        elapsed = now_ns() - t0
        await conn.close()
        remove_db(path)
        _check(list(done) == [runs] * threads, "concurrent durable runs")
        return elapsed

    driver.run(body())  # once, checked, before any timing
    return lambda: driver.run(body())
