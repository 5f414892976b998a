"""FilesystemStateStore waits for a lock held elsewhere without stalling the event loop.

Another process holds the file's lock (a real child process, started with ``subprocess``), or
another thread holds the store, while this test's event loop runs a heartbeat task that
ticks every 50 ms next to the store calls. Blocking the loop's thread on the lock would
stop the heartbeat for as long as the lock is held.
"""

from __future__ import annotations

import os
import subprocess
import sys
import threading
import time
import uuid
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Any

import anyio
import anyio.abc
import anyio.to_thread
import pytest

import nodestep
from nodestep._errors import StateStoreError
from nodestep.store import FilesystemStateStore, Record
from nodestep.store._file import io as _io
from nodestep.store._file.locks import wait_off_loop

pytestmark = pytest.mark.anyio

TICK = 0.05
"""The heartbeat's period, in seconds."""
WORST_GAP = 0.5
"""The longest time between two heartbeat ticks the tests accept, in seconds.

Half the shortest time a lock is held here (1 s): a loop blocked on the lock stalls for
the whole hold, while a busy machine's scheduler delays a tick by a tenth of a second
(0.114 s seen in a CI run next to other work), which says nothing about the store.
"""

# A child process that locks the history file exclusively, as a store's writer does, holds
# the lock for argv[2] seconds, and says when it took the lock and when it let it go.
_HOLD_LOCK = """
import sys, time
from pathlib import Path
from nodestep.store._file import io as _io
path, seconds = Path(sys.argv[1]), float(sys.argv[2])
fd = _io.open_rw(path)
lock_fd = _io.open_lock_target(path, fd)
_io.lock(lock_fd, exclusive=True)
print("locked", flush=True)
time.sleep(seconds)  # real time: a writer that takes its time; the loops must not stall
released = time.time()
_io.unlock(lock_fd)
print("released", released, flush=True)
"""

# A child process that opens its own store on the file and appends one record.
_APPEND = """
import sys, time, anyio
from nodestep.store import FilesystemStateStore
path, seq = sys.argv[1], int(sys.argv[2])
record = {"id": f"child-{seq}", "seq": seq, "ts": time.time(), "thread": "t1",
          "branch": "main", "type": "state_updated", "values": {"n": seq}}
store = FilesystemStateStore(path)
anyio.run(lambda: store.append("t1", "main", [record], after=seq - 1))
"""


def record(seq: int, thread: str = "t1") -> Record:
    """Return a history record, as the engine would build it."""
    return {
        "id": str(uuid.uuid4()),
        "seq": seq,
        "ts": time.time(),
        "thread": thread,
        "branch": "main",
        "type": "state_updated",
        "values": {"n": seq},
    }


def _child_env() -> dict[str, str]:
    # The children import the nodestep under test, wherever this process imports it from.
    src = str(Path(nodestep.__file__).resolve().parents[1])
    return {**os.environ, "PYTHONPATH": os.pathsep.join([src, os.environ.get("PYTHONPATH", "")])}


class LockHolder:
    """A child process holding the history file's exclusive lock."""

    def __init__(self, proc: subprocess.Popen[str]) -> None:
        self.proc = proc

    def released_at(self) -> float:
        """Wait for the child to let go of the lock; return when it did (``time.time()``)."""
        assert self.proc.stdout is not None
        word, when = self.proc.stdout.readline().split()
        assert word == "released"
        return float(when)


@contextmanager
def lock_held_by_another_process(path: Path, seconds: float) -> Iterator[LockHolder]:
    """Start a process that holds ``path``'s exclusive lock for ``seconds``, once it holds it."""
    proc = subprocess.Popen(
        [sys.executable, "-c", _HOLD_LOCK, str(path), str(seconds)],
        stdout=subprocess.PIPE,
        text=True,
        env=_child_env(),
    )
    try:
        assert proc.stdout is not None
        assert proc.stdout.readline().strip() == "locked"
        yield LockHolder(proc)
        assert proc.wait(timeout=10) == 0
    finally:
        if proc.poll() is None:
            proc.kill()
            proc.wait()
        if proc.stdout is not None:
            proc.stdout.close()


