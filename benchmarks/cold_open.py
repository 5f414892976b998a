"""Cold open of a long history file, and memory per thread: nodestep vs LangGraph.

    python benchmarks/cold_open.py [--threads 1000] [--steps 100] [--reps 30] [--out DIR]

Part 1, cold open: one history of ``threads`` threads of ``steps`` supersteps each (a node
looping on a counter), in a nodestep file and in a LangGraph SQLite database. A "cold"
call opens a new store (``FilesystemStateStore``; ``SqliteSaver`` on a new connection) and
reads one thread's state with ``get_state``; the compiled graph is reused, as W5 does. The
nodestep file is measured with its persisted index (``<path>.idx``) and without it (what
every open cost before the index existed: the whole file read and indexed). Memory after
opening is what tracemalloc counts as still allocated by Python after the cold call, and the
growth of the process's resident set; SQLite's own page cache is C memory that tracemalloc
does not see, hence both.

Part 2, memory per thread: the bytes still allocated per thread after running 300 threads of
a 3-node chain on ``InMemoryStateStore`` and on LangGraph's ``InMemorySaver``.

The files are built once and kept in ``--work`` (default: a directory in /tmp) for later
runs with the same sizes. Results go to ``DIR/cold_open.md`` and ``DIR/cold_open.json``.
"""

from __future__ import annotations

import argparse
import asyncio
import gc
import json
import os
import sqlite3
import statistics
import sys
import tempfile
import time
import tracemalloc
from collections.abc import Callable
from pathlib import Path
from typing import Any, TypedDict

from langgraph.checkpoint.memory import InMemorySaver
from langgraph.checkpoint.sqlite import SqliteSaver
from langgraph.graph import END as LG_END
from langgraph.graph import START as LG_START
from langgraph.graph import StateGraph
from langgraph.types import Command as LGCommand

from nodestep import (
    END,
    START,
    BaseState,
    Command,
    FilesystemStateStore,
    Graph,
    InMemoryStateStore,
    node,
)
from nodestep.store._file import persisted


class Counter(BaseState):
    n: int = 0


class LGCounter(TypedDict):
    n: int


def nodestep_loop(steps: int, store: Any = None) -> Graph[Counter]:
    @node(goto=["loop", END])
    def loop(state: Counter) -> Command:
        n = state.n + 1
        return Command(update={"n": n}, goto="loop" if n < steps else END)

    return Graph(Counter, state_store=store, max_steps=steps + 5).flow(START >> loop)


def langgraph_loop(steps: int, saver: Any) -> Any:
    def loop(state: LGCounter) -> LGCommand[Any]:
        n = state["n"] + 1
        return LGCommand(update={"n": n}, goto="loop" if n < steps else LG_END)

    b = StateGraph(LGCounter)
    b.add_node("loop", loop, destinations=("loop", LG_END))
    b.add_edge(LG_START, "loop")
    return b.compile(checkpointer=saver)


def build(work: Path, threads: int, steps: int) -> tuple[Path, Path]:
    """Write the two histories once; return their paths."""
    work.mkdir(parents=True, exist_ok=True)
    jsonl, db = work / f"ns-{threads}x{steps}.jsonl", work / f"lg-{threads}x{steps}.sqlite"
    if not jsonl.exists():
        store = FilesystemStateStore(work / "building.jsonl")
        graph = nodestep_loop(steps, store)
        for t in range(threads):
            graph.invoke({}, thread_id=f"thread-{t}")
        asyncio.run(store.aclose())
        os.replace(work / "building.jsonl", jsonl)
        for leftover in work.glob("building.jsonl.*"):  # its index and lease file
            leftover.unlink()
    if not db.exists():
        conn = sqlite3.connect(work / "building.sqlite", check_same_thread=False)
        graph = langgraph_loop(steps, SqliteSaver(conn))
        for t in range(threads):
            cfg = {"configurable": {"thread_id": f"thread-{t}"}, "recursion_limit": 2 * steps}
            graph.invoke({"n": 0}, cfg)
        conn.close()
        os.replace(work / "building.sqlite", db)
    return jsonl, db


def rss() -> int:
    with open("/proc/self/statm") as f:
        return int(f.read().split()[1]) * os.sysconf("SC_PAGE_SIZE")


def cold(call: Callable[[], Any], reps: int, keep: list[Any]) -> dict[str, float]:
    """Median ms of ``call`` (which opens and reads), and the memory it leaves held."""
    times = []
    for _ in range(reps):
        t0 = time.perf_counter()
        keep.append(call())
        times.append((time.perf_counter() - t0) * 1000)
        keep.clear()
    gc.collect()
    rss0 = rss()
    tracemalloc.start()
    keep.append(call())
    gc.collect()
    held = tracemalloc.get_traced_memory()[0]
    tracemalloc.stop()
    grown = rss() - rss0
    keep.clear()
    return {"ms": statistics.median(times), "held_bytes": held, "rss_growth_bytes": grown}


