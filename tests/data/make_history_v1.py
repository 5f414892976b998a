"""Write ``history_v1.jsonl`` and ``history_v1_expected.json`` with nodestep 0.1 (format 1).

Run it with the PREVIOUS nodestep release, the last that writes history format version 1
(it refuses to run with a newer one)::

    /path/to/old/venv/bin/python tests/data/make_history_v1.py

It runs the graphs of ``v1_graphs.py`` through every kind and shape of history record into
one ``FilesystemStateStore`` file, with ids and timestamps injected so the file comes out
the same on every run. Then it records what that release reports for each thread and
branch: the events, ``load()`` and ``get_state()`` at the end and at every event, and what
resuming the paused threads and continuing the failed and stopped ones gives (done on a
copy; the fixture keeps them unfinished). ``tests/store/test_format_versions.py`` checks
that the current nodestep reads the file and reports the same.
"""

from __future__ import annotations

import asyncio
import contextlib
import json
import shutil
import sys
import tempfile
from pathlib import Path
from typing import Any

HERE = Path(__file__).resolve().parent
sys.path.insert(0, str(HERE))

import v1_graphs  # noqa: E402
from v1_graphs import FAILING, GRAPHS, THREADS, Replace, build, step_a, step_b  # noqa: E402

from nodestep import FilesystemStateStore, Graph, Resume  # noqa: E402
from nodestep.store import _codec  # noqa: E402

FIXTURE = HERE / "history_v1.jsonl"
EXPECTED = HERE / "history_v1_expected.json"
CREATED = 1_700_000_000.0
"""The header's timestamp; the clock of the records starts here too."""

# How the threads left unfinished in the fixture go on, in the test as here.
RESUME: dict[str, dict[str, Any]] = {
    "review-paused": {"resume": "publish"},
    "launch-paused": {"answers": {"legal:sign_off": "yes", "security:sign_off": "no"}},
    "job-failed": {},
    "chain-closed": {},
    "chain-after": {},
}


class Deterministic:
    """Ids and a clock that give the same history on every run."""

    def __init__(self) -> None:
        self.ids = 0
        self.now = CREATED

    def new_id(self) -> str:
        self.ids += 1
        return f"00000000-0000-4000-8000-{self.ids:012d}"

    def clock(self) -> float:
        self.now += 0.25
        return self.now


def graphs_on(store: FilesystemStateStore, det: Deterministic) -> dict[str, Graph[Any]]:
    graphs = {name: build(name, store) for name in GRAPHS}
    for graph in graphs.values():
        graph._new_id = det.new_id  # type: ignore[attr-defined]  # nodestep 0.1's seam
        graph._clock = det.clock  # type: ignore[attr-defined]
    return graphs


async def write_history(g: dict[str, Graph[Any]]) -> None:
    chain, review, launch, job, counter = (g[name] for name in GRAPHS)

    # chain: Replace in the input, a breakpoint, a continuation, Replace in update_state.
    await chain.ainvoke({"log": Replace(["start"])}, thread_id="chain", interrupt_before=[step_b])
    await chain.ainvoke(None, thread_id="chain")
    await chain.update_state("chain", {"log": Replace(["reset"]), "note": "edited"})
    await chain.ainvoke({"n": 1}, thread_id="chain")

    # chain-closed: a stream closed after its first event (run_stopped, "stream_closed").
    stream = chain.astream({}, thread_id="chain-closed", stream_mode="updates")
    await stream.__anext__()
    await stream.aclose()
    # chain-after: stopped by a breakpoint after a node.
    await chain.ainvoke({"note": "after"}, thread_id="chain-after", interrupt_after=[step_a])

    # review: Send fan-out, task_finished with goto, a pause with ctx.cache, an edit while
    # paused, answers; then a fork after the first finished task, continued and answered.
    await review.ainvoke({"topic": "food"}, thread_id="review-done")
    await review.update_state("review-done", {"topic": "desserts"})
    await review.ainvoke(None, thread_id="review-done", resume=Resume("publish"))
    history = await review.history("review-done")
    first_write = next(e for e in history.events if e.type == "task_finished")
    await review.fork("review-done", from_=first_write.id, name="retry")
    await review.ainvoke(None, thread_id="review-done", branch_id="retry")
    await review.ainvoke(None, thread_id="review-done", branch_id="retry", resume=Resume("no"))
    await review.ainvoke({"topic": "travel"}, thread_id="review-paused")

    # launch: two interrupts in one superstep beside a task that finishes.
    await launch.ainvoke({}, thread_id="launch-done")
    answers = {"legal:sign_off": "yes", "security:sign_off": "after the audit"}
    await launch.ainvoke(None, thread_id="launch-done", resume=Resume(answers=answers))
    await launch.ainvoke({}, thread_id="launch-paused")

    # job: a failed task beside a finished one, continued; then a merge conflict (blocked).
    FAILING.update({"job-continued", "job-failed"})
    for thread in ("job-continued", "job-failed"):
        with contextlib.suppress(RuntimeError):
            await job.ainvoke({}, thread_id=thread)
    FAILING.discard("job-continued")
    await job.ainvoke(None, thread_id="job-continued")
    with contextlib.suppress(Exception):  # InvalidUpdateError: two writes of `winner`
        await job.ainvoke({}, thread_id="job-continued")

    # counter: 125 records, so checkpoints after every 50.
    await counter.ainvoke({}, thread_id="counter")


