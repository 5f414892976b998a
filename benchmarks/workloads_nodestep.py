"""The benchmark workloads written against nodestep.

Each builder mirrors the function of the same name in ``workloads_langgraph``:
same graph shape, same node bodies, same inputs.  Every builder runs its graph once
and checks the result before handing back timed callables.
"""

from __future__ import annotations

import asyncio
import inspect
import itertools
import os
from collections.abc import Awaitable, Callable
from dataclasses import dataclass
from typing import Annotated, Any

from harness import GET_STATE_CALLS, AsyncDriver, Timed, now_ns, time_sync
from pydantic import Field

from nodestep import (
    END,
    START,
    BaseState,
    Command,
    FilesystemStateStore,
    Graph,
    InMemoryStateStore,
    add,
    node,
)

_ids = itertools.count()


def _thread() -> str:
    return f"ns-{next(_ids)}"


def _check(cond: bool, what: str) -> None:
    if not cond:
        raise AssertionError(f"nodestep workload misbehaved: {what}")


def has_fsync_option() -> bool:
    return "fsync" in inspect.signature(FilesystemStateStore).parameters


_open_stores: list[Any] = []


def file_store(path: str, *, fsync: bool = False) -> Any:
    """A FilesystemStateStore, remembered so ``close_stores`` can close it later."""
    store = FilesystemStateStore(path, fsync=True) if fsync else FilesystemStateStore(path)
    _open_stores.append(store)
    return store


def close_stores(driver: AsyncDriver, keep: tuple[Any, ...] = ()) -> None:
    """Close (``aclose``) every file store made so far except ``keep``; never timed."""
    for store in [s for s in _open_stores if not any(s is k for k in keep)]:
        driver.run(store.aclose())
        _open_stores.remove(store)


def timed_cold(driver: AsyncDriver, path: str, call: Callable[[Any], Awaitable[Any]]) -> int:
    """Time opening a new store on ``path`` plus ``call(store)``; close it untimed."""

    async def body() -> int:
        t0 = now_ns()
        store = FilesystemStateStore(path)
        await call(store)
        dt = now_ns() - t0
        await store.aclose()
        return dt

    return int(driver.run(body()))


# ---------------------------------------------------------------- W1 / W2: chain


class Counter(BaseState):
    n: int = 0


def _inc_sync(i: int) -> Any:
    def inc(state: Counter) -> dict[str, int]:
        return {"n": state.n + 1}

    return node(inc, name=f"n{i}")


def _inc_async(i: int) -> Any:
    async def inc(state: Counter) -> dict[str, int]:
        return {"n": state.n + 1}

    return node(inc, name=f"n{i}")


def _chain_graph(length: int, make: Any) -> Any:
    nodes = [make(i) for i in range(length)]
    edges = [START >> nodes[0]]
    edges += [nodes[i] >> nodes[i + 1] for i in range(length - 1)]
    edges.append(nodes[-1] >> END)
    return Graph(Counter, name="chain", max_steps=length + 10).flow(*edges)


def chain(length: int, driver: AsyncDriver, *, memory_store: bool = False) -> dict[str, Timed]:
    """W1 (no store) or W2 (one InMemoryStateStore, fresh thread id per run)."""
    g_sync = _chain_graph(length, _inc_sync)
    g_async = _chain_graph(length, _inc_async)
    store = InMemoryStateStore() if memory_store else None

    def kw() -> dict[str, Any]:
        return {"thread_id": _thread(), "state_store": store} if memory_store else {}

    _check(g_sync.invoke({"n": 0}, **kw()).state.n == length, "chain sync result")
    _check(driver.run(g_async.ainvoke({"n": 0}, **kw())).state.n == length, "chain async")

    def run_sync() -> int:
        k = kw()
        return time_sync(lambda: g_sync.invoke({"n": 0}, **k))

    def run_async() -> int:
        k = kw()
        return driver.timed(lambda: g_async.ainvoke({"n": 0}, **k))

    return {"sync": run_sync, "async": run_async}