def append_in_another_process(path: Path, seq: int) -> int:
    """Append record ``seq`` of thread t1 from a new process; return its exit code."""
    child = [sys.executable, "-c", _APPEND, str(path), str(seq)]
    return subprocess.run(child, env=_child_env(), timeout=20).returncode


class TakenLock:
    """A store's thread lock that says when a thread first took it."""

    def __init__(self) -> None:
        self._lock = threading.Lock()
        self.taken = threading.Event()

    def acquire(self, blocking: bool = True, timeout: float = -1) -> bool:
        got = self._lock.acquire(blocking, timeout)
        if got:
            self.taken.set()
        return got

    def release(self) -> None:
        self._lock.release()

    def locked(self) -> bool:
        return self._lock.locked()

    def __enter__(self) -> bool:
        return self.acquire()

    def __exit__(self, *exc: object) -> None:
        self.release()


class Heartbeat:
    """A task that ticks every ``TICK`` seconds and records the time between ticks."""

    def __init__(self) -> None:
        self.gaps: list[float] = []
        self._stopped = False

    async def run(self, *, task_status: anyio.abc.TaskStatus[None]) -> None:
        last = time.monotonic()
        task_status.started()  # the calls start after this: a stall from then on counts
        while not self._stopped:
            await anyio.sleep(TICK)  # real time: what a stalled event loop would delay
            now = time.monotonic()
            self.gaps.append(now - last)
            last = now

    def stop(self) -> None:
        self._stopped = True

    @property
    def worst(self) -> float:
        return max(self.gaps)


async def with_heartbeat(*calls: Any) -> Heartbeat:
    """Run ``calls`` (async functions) concurrently next to a heartbeat; return it."""
    beat = Heartbeat()
    async with anyio.create_task_group() as tg:
        await tg.start(beat.run)
        async with anyio.create_task_group() as inner:
            for call in calls:
                inner.start_soon(call)
        beat.stop()
    return beat


@pytest.fixture
def path(tmp_path: Path) -> Path:
    return tmp_path / "history.jsonl"


@pytest.fixture(autouse=True)
def no_faults_left() -> Iterator[None]:
    yield
    _io.faults = None


@pytest.mark.slow
async def test_loop_runs_on_while_another_process_holds_the_file_lock(path: Path) -> None:
    store = FilesystemStateStore(path)
    first = record(1)
    await store.append("t1", "main", [first], after=0)
    second = record(2)
    done: dict[str, Any] = {}

    async def append() -> None:
        await store.append("t1", "main", [second], after=1)
        done["append"] = time.time()

    async def read() -> None:
        done["read"] = await store.read("t1", "main")

    with lock_held_by_another_process(path, 1.5) as holder:
        beat = await with_heartbeat(append, read)
        released = holder.released_at()

    print(f"worst heartbeat gap {beat.worst * 1000:.1f} ms over {len(beat.gaps)} ticks")
    assert beat.worst < WORST_GAP, f"the event loop stalled for {beat.worst:.3f} s"
    assert len(beat.gaps) >= 20, "the calls did not wait for the lock"
    assert done["append"] >= released, "the append did not wait for the lock"
    assert done["read"] in ([first], [first, second])
    assert await store.read("t1", "main") == [first, second]
    again = FilesystemStateStore(path)
    assert await again.read("t1", "main") == [first, second]
    assert path.read_bytes().count(second["id"].encode()) == 1
    await again.aclose()
    await store.aclose()


