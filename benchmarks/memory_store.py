"""The memory store's put and get against the state store's append, on each back end.

    python benchmarks/memory_store.py [--ops 2000] [--rounds 7] [--out DIR]

For each back end (memory, file, SQLite, and PostgreSQL when ``NODESTEP_BENCH_POSTGRES_DSN``
or ``NODESTEP_TEST_POSTGRES_DSN`` names a server), in one event loop: ``ops`` appends of
one record to a thread of the state store (``await store.append(...)``), ``ops`` puts of
new keys to the memory store and ``ops`` gets of them, with the same payload (a record's
values and the item's value are both ``{"text": 100 characters, "n": i}``). The three are
timed in rounds, alternately, and each figure is the median round's µs per call. The
target (issue 24): put and get each within 2x of the append, on every back end. Default
durability on each side: no fsync for the file stores, ``synchronous=NORMAL`` for SQLite.
Results go to ``DIR/memory_store.md`` and ``.json`` (default ``benchmarks/results``).
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import sys
import tempfile
import time
import uuid
from collections.abc import Awaitable, Callable
from pathlib import Path
from typing import Any

import anyio

from nodestep import FilesystemStateStore, InMemoryStateStore, PostgresStateStore, SQLiteStateStore
from nodestep.memory import (
    FilesystemMemoryStore,
    InMemoryMemoryStore,
    MemoryStore,
    PostgresMemoryStore,
    SQLiteMemoryStore,
)
from nodestep.store import StateStore
from nodestep.testing import event

HERE = Path(__file__).resolve().parent
TEXT = "m" * 100


def _backends(tmp: Path) -> dict[str, Callable[[], tuple[StateStore, MemoryStore]]]:
    found: dict[str, Callable[[], tuple[StateStore, MemoryStore]]] = {
        "memory": lambda: (InMemoryStateStore(), InMemoryMemoryStore()),
        "file": lambda: (
            FilesystemStateStore(tmp / "history.jsonl"),
            FilesystemMemoryStore(tmp / "memory"),
        ),
        "sqlite": lambda: (SQLiteStateStore(tmp / "h.db"), SQLiteMemoryStore(tmp / "m.db")),
    }
    dsn = os.environ.get("NODESTEP_BENCH_POSTGRES_DSN") or os.environ.get(
        "NODESTEP_TEST_POSTGRES_DSN"
    )
    if dsn:
        schema = f"bench_{uuid.uuid4().hex[:8]}"
        found["postgres"] = lambda: (
            PostgresStateStore(dsn, schema=schema),
            PostgresMemoryStore(dsn, schema=schema),
        )
    return found


async def _timed(calls: int, make: Callable[[int], Awaitable[Any]], start: int) -> float:
    """Return µs per call of ``make(i)`` for ``calls`` values of ``i`` from ``start``."""
    began = time.perf_counter()
    for i in range(start, start + calls):
        await make(i)
    return (time.perf_counter() - began) / calls * 1e6


async def _measure(states: StateStore, memory: MemoryStore, ops: int, rounds: int) -> dict:
    thread = f"bench-{uuid.uuid4().hex[:8]}"
    ns = ("bench", thread)

    async def append(i: int) -> None:
        await states.append(thread, "main", [event(i + 1, thread, text=TEXT, n=i)], after=i)

    async def put(i: int) -> None:
        await memory.put(ns, f"k{i}", {"text": TEXT, "n": i})

    async def get(i: int) -> None:
        item = await memory.get(ns, f"k{i}")
        assert item is not None and item.value["n"] == i

    await _timed(ops // 10, append, 0)  # warm-up: connections, tables, caches
    await _timed(ops // 10, put, 0)
    await _timed(ops // 10, get, 0)
    done = ops // 10
    figures: dict[str, list[float]] = {"append": [], "put": [], "get": []}
    for _ in range(rounds):
        figures["append"].append(await _timed(ops, append, done))
        figures["put"].append(await _timed(ops, put, done))
        figures["get"].append(await _timed(ops, get, done))
        done += ops
    return {name: statistics.median(values) for name, values in figures.items()}


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--ops", type=int, default=2000, help="calls per round and kind")
    parser.add_argument("--rounds", type=int, default=7)
    parser.add_argument("--out", type=Path, default=HERE / "results")
    args = parser.parse_args(argv)
    results: dict[str, dict[str, float]] = {}
    with tempfile.TemporaryDirectory(prefix="nodestep-memory-bench-") as tmp:
        for name, make in _backends(Path(tmp)).items():
            ops = args.ops if name != "postgres" else max(args.ops // 4, 50)

            async def run(
                make: Callable[[], tuple[StateStore, MemoryStore]] = make, ops: int = ops
            ) -> dict:
                states, memory = make()
                try:
                    return await _measure(states, memory, ops, args.rounds)
                finally:
                    await states.aclose()
                    await memory.aclose()

            results[name] = anyio.run(run)
            r = results[name]
            print(
                f"{name:8} append {r['append']:7.1f} µs  put {r['put']:7.1f} µs "
                f"({r['put'] / r['append']:.2f}x)  get {r['get']:7.1f} µs "
                f"({r['get'] / r['append']:.2f}x)",
                flush=True,
            )
    _write(args.out, results)
    worst = max(max(r["put"], r["get"]) / r["append"] for r in results.values())
    return 0 if worst <= 2 else 1


def _write(out: Path, results: dict[str, dict[str, float]]) -> None:
    out.mkdir(parents=True, exist_ok=True)
    load = Path("/proc/loadavg").read_text().split()[:3] if Path("/proc/loadavg").exists() else []
    lines = [
        "# Memory store: put and get vs the state store's append",
        "",
        f"Python {sys.version.split()[0]}; load average {' '.join(load)}. µs per call, "
        f"median round; target: put and get each ≤ 2x append.",
        "",
        "| back end | append | put | get | put / append | get / append |",
        "|---|---|---|---|---|---|",
    ]
    for name, r in results.items():
        lines.append(
            f"| {name} | {r['append']:.1f} | {r['put']:.1f} | {r['get']:.1f} | "
            f"{r['put'] / r['append']:.2f} | {r['get'] / r['append']:.2f} |"
        )
    (out / "memory_store.md").write_text("\n".join(lines) + "\n")
    (out / "memory_store.json").write_text(json.dumps(results, indent=2) + "\n")


if __name__ == "__main__":
    sys.exit(main())
