"""Several processes on one history file: contention, kill -9, and readers during writes.

Children are forked from this process (nodestep is imported already, so a fork costs about
a millisecond) and open their own store; they report through exit codes and pipes.

The tests are sync, as every test that forks (see ``forking``), and run on asyncio only:
what they test is how processes share the file, and the store reads and writes it inline,
the same on any event loop. The conformance suite and test_filesystem_faults.py run the
store on each back end.
"""

from __future__ import annotations

import os
import random
import time
from pathlib import Path

import pytest
from forking import in_child, kill_and_collect, needs_fork, runner, wait

from nodestep._errors import StateStoreError, ThreadConflictError
from nodestep.store import FilesystemStateStore
from nodestep.store._file import io as _io
from nodestep.testing import event, seqs

pytestmark = [pytest.mark.slow, needs_fork]

run = runner("asyncio")


def append_with_retries(path: Path, thread: str, count: int, writer: int) -> None:
    """Append ``count`` records to ``thread``, reading and retrying on every conflict."""
    store = FilesystemStateStore(path)

    async def go() -> None:
        done = 0
        while done < count:
            last = await store.last_sequence(thread, "main")
            try:
                await store.append(
                    thread, "main", [event(last + 1, thread, w=writer, i=done)], after=last
                )
                done += 1
            except ThreadConflictError:
                pass

    run(go())
    run(store.aclose())


def contend(path: Path, writers: int, count: int, *, skip_locks: bool = False) -> list[int]:
    """Run ``writers`` processes appending to one thread; return their exit codes."""

    # The writers start together, at a byte each on this pipe: a child forked late on a
    # busy machine would otherwise finish alone and contend with no one.
    start, go = os.pipe()

    def child(k: int) -> int:
        os.close(go)
        os.read(start, 1)
        if not skip_locks:
            append_with_retries(path, "t1", count, k)
            return 0
        _io.faults = _io.FaultPlan(skip_locks=True)
        try:
            append_with_retries(path, "t1", count, k)
        except StateStoreError:  # the expected outcome: another writer's seq collided
            return 1
        return 0

    pids = [in_child(lambda k=k: child(k)) for k in range(writers)]
    os.close(start)
    os.write(go, b"x" * writers)
    os.close(go)
    return [wait(pid) for pid in pids]


def load(path: Path, thread: str = "t1") -> list[dict[str, object]]:
    store = FilesystemStateStore(path)
    try:
        return run(store.read(thread, "main"))
    finally:
        run(store.aclose())


def test_writers_of_one_thread_in_three_processes_lose_nothing(tmp_path: Path) -> None:
    path = tmp_path / "history.jsonl"
    FilesystemStateStore(path)
    assert contend(path, writers=3, count=200) == [0, 0, 0]
    records = load(path)
    assert seqs(records) == list(range(1, 601))
    for k in range(3):  # each writer's records in its own order
        mine = [r["values"]["i"] for r in records if r["values"]["w"] == k]  # type: ignore[index]
        assert mine == list(range(200))


def test_without_the_lock_the_same_writers_collide(tmp_path: Path) -> None:
    # The mutation check: proves the test above can fail. Unlocked writers append the
    # same seq twice; the stores then refuse the file.
    collided = 0
    for attempt in range(5):
        path = tmp_path / f"unlocked-{attempt}.jsonl"
        FilesystemStateStore(path)
        codes = contend(path, writers=3, count=300, skip_locks=True)
        try:
            ok = seqs(load(path)) == list(range(1, 901))
        except StateStoreError:
            ok = False
        if not ok or any(codes):
            collided += 1
            break
    assert collided, "five unlocked runs without a collision: the contention test is too weak"