@pytest.mark.slow
async def test_loop_runs_on_while_another_thread_holds_the_store(path: Path) -> None:
    # Thread A appends while another process holds the file lock, so A holds the store's
    # thread lock while it waits; this thread's loop uses the same store meanwhile.
    store = FilesystemStateStore(path)
    first = record(1)
    await store.append("t1", "main", [first], after=0)
    assert await store.last_sequence("t1", "main") == 1  # warm: the lock-free path is open
    second = record(2)
    done: dict[str, Any] = {}

    async def last_sequence() -> None:
        done["last_sequence"] = await store.last_sequence("t1", "main")

    async def read() -> None:
        done["read"] = await store.read("t1", "main")

    with lock_held_by_another_process(path, 1.0) as holder:
        writer = threading.Thread(
            target=lambda: anyio.run(lambda: store.append("t1", "main", [second], after=1))
        )
        store._lock = lock = TakenLock()  # type: ignore[assignment]
        writer.start()
        # A holds the store, waiting for the file.
        assert lock.taken.wait(5), "thread A never took the store's lock"
        beat = await with_heartbeat(last_sequence, read)
        holder.released_at()
        writer.join(timeout=10)

    print(f"worst heartbeat gap {beat.worst * 1000:.1f} ms over {len(beat.gaps)} ticks")
    assert beat.worst < WORST_GAP, f"the event loop stalled for {beat.worst:.3f} s"
    assert len(beat.gaps) >= 10, "the calls did not wait for thread A"
    assert done["last_sequence"] in (1, 2)
    assert done["read"] in ([first], [first, second])
    assert await store.read("t1", "main") == [first, second]
    await store.aclose()


@pytest.mark.slow
async def test_a_cancelled_waiter_returns_at_once_and_leaves_no_lock_behind(path: Path) -> None:
    store = FilesystemStateStore(path)
    await store.append("t1", "main", [record(1)], after=0)

    with lock_held_by_another_process(path, 1.0) as holder:
        started = time.monotonic()
        with anyio.move_on_after(0.2) as scope:
            await store.append("t1", "main", [record(2)], after=1)
        waited = time.monotonic() - started
        holder.released_at()

    assert scope.cancelled_caught
    assert waited < 0.5, f"the cancelled append went on waiting for {waited:.3f} s"
    # The abandoned wait takes the file lock once it is free, and must give it back (and
    # the store's thread lock too): another process and this store can both write.
    assert append_in_another_process(path, 2) == 0
    with anyio.fail_after(5):
        await store.append("t1", "main", [record(3)], after=2)
    seqs = [r["seq"] for r in await store.read("t1", "main")]
    assert seqs == [1, 2, 3]
    assert (await store.read("t1", "main", start=2, stop=2))[0]["id"] == "child-2"
    await store.aclose()


@contextmanager
def store_held_by_another_thread(store: FilesystemStateStore, seconds: float) -> Iterator[None]:
    """Hold ``store``'s thread lock in another thread for ``seconds``, as a call there would."""
    taken = threading.Event()

    def hold() -> None:
        with store._lock:
            taken.set()
            time.sleep(seconds)  # real time: a call that takes its time; the loop must not stall

    holder = threading.Thread(target=hold)
    holder.start()
    try:
        assert taken.wait(5)
        yield
    finally:
        holder.join(10)


@pytest.mark.slow
async def test_a_waiter_cancelled_while_another_thread_holds_the_store_takes_nothing(
    path: Path,
) -> None:
    store = FilesystemStateStore(path)
    await store.append("t1", "main", [record(1)], after=0)
    with store_held_by_another_thread(store, 1.0):
        started = time.monotonic()
        with anyio.move_on_after(0.05) as scope:
            await store.read("t1", "main")
        waited = time.monotonic() - started
    assert scope.cancelled_caught
    # Held for 1 s: a read that went on waiting would take that long.
    assert waited < WORST_GAP, f"the cancelled read went on waiting for {waited:.3f} s"
    with anyio.fail_after(5):  # the abandoned wait gave the thread lock back
        assert [r["seq"] for r in await store.read("t1", "main")] == [1]
        await store.append("t1", "main", [record(2)], after=1)
    await store.aclose()


@pytest.mark.slow
async def test_aclose_waits_for_another_thread_without_stalling_the_loop(path: Path) -> None:
    store = FilesystemStateStore(path)

    async def close() -> None:
        await store.aclose()

    with store_held_by_another_thread(store, 1.0):
        beat = await with_heartbeat(close)
    assert beat.worst < WORST_GAP, f"the event loop stalled for {beat.worst:.3f} s"
    with pytest.raises(StateStoreError, match="closed"):
        await store.read("t1", "main")


