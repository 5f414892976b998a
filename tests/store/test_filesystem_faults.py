"""FilesystemStateStore under faults: torn tails, failed writes, and forked processes."""

from __future__ import annotations

import errno
import hashlib
import os
import random
import signal
import time
from collections.abc import Iterator
from pathlib import Path

import anyio
import pytest
from forking import in_child, in_fresh_interpreter, needs_fork, runner, wait

from nodestep._errors import StateStoreError
from nodestep.store import FilesystemStateStore, _codec
from nodestep.store._file import io as _io
from nodestep.testing import checkpoint, event, events, seqs

# The async tests run once per back end. The fork tests stay sync and take the back end as
# a parameter instead: a child forked inside a running event loop could not start its own.
pytestmark = pytest.mark.anyio


@pytest.fixture
def path(tmp_path: Path) -> Path:
    return tmp_path / "history.jsonl"


@pytest.fixture
def store(path: Path) -> Iterator[FilesystemStateStore]:
    store = FilesystemStateStore(path)
    yield store
    anyio.run(store.aclose)  # a plain fixture: the fork tests are sync (see forking.runner)


@pytest.fixture(autouse=True)
def no_faults_left() -> Iterator[None]:
    yield
    _io.faults = None


def _torn_tails() -> dict[str, bytes]:
    line = _codec.encode_event(event(4, text="a" * 100))  # as the store writes it
    rng = random.Random(7)
    noise = bytes(rng.choice([b for b in range(256) if b != 10]) for _ in range(333))
    batch = _codec.batch_line([line, line]) + line
    return {
        "half-a-line": line[: len(line) // 2],
        "4096-nuls": b"\0" * 4096,
        "json-without-newline": line[:-1],
        "partial-utf8-char": b'{"id":"x","text":"' + "日".encode()[:2],
        "random-bytes": noise,
        "batch-missing-a-line": batch,
        "batch-line-only": batch[: batch.index(b"\n") + 1],
    }


TORN_TAILS = _torn_tails()


async def make_history(path: Path) -> bytes:
    """Write three events and a branch-free checkpoint; return the file's bytes."""
    store = FilesystemStateStore(path)
    await store.append("t1", "main", [event(1)], after=0)
    await store.append("t1", "main", [event(2), checkpoint(3)], after=1)
    await store.aclose()
    return path.read_bytes()


# -- torn tails ---------------------------------------------------------------------------


@pytest.mark.parametrize("tail", TORN_TAILS.values(), ids=TORN_TAILS.keys())
async def test_torn_tail_is_cut_on_open_and_the_next_append_works(path: Path, tail: bytes) -> None:
    clean = await make_history(path)
    with path.open("ab") as f:
        f.write(tail)
    store = FilesystemStateStore(path)
    try:
        assert store.repaired_bytes == len(tail)
        assert path.read_bytes() == clean
        assert seqs(await store.read("t1", "main")) == [1, 2, 3]
        new = event(4)
        await store.append("t1", "main", [new], after=3)
    finally:
        await store.aclose()
    assert path.read_bytes() == clean + _codec.encode_event(new)
    again = FilesystemStateStore(path)
    assert again.repaired_bytes == 0
    assert seqs(await again.read("t1", "main")) == [1, 2, 3, 4]
    await again.aclose()


@pytest.mark.parametrize("tail", TORN_TAILS.values(), ids=TORN_TAILS.keys())
async def test_reader_leaves_a_torn_tail_alone_and_the_next_writer_cuts_it(
    path: Path, store: FilesystemStateStore, tail: bytes
) -> None:
    clean = await make_history(path)
    with path.open("ab") as f:  # another process's writer died here
        f.write(tail)
    digest = hashlib.sha256(path.read_bytes()).hexdigest()
    assert seqs(await store.read("t1", "main")) == [1, 2, 3]
    assert await store.last_sequence("t1", "main") == 3
    assert hashlib.sha256(path.read_bytes()).hexdigest() == digest
    assert store.repaired_bytes == 0
    await store.append("t1", "main", [event(4)], after=3)
    assert store.repaired_bytes == len(tail)
    assert path.read_bytes().startswith(clean) and path.read_bytes().endswith(b"\n")
    assert path.read_bytes().count(b"\n") == clean.count(b"\n") + 1


# -- failed writes ------------------------------------------------------------------------


@pytest.mark.parametrize("written", [0, 1, 50, 200])
async def test_failed_or_short_write_leaves_the_file_as_it_was(
    path: Path, store: FilesystemStateStore, written: int
) -> None:
    await store.append("t1", "main", events(1, 1), after=0)
    before = path.read_bytes()
    _io.faults = _io.FaultPlan(fail_op="write", fail_count=1, write_bytes=written)
    batch = [event(2, text="x" * 300), checkpoint(3)]
    with pytest.raises(StateStoreError, match=r"No space left on device.*\(errno 28\)") as info:
        await store.append("t1", "main", batch, after=1)
    assert info.value.path == str(path)
    assert isinstance(info.value.__cause__, OSError)
    assert path.read_bytes() == before
    assert await store.last_sequence("t1", "main") == 1
    assert await store.locate("t1", batch[0]["id"]) is None
    await store.append("t1", "main", batch, after=1)
    assert seqs(await FilesystemStateStore(path).read("t1", "main")) == [1, 2, 3]


async def test_failed_fsync_removes_the_append_and_poisons_the_store(path: Path) -> None:
    store = FilesystemStateStore(path, fsync=True)
    await store.append("t1", "main", events(1, 1), after=0)
    size = path.stat().st_size
    _io.faults = _io.FaultPlan(fail_op="fsync", fail_count=1, error=errno.EIO)
    with pytest.raises(StateStoreError, match="errno 5"):
        await store.append("t1", "main", events(2, 2), after=1)
    assert path.stat().st_size == size
    # Never retry and report success: this object refuses every later call ...
    for call in (
        lambda: store.append("t1", "main", events(2, 2), after=1),
        lambda: store.read("t1", "main"),
        lambda: store.last_sequence("t1", "main"),
    ):
        with pytest.raises(StateStoreError, match="stopped after fsync failed"):
            await call()
    assert path.stat().st_size == size
    await store.aclose()
    # ... and a new store reads the file again and goes on.
    fresh = FilesystemStateStore(path, fsync=True)
    assert await fresh.last_sequence("t1", "main") == 1
    await fresh.append("t1", "main", events(2, 2), after=1)
    assert path.stat().st_size > size
    await fresh.aclose()


@needs_fork
@pytest.mark.slow
def test_file_size_limit_gives_an_error_and_no_torn_record(path: Path, anyio_backend: str) -> None:
    run = runner(anyio_backend)
    resource = pytest.importorskip("resource")
    run(make_history(path))
    big = event(4, text="é" * 2000)

    def child() -> int:
        store = FilesystemStateStore(path)
        soft, hard = resource.getrlimit(resource.RLIMIT_FSIZE)
        size = path.stat().st_size
        for room in range(1, 4100, 97):  # Python ignores SIGXFSZ: writes fail with EFBIG
            resource.setrlimit(resource.RLIMIT_FSIZE, (size + room, hard))
            try:
                run(store.append("t1", "main", [big], after=3))
                return 2
            except StateStoreError as e:
                if "errno 27" not in str(e) or path.stat().st_size != size:
                    return 3
        resource.setrlimit(resource.RLIMIT_FSIZE, (soft, hard))
        run(store.append("t1", "main", [big], after=3))
        return 0

    assert wait(in_child(child)) == 0
    check = FilesystemStateStore(path)
    assert check.repaired_bytes == 0
    assert run(check.read("t1", "main", start=4)) == [big]
    run(check.aclose())


# -- fork ---------------------------------------------------------------------------------


@needs_fork
@pytest.mark.slow
def test_forked_child_opens_the_file_again_instead_of_sharing_the_lock(
    path: Path, store: FilesystemStateStore, anyio_backend: str
) -> None:
    run = runner(anyio_backend)
    run(store.append("t1", "main", events(1, 2), after=0))
    # Hold the lock through the store's own descriptor. A child still using that descriptor
    # would "hold" the lock too, and write at once.
    _io.lock(store._lock_fd, exclusive=True)
    try:
        pid = in_child(lambda: run(store.append("t1", "main", events(3, 3), after=2)))
        size = path.stat().st_size
        time.sleep(0.2)  # real time: a child that shared the lock would write meanwhile
        assert path.stat().st_size == size, "the child wrote while the parent held the lock"
    finally:
        _io.unlock(store._lock_fd)
    assert wait(pid) == 0
    assert seqs(run(store.read("t1", "main"))) == [1, 2, 3]
    run(store.append("t1", "main", events(4, 4), after=3))
    assert seqs(run(FilesystemStateStore(path).read("t1", "main"))) == [1, 2, 3, 4]


@needs_fork
def test_forked_child_keeps_the_index_and_the_parent_its_descriptor(
    path: Path, store: FilesystemStateStore, anyio_backend: str
) -> None:
    run = runner(anyio_backend)
    run(store.append("t1", "main", events(1, 2), after=0))
    parent_fd = store._fd

    def child() -> int:
        _io.faults = _io.FaultPlan()
        assert run(store.last_sequence("t1", "main")) == 2
        assert store._pid == os.getpid()  # reopened, not the parent's descriptor
        assert _io.faults.reads() == []  # nothing new in the file: nothing read
        run(store.aclose())
        return 0

    assert wait(in_child(child)) == 0
    assert store._fd == parent_fd
    run(store.append("t1", "main", events(3, 3), after=2))


@needs_fork
def test_forked_child_does_not_wait_for_a_thread_lock_held_at_fork_time(
    path: Path, store: FilesystemStateStore, anyio_backend: str
) -> None:
    run = runner(anyio_backend)
    run(store.append("t1", "main", events(1, 2), after=0))
    assert run(store.last_sequence("t1", "main")) == 2  # warm: the next call may skip the lock
    # Another thread of the parent is inside a call at fork time: the child's copy of the
    # store's thread lock stays held forever.
    with store._lock:
        pid = in_child(lambda: 0 if run(store.last_sequence("t1", "main")) == 2 else 2)
    assert wait(pid, timeout=10) == 0


@needs_fork
@pytest.mark.slow
def test_crash_at_every_byte_of_an_append_keeps_it_all_or_nothing(
    path: Path, anyio_backend: str
) -> None:
    # One fork a byte, from a small process rather than from the test session's.
    in_fresh_interpreter(crash_at_every_byte, str(path), anyio_backend)


def crash_at_every_byte(where: str, backend: str) -> None:
    """Kill a child appending to the file at ``where`` after each byte of its append, in
    turn; after each kill, check that readers and the next writer see it whole or not at all."""
    path = Path(where)
    run = runner(backend)
    clean = run(make_history(path))
    batch = [event(4, text="ü"), checkpoint(5)]
    writer = FilesystemStateStore(path)
    run(writer.append("t1", "main", batch, after=3))
    run(writer.aclose())
    whole = path.read_bytes()[len(clean) :]
    reader = FilesystemStateStore(path)  # open before the crashes, as another process would be
    try:
        for k in range(len(whole) + 1):
            path.write_bytes(clean)

            def child(k: int = k) -> int:
                store = FilesystemStateStore(path)
                _io.faults = _io.FaultPlan(fail_op="write", write_bytes=k, crash=True)
                run(store.append("t1", "main", batch, after=3))
                return 0  # not reached: the write kills the process

            # Run outside pytest, the asserts say which byte; the file shows what broke.
            assert wait(in_child(child)) == -signal.SIGKILL, f"byte {k}: the child lived"
            assert path.read_bytes() == clean + whole[:k], f"byte {k}: {path.read_bytes()!r}"
            done = k == len(whole)
            assert run(reader.last_sequence("t1", "main")) == (5 if done else 3), f"byte {k}"
            assert path.read_bytes() == clean + whole[:k], f"byte {k}: a reader changed the file"
            store = FilesystemStateStore(path)
            assert store.repaired_bytes == (0 if done else k), f"byte {k}: {store.repaired_bytes}"
            if not done:
                run(store.append("t1", "main", batch, after=3))
            assert path.read_bytes() == clean + whole, f"byte {k}: {path.read_bytes()!r}"
            run(store.aclose())
    finally:
        run(reader.aclose())