def test_writers_of_different_threads_never_conflict(tmp_path: Path) -> None:
    path = tmp_path / "history.jsonl"
    FilesystemStateStore(path)

    def child(thread: str) -> int:
        store = FilesystemStateStore(path)

        async def go() -> None:
            for seq in range(1, 301):  # no retries: a conflict fails the child
                await store.append(thread, "main", [event(seq, thread)], after=seq - 1)

        run(go())
        return 0

    pids = [in_child(lambda t=t: child(t)) for t in ("ta", "tb")]
    assert [wait(pid) for pid in pids] == [0, 0]
    assert seqs(load(path, "ta")) == seqs(load(path, "tb")) == list(range(1, 301))


def test_kill_9_during_appends_loses_no_acknowledged_record(tmp_path: Path) -> None:
    seed = int(os.environ.get("NODESTEP_SEED", time.time_ns() % 2**32))
    print(f"kill -9 test seed: {seed} (set NODESTEP_SEED to repeat)")
    rng = random.Random(seed)
    path = tmp_path / "history.jsonl"
    FilesystemStateStore(path)
    sizes = [1, 3, 1, 2]  # records per append, cycled: some appends are batches
    repaired = runs = 0
    before = 1  # the first seq of this run's part of the history

    for _ in range(30):
        read_end, write_end = os.pipe()

        def child(read_end: int = read_end, write_end: int = write_end) -> int:
            os.close(read_end)
            store = FilesystemStateStore(path)

            async def go() -> None:
                last = await store.last_sequence("t1", "main")
                k = 0
                while True:
                    n = sizes[k % len(sizes)] if last else 1
                    big = "x" * rng.choice([10, 10, 10, 200, 9000])  # some span pages
                    batch = [event(last + i + 1, text=big, end=last + n) for i in range(n)]
                    await store.append("t1", "main", batch, after=last)
                    last += n
                    os.write(write_end, f"ack {last}\n".encode())
                    k += 1

            run(go())
            return 0

        pid = in_child(child)
        lines = kill_and_collect(pid, read_end, write_end, rng.uniform(0.001, 0.04))
        acked = [int(line.split()[1]) for line in lines]

        store = FilesystemStateStore(path)  # a fresh store, as a new process would open
        repaired += store.repaired_bytes > 0
        # Opening checked that seq runs 1, 2, 3, ... with no gap; look at this run's part.
        last = run(store.last_sequence("t1", "main"))
        records = run(store.read("t1", "main", start=before))
        assert seqs(records) == list(range(before, last + 1))
        assert not records or records[-1]["values"]["end"] == last, "part of an append stored"
        acked_last = acked[-1] if acked else before - 1
        assert last >= acked_last, "an acknowledged record is missing"
        assert last <= acked_last + max(sizes), "more than one unacknowledged append"
        before = last + 1
        run(store.append("t1", "main", [event(before, end=before)], after=last))
        run(store.aclose())
        assert path.read_bytes().endswith(b"\n")
        runs += 1
    print(f"kill -9: {runs}/30 runs recovered, {repaired} with a torn tail cut")


def test_reader_during_writes_always_sees_a_contiguous_prefix(tmp_path: Path) -> None:
    path = tmp_path / "history.jsonl"
    FilesystemStateStore(path)
    read_end, write_end = os.pipe()

    def reader() -> int:
        os.close(read_end)
        store = FilesystemStateStore(path)
        loads = bad = previous = 0
        deadline = time.monotonic() + 10
        while previous < 3000 and time.monotonic() < deadline:
            records = run(store.read("t1", "main"))
            loads += 1
            got = seqs(records)
            if got != list(range(1, len(got) + 1)) or len(got) < previous:
                bad += 1
            previous = len(got)
        os.write(write_end, f"{loads} {bad} {previous}".encode())
        return 0

    pids = [in_child(reader)]
    os.close(write_end)
    pids += [in_child(lambda k=k: append_with_retries(path, "t1", 1500, k)) for k in range(2)]
    assert [wait(pid) for pid in pids] == [0, 0, 0]
    loads, bad, last = map(int, os.read(read_end, 100).split())
    os.close(read_end)
    print(f"reader: {loads} loads during writes, {bad} not a prefix")
    assert (bad, last) == (0, 3000)
    assert loads > 10
