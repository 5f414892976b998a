"""FilesystemStateStore(fsync=True): appends share flushes, done off the event loop.

The I/O seam's log (``_io.FaultPlan.log``) shows every write and flush; a test adds an
``("ack", ...)`` entry when an append returns, so the log says what was on the disk then.
"""

from __future__ import annotations

import errno
import os
import threading
from collections.abc import Iterator
from pathlib import Path

import anyio
import pytest
from pydantic import Field

from nodestep import (
    END,
    START,
    BaseState,
    FilesystemStateStore,
    Graph,
    interrupt,
    node,
)
from nodestep._errors import StateStoreError
from nodestep.store._file import io as _io
from nodestep.store._flush import must_flush
from nodestep.testing import event, events, seqs

pytestmark = pytest.mark.anyio


@pytest.fixture
def path(tmp_path: Path) -> Path:
    return tmp_path / "history.jsonl"


@pytest.fixture(autouse=True)
def no_faults_left() -> Iterator[None]:
    yield
    _io.faults = None


def acks_on_disk(log: list[tuple[str, int, int]]) -> tuple[int, int]:
    """Check that every ``ack`` in ``log`` came after a flush covering its writes.

    Returns:
        The number of appends acknowledged and of flushes done.
    """
    done = 0  # the end of the writes finished so far
    started: list[int] = []  # for each flush started, what was written before it
    durable = 0
    acked = flushes = 0
    for op, offset, size in log:
        if op == "written":
            done = max(done, offset + size)
        elif op == "fsync":
            started.append(done)
        elif op == "fsynced":
            durable = max(durable, started.pop(0))
            flushes += 1
        elif op == "ack":
            assert offset + size <= durable, f"append at byte {offset} acknowledged unflushed"
            acked += 1
    return acked, flushes


async def append_acked(
    store: FilesystemStateStore, thread: str, count: int, plan: _io.FaultPlan
) -> None:
    """Append ``count`` records to ``thread`` one by one, logging an ``ack`` after each."""
    for seq in range(1, count + 1):
        await store.append(thread, "main", [event(seq, thread)], after=seq - 1)
        span = store._log.records.locations(thread, "main", seq, seq)[0]
        plan.log.append(("ack", *span))


async def test_concurrent_appends_share_flushes_and_each_is_on_disk_when_it_returns(
    path: Path,
) -> None:
    store = FilesystemStateStore(path, fsync=True)
    plan = _io.faults = _io.FaultPlan()
    async with anyio.create_task_group() as tg:
        for i in range(50):
            tg.start_soon(append_acked, store, f"t{i}", 4, plan)
    _io.faults = None
    acked, flushes = acks_on_disk(plan.log)
    assert acked == 200
    assert flushes < acked / 4, f"{flushes} flushes for {acked} appends: not shared"
    await store.aclose()
    fresh = FilesystemStateStore(path)
    for i in range(50):
        assert seqs(await fresh.read(f"t{i}", "main")) == [1, 2, 3, 4]
    await fresh.aclose()