# ---------------------------------------------------------------- W3: fan-out


class FanState(BaseState):
    items: Annotated[list[int], add] = Field(default_factory=list)
    total: int = 0


def _fan_graph(width: int, is_async: bool, joined: bool = False) -> Any:
    """``joined``: static edges ``start >> [p0, ...]`` and the join ``[p0, ...] >> join``."""
    names = [f"p{i}" for i in range(width)]

    if is_async:

        async def start(state: FanState) -> Command:
            return Command(update={"total": 0}, goto=None if joined else names)

        async def join(state: FanState) -> dict[str, Any]:
            return {"total": len(state.items)}

        def leaf(i: int) -> Any:
            async def f(state: FanState) -> dict[str, Any]:
                return {"items": [i]}

            return node(f, name=f"p{i}")
    else:

        def start(state: FanState) -> Command:
            return Command(update={"total": 0}, goto=None if joined else names)

        def join(state: FanState) -> dict[str, Any]:
            return {"total": len(state.items)}

        def leaf(i: int) -> Any:
            def f(state: FanState) -> dict[str, Any]:
                return {"items": [i]}

            return node(f, name=f"p{i}")

    join_n = node(join, name="join")
    leaves = [leaf(i) for i in range(width)]
    if joined:
        start_n = node(start, name="start")
        edges = [START >> start_n >> leaves, leaves >> join_n, join_n >> END]
    else:
        start_n = node(start, name="start", goto=names)
        edges = [START >> start_n, join_n >> END]
        edges += [lf >> join_n for lf in leaves]
    return Graph(FanState, name="fanout", max_steps=10).flow(*edges)


def fanout(width: int, driver: AsyncDriver, joined: bool = False) -> dict[str, Timed]:
    g_sync = _fan_graph(width, False, joined)
    g_async = _fan_graph(width, True, joined)
    s = g_sync.invoke({"items": [], "total": 0}).state
    _check(s.total == width and sorted(s.items) == list(range(width)), "fan-out sync")
    s = driver.run(g_async.ainvoke({"items": [], "total": 0})).state
    _check(s.total == width and sorted(s.items) == list(range(width)), "fan-out async")

    def run_sync() -> int:
        return time_sync(lambda: g_sync.invoke({"items": [], "total": 0}))

    def run_async() -> int:
        return driver.timed(lambda: g_async.ainvoke({"items": [], "total": 0}))

    return {"sync": run_sync, "async": run_async}


# ---------------------------------------------------------------- W4 / W5 / W6: durable loop


def loop_graph(target: int, store: Any = None, max_steps: int | None = None) -> Any:
    @node(goto=["loop", END])
    def loop(state: Counter) -> Command:
        n = state.n + 1
        return Command(update={"n": n}, goto=loop if n < target else END)

    return Graph(Counter, name="loop", max_steps=max_steps or 2 * target, state_store=store).flow(
        START >> loop
    )


@dataclass
class DurableLoop:
    run: Timed
    settings: str
    last_path: list[str]


def durable_loop(
    target: int, tmpdir: str, driver: AsyncDriver, *, fsync: bool = False
) -> DurableLoop:
    """W4: the loop on a FilesystemStateStore, a fresh file per run."""
    counter = itertools.count()
    last: list[str] = []
    current: list[Any] = []

    def fresh() -> tuple[Any, str]:
        for old in current:
            driver.run(old.aclose())
            _open_stores.remove(old)
        path = os.path.join(tmpdir, f"ns-loop-{int(fsync)}-{next(counter)}.jsonl")
        store = file_store(path, fsync=fsync)
        current[:] = [store]
        return loop_graph(target, store), path

    g, path = fresh()
    r = g.invoke({"n": 0}, thread_id=_thread())
    _check(r.state.n == target, "durable loop result")
    last.append(path)
    settings = (
        "FilesystemStateStore(path, fsync=True): fsync on every append"
        if fsync
        else "FilesystemStateStore(path) default: written to the OS on every append, no fsync"
    )

    def run() -> int:
        graph, p = fresh()
        for old in last:
            if os.path.exists(old):
                os.remove(old)
        last[:] = [p]
        tid = _thread()
        return time_sync(lambda: graph.invoke({"n": 0}, thread_id=tid))

    return DurableLoop(run=run, settings=settings, last_path=last)


