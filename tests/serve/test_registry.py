"""The server's rows, kept by several registries on one store, stay one set of rows."""

from __future__ import annotations

from dataclasses import replace
from typing import Any

import anyio
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from nodestep import InMemoryStateStore
from nodestep.serve._registry import Registry, RunRow, ThreadRow

pytestmark = pytest.mark.slow

THREADS = ["t1", "t2", "t3"]

steps = st.lists(
    st.tuples(
        st.integers(0, 2),  # which registry (server) makes the change
        st.sampled_from(["create", "tag", "run", "end", "delete"]),
        st.sampled_from(THREADS),
        st.integers(0, 9),
    ),
    max_size=30,
)


def changes(registry: Registry, op: str, tid: str, n: int) -> list[Any]:
    """Build the change of one step from the registry's current rows (as routes do)."""
    thread = registry.threads.get(tid)
    if op == "create":
        return [] if thread else [ThreadRow(tid, 0.0, 0.0, {"n": n})]
    if thread is None:
        return []
    if op == "tag":
        return [replace(thread, metadata=thread.metadata | {f"k{n}": n})]
    if op == "run":
        run = RunRow(f"{tid}-r{n}", tid, "a", "g", float(n), float(n))
        return [replace(thread, status="busy"), run]
    if op == "end":
        active = registry.active_runs(tid)
        return [replace(active[0], status="success")] if active else []
    return [("thread", tid)]


def model_apply(model: dict[str, Any], op: str, tid: str, n: int) -> None:
    """The same step on plain dicts: what every server must end up seeing."""
    threads, runs = model["threads"], model["runs"]
    if op == "create":
        threads.setdefault(tid, {"n": n})
    elif tid not in threads:
        return
    elif op == "tag":
        threads[tid] = threads[tid] | {f"k{n}": n}
    elif op == "run":
        runs[f"{tid}-r{n}"] = (tid, "pending")
    elif op == "end":
        active = sorted(
            (r for r, (t, s) in runs.items() if t == tid and s == "pending"),
            key=lambda r: (float(r.rsplit("-r", 1)[1]), r),
        )
        if active:
            runs[active[0]] = (tid, "success")
    else:
        del threads[tid]
        for run_id in [r for r, (t, _) in runs.items() if t == tid]:
            del runs[run_id]


@settings(max_examples=60, deadline=None)
@given(steps)
def test_registries_on_one_store_converge_on_the_rows_every_change_made(
    script: list[tuple[int, str, str, int]],
) -> None:
    async def main() -> None:
        store = InMemoryStateStore()
        servers = [Registry(store) for _ in range(3)]
        model: dict[str, Any] = {"threads": {}, "runs": {}}
        for who, op, tid, n in script:
            server = servers[who]
            await server.update(lambda s=server, o=op, t=tid, k=n: changes(s, o, t, k))
            model_apply(model, op, tid, n)
        for server in servers:
            await server.load()
            assert {t: r.metadata for t, r in server.threads.items()} == model["threads"]
            assert {r: (row.thread_id, row.status) for r, row in server.runs.items()} == (
                model["runs"]
            )

    anyio.run(main)