async def test_the_flush_runs_off_the_event_loop_thread(
    path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    flushed_on: list[int] = []
    real_fsync = os.fsync

    def fsync(fd: int) -> None:
        flushed_on.append(threading.get_ident())
        real_fsync(fd)

    store = FilesystemStateStore(path, fsync=True)  # its header is flushed by the constructor
    monkeypatch.setattr(os, "fsync", fsync)
    await store.append("t1", "main", events(1, 1), after=0)
    assert flushed_on and threading.get_ident() not in flushed_on
    await store.aclose()


def test_appends_from_threads_with_their_own_loops_share_flushes(path: Path) -> None:
    store = FilesystemStateStore(path, fsync=True)
    plan = _io.faults = _io.FaultPlan()

    def worker(k: int) -> None:
        anyio.run(append_acked, store, f"t{k}", 20, plan)

    threads = [threading.Thread(target=worker, args=(k,)) for k in range(8)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    _io.faults = None
    acked, flushes = acks_on_disk(plan.log)
    assert acked == 160 and flushes <= acked
    anyio.run(store.aclose)
    fresh = FilesystemStateStore(path)
    assert seqs(anyio.run(fresh.read, "t7", "main")) == list(range(1, 21))
    anyio.run(fresh.aclose)


async def test_failed_flush_fails_every_append_waiting_for_it_and_removes_them(
    path: Path,
) -> None:
    store = FilesystemStateStore(path, fsync=True)
    await store.append("t0", "main", events(1, 1, "t0"), after=0)
    size = path.stat().st_size
    _io.faults = _io.FaultPlan(fail_op="fsync", error=errno.EIO)
    outcomes: list[BaseException | None] = []

    async def one(thread: str) -> None:
        try:
            await store.append(thread, "main", events(1, 1, thread), after=0)
            outcomes.append(None)
        except StateStoreError as e:
            outcomes.append(e)

    async with anyio.create_task_group() as tg:
        for i in range(1, 11):
            tg.start_soon(one, f"t{i}")
    _io.faults = None
    assert len(outcomes) == 10
    assert all(isinstance(e, StateStoreError) for e in outcomes), "an append reported success"
    assert all("stopped after fsync failed" in str(e) for e in outcomes)
    assert path.stat().st_size == size  # the unflushed appends were cut off again
    with pytest.raises(StateStoreError, match="stopped after fsync failed"):
        await store.last_sequence("t0", "main")
    await store.aclose()
    fresh = FilesystemStateStore(path, fsync=True)
    assert [await fresh.last_sequence(f"t{i}", "main") for i in range(3)] == [1, 0, 0]
    await fresh.aclose()


def test_records_of_a_running_call_wait_for_its_last_record() -> None:
    def kinds(*names: str) -> list[dict[str, str]]:
        return [{"type": n} for n in names]

    assert not must_flush(kinds("checkpoint", "run_started"))
    assert not must_flush(kinds("task_finished"))
    assert not must_flush(kinds("superstep_completed", "checkpoint"))
    for last in ("run_completed", "run_paused", "run_failed", "run_stopped", "state_updated"):
        assert must_flush(kinds("superstep_completed", last)), last
    assert must_flush(kinds("checkpoint")), "a lone checkpoint (a migration) is no run's"


class Counter(BaseState):
    n: int = 0
    seen: list[str] = Field(default_factory=list)


@node(goto=["step", END])
def step(state: Counter) -> dict:
    return {"n": state.n + 1}


async def test_a_run_flushes_once_when_it_ends_and_before_it_returns(path: Path) -> None:
    store = FilesystemStateStore(path, fsync=True)

    @node
    def one(state: Counter) -> dict:
        return {"n": state.n + 1}

    @node
    def two(state: Counter) -> dict:
        return {"n": state.n + 1}

    graph = Graph(Counter, state_store=store).flow(START >> one, one >> two, two >> END)
    plan = _io.faults = _io.FaultPlan()
    result = await graph.ainvoke({}, thread_id="t1")
    plan.log.append(("ack", 0, path.stat().st_size))  # the whole file, when ainvoke returned
    _io.faults = None
    assert result.state.n == 2
    writes = sum(op == "written" for op, _, _ in plan.log)
    acked, flushes = acks_on_disk(plan.log)
    # start, step one, step two with run_completed (one append): 1 flush
    assert (acked, writes, flushes) == (1, 3, 1), plan.log
    await store.aclose()


async def test_a_paused_run_is_on_the_disk_when_invoke_returns(path: Path) -> None:
    store = FilesystemStateStore(path, fsync=True)

    @node
    def ask(state: Counter) -> dict:
        return {"seen": [interrupt("ok?", id="ask")]}

    graph = Graph(Counter, state_store=store).flow(START >> ask, ask >> END)
    plan = _io.faults = _io.FaultPlan()
    result = await graph.ainvoke({}, thread_id="t1")
    plan.log.append(("ack", 0, path.stat().st_size))
    _io.faults = None
    assert result.status == "interrupted"
    assert acks_on_disk(plan.log) == (1, 1)
    await store.aclose()


async def test_aclose_flushes_what_a_run_left_unflushed(path: Path) -> None:
    store = FilesystemStateStore(path, fsync=True)
    plan = _io.faults = _io.FaultPlan()
    await store.append("t1", "main", [event(1, type="task_finished")], after=0)
    assert [op for op, _, _ in plan.log if op.startswith("fsync")] == []
    await store.aclose()
    plan.log.append(("ack", 0, path.stat().st_size))
    _io.faults = None
    assert acks_on_disk(plan.log) == (1, 1)