def build_long_thread(target: int, path: str, driver: AsyncDriver) -> tuple[Any, str]:
    g = loop_graph(target, file_store(path))
    tid = _thread()
    driver.run(g.ainvoke({"n": 0}, thread_id=tid))
    return g, tid


def history_reads(target: int, path: str, driver: AsyncDriver) -> dict[str, Timed]:
    """W5: full history and latest state of a ``target``-step thread in one file."""
    g, tid = build_long_thread(target, path, driver)
    hist = driver.run(g.history(tid))
    _check(len(hist.events) >= target, f"history has {len(hist.events)} events, want >= {target}")
    snap = driver.run(g.get_state(tid))
    _check(_value_n(snap.value) == target, "get_state value")

    # "cold": a new store object per call, as a fresh process would open the file;
    # the graph is reused (the store is passed per call), so building it is not timed.
    def history_cold() -> int:
        return timed_cold(driver, path, lambda st: g.history(tid, state_store=st))

    def get_state_cold() -> int:
        return timed_cold(driver, path, lambda st: g.get_state(tid, state_store=st))

    return {
        "history": lambda: driver.timed(lambda: g.history(tid)),
        "get_state": lambda: driver.timed(lambda: g.get_state(tid), repeat=GET_STATE_CALLS),
        "history_cold": history_cold,
        "get_state_cold": get_state_cold,
    }


def _value_n(value: Any) -> Any:
    return value["n"] if isinstance(value, dict) else value.n


# ---------------------------------------------------------------- W6: big store


def single_step_graph(store: Any) -> Any:
    @node
    def bump(state: Counter) -> dict[str, int]:
        return {"n": state.n + 1}

    return Graph(Counter, name="bump", max_steps=5, state_store=store).flow(
        START >> bump, bump >> END
    )


def build_store(path: str, events_wanted: int, driver: AsyncDriver) -> tuple[str, int, float]:
    """One long thread whose history has about ``events_wanted`` events.

    Returns the thread id, the event count actually stored and the build time (s).
    The number of events one step writes is measured first on a small thread.
    """
    probe_path = path + ".probe.jsonl"
    g_probe, tid_probe = build_long_thread(100, probe_path, driver)
    per_step = len(driver.run(g_probe.history(tid_probe)).events) / 100
    close_stores(driver)
    os.remove(probe_path)
    steps = max(1, round(events_wanted / per_step))
    t0 = now_ns()
    g, tid = build_long_thread(steps, path, driver)
    build_s = (now_ns() - t0) / 1e9
    events = len(driver.run(g.history(tid)).events)
    return tid, events, build_s


def big_store_ops(
    path: str, tid: str, driver: AsyncDriver
) -> tuple[dict[str, Timed], Callable[[], int]]:
    """W6: get_state and one superstep's append on thread ``tid`` of the file ``path``.

    warm = one store object kept open across repetitions (a long-running service);
    cold = a new store object for every repetition (a fresh process opening the file).
    """
    store = file_store(path)
    g = single_step_graph(store)
    driver.run(g.get_state(tid))  # open / index once for the warm figures

    def get_state_cold() -> int:
        return timed_cold(driver, path, lambda st: g.get_state(tid, state_store=st))

    def append_cold() -> int:
        return timed_cold(driver, path, lambda st: g.ainvoke({}, thread_id=tid, state_store=st))

    def last_sequence() -> int:
        return int(driver.run(g.get_state(tid)).sequence)

    ops: dict[str, Timed] = {
        "get_state warm": lambda: driver.timed(lambda: g.get_state(tid), repeat=GET_STATE_CALLS),
        "get_state cold": get_state_cold,
        "append (ainvoke) warm": lambda: driver.timed(lambda: g.ainvoke({}, thread_id=tid)),
        "append (ainvoke) cold": append_cold,
        "update_state warm": lambda: driver.timed(lambda: g.update_state(tid, {"n": 5})),
    }
    return ops, last_sequence