@pytest.mark.slow
async def test_a_lock_failing_while_waited_for_is_reported_and_releases_the_store(
    path: Path,
) -> None:
    store = FilesystemStateStore(path)
    with lock_held_by_another_process(path, 0.3) as holder:
        # The first try finds the lock held; the wait for it, off the loop, fails.
        _io.faults = _io.FaultPlan(fail_op="lock", fail_at=2, fail_count=1)
        with pytest.raises(StateStoreError, match="Cannot lock"):
            await store.append("t1", "main", [record(1)], after=0)
        assert [op for op, _, _ in _io.faults.log].count("lock") == 2
        holder.released_at()
    _io.faults = None
    with anyio.fail_after(5):
        await store.append("t1", "main", [record(1)], after=0)
    assert await store.last_sequence("t1", "main") == 1
    await store.aclose()


# -- the hand-off between a cancelled caller and its worker thread ------------------------


class FakeLock:
    """A lock whose ``acquire`` blocks until the test lets it return (or raise)."""

    def __init__(self, error: Exception | None = None) -> None:
        self.started = threading.Event()
        self.go = threading.Event()
        self.error = error
        self.given_up: list[tuple[bool, bool]] = []  # (taken, in the worker thread)
        self.loop_thread = threading.get_ident()
        self.done = threading.Event()
        self.acquired_off_loop: bool | None = None

    def acquire(self) -> None:
        self.acquired_off_loop = threading.get_ident() != self.loop_thread
        self.started.set()
        assert self.go.wait(5)
        if self.error is not None:
            raise self.error

    def give_up(self, taken: bool) -> None:
        self.given_up.append((taken, threading.get_ident() != self.loop_thread))
        self.done.set()


async def test_a_wait_cancelled_before_its_worker_starts_takes_nothing() -> None:
    fake = FakeLock()
    with anyio.CancelScope() as scope:
        scope.cancel()
        await wait_off_loop(fake.acquire, fake.give_up)
    assert not fake.started.is_set()
    assert fake.given_up == [(False, False)]


async def test_a_lock_taken_after_its_waiter_left_is_given_back_by_the_worker() -> None:
    fake = FakeLock()
    with anyio.move_on_after(5) as scope:
        async with anyio.create_task_group() as tg:
            tg.start_soon(wait_off_loop, fake.acquire, fake.give_up)
            await anyio.to_thread.run_sync(fake.started.wait, 5)
            scope.cancel()
    assert fake.given_up == []  # the worker still waits: it gives the lock back
    fake.go.set()
    assert await anyio.to_thread.run_sync(fake.done.wait, 5)
    assert fake.given_up == [(True, True)]


async def test_a_lock_failing_after_its_waiter_left_releases_in_the_worker() -> None:
    fake = FakeLock(OSError(5, "injected"))
    with anyio.move_on_after(5) as scope:
        async with anyio.create_task_group() as tg:
            tg.start_soon(wait_off_loop, fake.acquire, fake.give_up)
            await anyio.to_thread.run_sync(fake.started.wait, 5)
            scope.cancel()
    fake.go.set()
    assert await anyio.to_thread.run_sync(fake.done.wait, 5)
    assert fake.given_up == [(False, True)]


async def test_a_lock_failing_while_waited_for_raises_and_gives_up_once() -> None:
    fake = FakeLock(OSError(5, "injected"))
    fake.go.set()
    with pytest.raises(OSError, match="injected"):
        await wait_off_loop(fake.acquire, fake.give_up)
    assert fake.acquired_off_loop
    assert fake.given_up == [(False, False)]


async def test_a_lock_is_waited_for_in_a_worker_thread_and_kept() -> None:
    fake = FakeLock()
    fake.go.set()
    await wait_off_loop(fake.acquire, fake.give_up)
    assert fake.acquired_off_loop
    assert fake.given_up == []