def snapshot_of(snapshot: Any) -> dict[str, Any]:
    return {
        "sequence": snapshot.sequence,
        "event_id": snapshot.event_id,
        "status": snapshot.status,
        "next": list(snapshot.next),
        "interrupts": {
            key: {"id": i.id, "node": i.node, "task_id": i.task_id, "payload": i.payload}
            for key, i in snapshot.interrupts.items()
        },
    }


async def report(g: dict[str, Graph[Any]], store: FilesystemStateStore) -> dict[str, Any]:
    """Return what this nodestep reports for every thread and branch of ``store``."""
    out: dict[str, Any] = {}
    for thread, name in sorted(THREADS.items()):
        graph = g[name]
        branches = ["main", *(b.id for b in await graph.branches(thread))]
        for branch in branches:
            history = await graph.history(thread, branch_id=branch)
            at = {}
            for e in history.events:
                state = await graph.get_state(thread, e.id, branch_id=branch)
                at[e.id] = {
                    "load": await graph.load(thread, e.id, branch_id=branch),
                    "state": snapshot_of(state),
                }
            out[f"{thread}/{branch}"] = {
                "thread": thread,
                "branch": branch,
                "graph": name,
                "events": [[e.sequence, e.type, e.id] for e in history.events],
                "load": await graph.load(thread, branch_id=branch),
                "state": snapshot_of(await graph.get_state(thread, branch_id=branch)),
                "at": at,
            }
    return out


async def go_on(g: dict[str, Graph[Any]]) -> dict[str, Any]:
    """Resume the paused threads and continue the failed and stopped one; report them."""
    FAILING.clear()
    out = {}
    for thread, how in sorted(RESUME.items()):
        graph = g[THREADS[thread]]
        if "resume" in how:
            result = await graph.ainvoke(None, thread_id=thread, resume=Resume(how["resume"]))
        elif "answers" in how:
            result = await graph.ainvoke(
                None, thread_id=thread, resume=Resume(answers=how["answers"])
            )
        else:
            result = await graph.ainvoke(None, thread_id=thread)
        out[thread] = {
            "how": how,
            "status": result.status,
            "load": await graph.load(thread),
            "state": snapshot_of(await graph.get_state(thread)),
        }
    return out


def main() -> None:
    if _codec.VERSION != 1:
        sys.exit(f"run this with the nodestep release that writes format 1, not {_codec.VERSION}")
    FIXTURE.unlink(missing_ok=True)
    # The header's timestamp too is fixed: write it before the store opens the file.
    FIXTURE.write_bytes(_codec.header_line(CREATED))
    det = Deterministic()
    store = FilesystemStateStore(FIXTURE)
    g = graphs_on(store, det)
    asyncio.run(write_history(g))
    asyncio.run(store.aclose())

    store = FilesystemStateStore(FIXTURE)
    expected = {"threads": asyncio.run(report(graphs_on(store, det), store))}
    asyncio.run(store.aclose())

    with tempfile.TemporaryDirectory() as tmp:
        copy = Path(tmp) / FIXTURE.name
        shutil.copyfile(FIXTURE, copy)
        store = FilesystemStateStore(copy)
        expected["continued"] = asyncio.run(go_on(graphs_on(store, det)))
        asyncio.run(store.aclose())
    expected["resume"] = RESUME

    EXPECTED.write_text(json.dumps(expected, indent=1, sort_keys=True) + "\n")
    lines = FIXTURE.read_bytes().count(b"\n")
    print(f"wrote {FIXTURE.name} ({lines} lines) and {EXPECTED.name}")
    assert not v1_graphs.FAILING


if __name__ == "__main__":
    main()