# ---------------------------------------------------------------- W7: chat state


class ChatState(BaseState):
    messages: Annotated[list[dict[str, str]], add] = Field(default_factory=list)
    turn: int = 0
    user: str = ""
    topic: str = ""


def _chat_graph(steps: int, store: Any) -> Any:
    @node(goto=["reply", END])
    def reply(state: ChatState) -> Command:
        turn = state.turn
        return Command(
            update={
                "messages": [{"role": "assistant", "content": f"reply {turn}"}],
                "turn": turn + 1,
            },
            goto=reply if turn + 1 < steps else END,
        )

    return Graph(ChatState, name="chat", max_steps=steps + 10, state_store=store).flow(
        START >> reply
    )


def chat(
    history: int,
    steps: int,
    tmpdir: str | None,
    messages: list[dict[str, str]],
    driver: AsyncDriver,
) -> Timed:
    """W7: ``steps`` appends to a state already holding ``history`` messages.

    ``tmpdir`` None = no store; otherwise a FilesystemStateStore on a fresh file per run.
    """
    counter = itertools.count()
    paths: list[str] = []
    current: list[Any] = []

    def inp() -> dict[str, Any]:
        return {"messages": list(messages), "turn": 0, "user": "u-1", "topic": "benchmarks"}

    def graph_and_kw() -> tuple[Any, dict[str, Any]]:
        if tmpdir is None:
            return _chat_graph(steps, None), {}
        for old_store in current:
            driver.run(old_store.aclose())
            _open_stores.remove(old_store)
        for old in paths:
            if os.path.exists(old):
                os.remove(old)
        path = os.path.join(tmpdir, f"ns-chat-{history}-{steps}-{next(counter)}.jsonl")
        paths[:] = [path]
        store = file_store(path)
        current[:] = [store]
        return _chat_graph(steps, store), {"thread_id": _thread()}

    g, kw = graph_and_kw()
    s = g.invoke(inp(), **kw).state
    _check(len(s.messages) == history + steps and s.turn == steps, "chat result")
    mem_graph = g

    def run() -> int:
        graph, k = (mem_graph, {}) if tmpdir is None else graph_and_kw()
        i = inp()
        return time_sync(lambda: graph.invoke(i, **k))

    return run


# ---------------------------------------------------------------- W8: concurrent durable runs


class Tally(BaseState):
    n: int = 0


def concurrent_runs(threads: int, runs: int, tmpdir: str, driver: AsyncDriver) -> Timed:
    """W8: ``threads`` threads at once, ``runs`` one-node runs each, on one fsync=True store.

    A sample is all ``threads * runs`` runs, on a fresh file; opening it is not timed.
    """
    counter = itertools.count()

    @node
    def inc(state: Tally) -> dict[str, int]:
        return {"n": state.n + 1}

    async def body() -> int:
        path = os.path.join(tmpdir, f"ns-w8-{next(counter)}.jsonl")
        store = FilesystemStateStore(path, fsync=True)
        graph = Graph(Tally, name="w8", state_store=store).flow(START >> inc, inc >> END)
        prefix = _thread()

        async def thread(k: int) -> int:
            n = 0
            for _ in range(runs):
                n = (await graph.ainvoke({}, thread_id=f"{prefix}-{k}")).state.n
            return n

        t0 = now_ns()
        done = list(await asyncio.gather(*(thread(k) for k in range(threads))))
        elapsed = now_ns() - t0
        await store.aclose()
        os.remove(path)
        _check(done == [runs] * threads, "concurrent durable runs")
        return elapsed

    driver.run(body())  # once, checked, before any timing
    return lambda: driver.run(body())
