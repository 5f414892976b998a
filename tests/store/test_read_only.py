"""``FilesystemStateStore(path, read_only=True)``: read a history this process may not write."""

from __future__ import annotations

import errno
import fcntl
import logging
import os
import shutil
import stat
import tempfile
import traceback
from collections.abc import Callable, Iterator
from pathlib import Path

import anyio
import pytest

from nodestep import END, START, BaseState, FilesystemStateStore, Graph, node
from nodestep._errors import StateStoreError
from nodestep.store import _codec
from nodestep.store._file import io as _io
from nodestep.testing import checkpoint, event, fork, seqs

AS_ROOT = hasattr(os, "geteuid") and os.geteuid() == 0
NOBODY = 65534


def as_unprivileged(check: Callable[[], None]) -> None:
    """Run ``check`` where file permissions hold: here, or as ``nobody`` in a child if root.

    Root may write a file without write permission, so under root the check runs in a
    forked child that gave up root first; its assertion errors come back as the failure.
    """
    if not AS_ROOT:
        check()
        return
    read, write = os.pipe()
    pid = os.fork()
    if pid == 0:  # the child: drop root, run the check, report, and leave at once
        os.close(read)
        status = 0
        try:
            os.setgid(NOBODY)
            os.setuid(NOBODY)
            check()
        except BaseException:
            status = 1
            os.write(write, traceback.format_exc().encode())
        os._exit(status)
    os.close(write)
    with os.fdopen(read, "rb") as pipe:
        report = pipe.read().decode()
    _, status = os.waitpid(pid, 0)
    assert os.waitstatus_to_exitcode(status) == 0, report


@pytest.fixture
def shared_path() -> Iterator[Path]:
    """A path in a directory everyone may read, for checks run as ``nobody``."""
    directory = Path(tempfile.mkdtemp(prefix="nodestep-ro-"))
    directory.chmod(0o755)
    yield directory / "history.jsonl"
    shutil.rmtree(directory)


@pytest.fixture
def path(tmp_path: Path) -> Path:
    return tmp_path / "history.jsonl"


@pytest.fixture(autouse=True)
def no_faults_left() -> Iterator[None]:
    yield
    _io.faults = None


class Counter(BaseState):
    n: int = 0


@node
def count(state: Counter) -> dict[str, int]:
    return {"n": state.n + 1}


def write_history(path: Path) -> bytes:
    """Write the file a store writes for one append of two records; return its bytes."""
    lines = [_codec.encode_event(checkpoint(1)), _codec.encode_event(event(2))]
    data = _codec.header_line(1.5) + _codec.batch_line(lines) + b"".join(lines)
    path.write_bytes(data)
    return data


def test_a_read_only_store_opens_the_file_for_reading_only_and_writes_nothing(
    path: Path,
) -> None:
    data = write_history(path)
    before = path.stat().st_mtime_ns
    _io.faults = _io.FaultPlan()  # logs every operation
    store = FilesystemStateStore(path, read_only=True)
    assert store.read_only
    assert fcntl.fcntl(store._fd, fcntl.F_GETFL) & os.O_ACCMODE == os.O_RDONLY
    assert seqs(anyio.run(lambda: store.read("t1", "main"))) == [1, 2]
    anyio.run(store.aclose)
    ops = {op for op, _, _ in _io.faults.log}
    assert ops.isdisjoint({"write", "pwrite", "truncate", "fsync", "fsync_dir"}), ops
    assert path.read_bytes() == data
    assert path.stat().st_mtime_ns == before


def test_a_file_without_write_permission_is_read_with_read_only(shared_path: Path) -> None:
    path = shared_path
    write_history(path)
    path.chmod(stat.S_IRUSR | stat.S_IRGRP | stat.S_IROTH)  # 0o444

    def check() -> None:
        store = FilesystemStateStore(path, read_only=True)
        assert seqs(anyio.run(lambda: store.read("t1", "main"))) == [1, 2]
        anyio.run(store.aclose)

    as_unprivileged(check)


def test_a_file_without_write_permission_is_refused_without_read_only_with_the_fix(
    shared_path: Path,
) -> None:
    path = shared_path
    write_history(path)
    path.chmod(stat.S_IRUSR | stat.S_IRGRP | stat.S_IROTH)  # 0o444

    def check() -> None:
        with pytest.raises(StateStoreError, match=r"read_only=True") as info:
            FilesystemStateStore(path)
        assert info.value.path == str(path)

    as_unprivileged(check)