def cold_open(jsonl: Path, db: Path, steps: int, reps: int) -> dict[str, dict[str, float]]:
    loop = asyncio.new_event_loop()
    graph = nodestep_loop(steps)
    thread = "thread-7"

    def nodestep_call() -> Any:
        store = FilesystemStateStore(jsonl)
        state = loop.run_until_complete(graph.get_state(thread, state_store=store))
        assert state.value.n == steps
        return store

    keep: list[Any] = []
    FilesystemStateStore(jsonl)  # writes the index if it is missing
    with_index = cold(nodestep_call, reps, keep)
    aside = persisted.sidecar(jsonl).with_name("aside.idx")
    os.replace(persisted.sidecar(jsonl), aside)
    save_after, persisted.SAVE_AFTER = persisted.SAVE_AFTER, 1 << 62  # no index written
    try:
        without_index = cold(nodestep_call, max(3, reps // 10), keep)
    finally:
        persisted.SAVE_AFTER = save_after
        os.replace(aside, persisted.sidecar(jsonl))
    lg_graph = langgraph_loop(steps, None)
    cfg = {"configurable": {"thread_id": thread}}

    def langgraph_call() -> Any:
        conn = sqlite3.connect(db, check_same_thread=False)
        lg_graph.checkpointer = SqliteSaver(conn)
        assert lg_graph.get_state(cfg).values["n"] == steps
        return conn

    sqlite = cold(langgraph_call, reps, keep)
    return {
        "nodestep, persisted index": with_index,
        "nodestep, no index (before)": without_index,
        "LangGraph SqliteSaver": sqlite,
    }


def per_thread(make: Callable[[], Callable[[int], Any]], threads: int = 300) -> float:
    run = make()
    run(-1)  # warm-up
    gc.collect()
    tracemalloc.start()
    before = tracemalloc.get_traced_memory()[0]
    for t in range(threads):
        run(t)
    gc.collect()
    held = tracemalloc.get_traced_memory()[0] - before
    tracemalloc.stop()
    return held / threads


def nodestep_chain() -> Callable[[int], Any]:
    @node
    def a(state: Counter) -> dict:
        return {"n": state.n + 1}

    @node
    def b(state: Counter) -> dict:
        return {"n": state.n + 1}

    @node
    def c(state: Counter) -> dict:
        return {"n": state.n + 1}

    graph = Graph(Counter, state_store=InMemoryStateStore()).flow(
        START >> a, a >> b, b >> c, c >> END
    )
    return lambda t: graph.invoke({}, thread_id=f"t{t}")


def langgraph_chain() -> Callable[[int], Any]:
    b = StateGraph(LGCounter)
    for name in "abc":
        b.add_node(name, lambda state: {"n": state["n"] + 1})
    b.add_edge(LG_START, "a")
    b.add_edge("a", "b")
    b.add_edge("b", "c")
    b.add_edge("c", LG_END)
    app = b.compile(checkpointer=InMemorySaver())
    return lambda t: app.invoke({"n": 0}, {"configurable": {"thread_id": f"t{t}"}})


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--threads", type=int, default=1000)
    parser.add_argument("--steps", type=int, default=100)
    parser.add_argument("--reps", type=int, default=30)
    parser.add_argument("--work", type=Path, default=Path(tempfile.gettempdir()) / "nodestep-cold")
    parser.add_argument("--out", type=Path, default=Path(__file__).parent / "results")
    args = parser.parse_args()
    jsonl, db = build(args.work, args.threads, args.steps)
    rows = cold_open(jsonl, db, args.steps, args.reps)
    memory = {
        "nodestep InMemoryStateStore": per_thread(nodestep_chain),
        "LangGraph InMemorySaver": per_thread(langgraph_chain),
    }
    size = jsonl.stat().st_size / 1e6
    lines = [
        f"# Cold open: {args.threads} threads x {args.steps} steps (nodestep file {size:.1f} MB)",
        "",
        "| store | new store + get_state, ms (median) | Python memory held | RSS growth |",
        "| --- | --- | --- | --- |",
    ]
    for name, row in rows.items():
        held, grown = row["held_bytes"] / 1e6, row["rss_growth_bytes"] / 1e6
        lines.append(f"| {name} | {row['ms']:.2f} | {held:.2f} MB | {grown:.2f} MB |")
    lines += [
        "",
        "# Memory per 3-step thread (300 threads)",
        "",
        "| store | bytes |",
        "| --- | --- |",
    ]
    lines += [f"| {name} | {value:,.0f} |" for name, value in memory.items()]
    text = "\n".join(lines) + "\n"
    print(text)
    args.out.mkdir(parents=True, exist_ok=True)
    (args.out / "cold_open.md").write_text(text)
    (args.out / "cold_open.json").write_text(
        json.dumps(
            {"cold_open": rows, "memory_per_thread": memory, "python": sys.version}, indent=2
        )
    )


if __name__ == "__main__":
    main()