@pytest.mark.parametrize("error", [errno.EACCES, errno.EROFS])
def test_a_file_this_process_may_not_write_is_refused_with_the_read_only_fix(
    path: Path, error: int
) -> None:
    # As the system refuses it, also under root, where permissions do not stop writes.
    write_history(path)
    _io.faults = _io.FaultPlan(fail_op="open", error=error)
    fix = r"FilesystemStateStore\(path, read_only=True\)"
    words = rf"Cannot open {path}: .* \(errno {error}\)\. .*{fix}"
    with pytest.raises(StateStoreError, match=words) as info:
        FilesystemStateStore(path)
    assert info.value.path == str(path)


@pytest.mark.anyio
async def test_every_write_to_a_read_only_store_is_refused_and_stores_nothing(
    path: Path,
) -> None:
    writer = FilesystemStateStore(path)
    graph = Graph(Counter, state_store=writer).flow(START >> count, count >> END)
    await graph.ainvoke({"n": 1}, thread_id="t1")
    await writer.aclose()
    data = path.read_bytes()

    store = FilesystemStateStore(path, read_only=True)
    graph = Graph(Counter, state_store=store).flow(START >> count, count >> END)
    assert (await graph.get_state("t1")).value.n == 2
    first = (await store.read("t1", "main"))[0]
    words = r"opened with read_only=True, and only reads\. Nothing was stored"
    with pytest.raises(StateStoreError, match=words) as info:
        await store.append("t1", "main", [event(5)], after=4)
    assert info.value.path == str(path)
    with pytest.raises(StateStoreError, match=words):
        await store.create_branch(fork("t1", "alt", first), [checkpoint(2, branch="alt")])
    with pytest.raises(StateStoreError, match=words):
        await graph.ainvoke({"n": 1}, thread_id="t1")
    with pytest.raises(StateStoreError, match=words):
        await graph.ainvoke({"n": 1}, thread_id="t2")
    with pytest.raises(StateStoreError, match=words):
        await graph.update_state("t1", {"n": 5})
    with pytest.raises(StateStoreError, match=words):
        await graph.fork("t1", from_=first["id"], name="alt")
    await store.aclose()
    assert path.read_bytes() == data


def test_a_read_only_store_leaves_a_torn_tail_and_reads_the_history_before_it(
    path: Path, caplog: pytest.LogCaptureFixture
) -> None:
    data = write_history(path)
    torn = _codec.encode_event(event(3))[:40]
    path.write_bytes(data + torn)
    with caplog.at_level(logging.WARNING, logger="nodestep.store.filesystem"):
        store = FilesystemStateStore(path, read_only=True)
    assert store.repaired_bytes == 0
    assert f"the last {len(torn)} bytes are not a whole append" in caplog.text
    assert seqs(anyio.run(lambda: store.read("t1", "main"))) == [1, 2]
    anyio.run(store.aclose)
    assert path.read_bytes() == data + torn


def test_a_read_only_store_does_not_create_a_missing_file(tmp_path: Path) -> None:
    path = tmp_path / "missing" / "history.jsonl"
    with pytest.raises(StateStoreError, match="opens only an existing history") as info:
        FilesystemStateStore(path, read_only=True)
    assert info.value.path == str(path)
    assert not path.parent.exists()


@pytest.mark.parametrize("content", [b"", b'{"type":"header","for'])
def test_a_read_only_store_refuses_a_file_without_a_whole_header(
    path: Path, content: bytes
) -> None:
    path.write_bytes(content)
    with pytest.raises(StateStoreError, match="has no whole header line yet") as info:
        FilesystemStateStore(path, read_only=True)
    assert (info.value.path, info.value.line, info.value.offset) == (str(path), 1, 0)
    assert path.read_bytes() == content


def test_a_read_only_store_reads_an_older_file_without_upgrading_it(path: Path) -> None:
    header = b'{"type":"header","format":"nodestep-history","version":1,"created":1.5}\n'
    path.write_bytes(header)
    store = FilesystemStateStore(path, read_only=True)
    assert anyio.run(lambda: store.read("t1", "main")) == []
    with pytest.raises(StateStoreError, match="read_only=True"):
        anyio.run(lambda: store.append("t1", "main", [event(1)], after=0))
    anyio.run(store.aclose)
    assert path.read_bytes() == header


@pytest.mark.anyio
async def test_a_read_only_store_sees_what_a_writer_appends_later(path: Path) -> None:
    write_history(path)
    reader = FilesystemStateStore(path, read_only=True)
    writer = FilesystemStateStore(path)
    await writer.append("t1", "main", [event(3)], after=2)
    assert await reader.last_sequence("t1", "main") == 3
    assert seqs(await reader.read("t1", "main")) == [1, 2, 3]
    await writer.aclose()
    await reader.aclose()
