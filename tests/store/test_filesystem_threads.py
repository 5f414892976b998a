"""The file store's delete and prune: a rewrite of the file, other stores following it, faults.

The behaviour every store shares is in the conformance suite; these tests are about the
file: what is on the disk afterwards, what another store on the same path sees, and what a
failed or killed rewrite leaves.
"""

from __future__ import annotations

import errno
import os
from collections.abc import Iterator
from pathlib import Path

import orjson
import pytest

from nodestep._errors import StateStoreError
from nodestep.store import FilesystemStateStore, _codec
from nodestep.store._file import io as _io
from nodestep.testing import checkpoint, event, seqs

pytestmark = pytest.mark.anyio


@pytest.fixture
def path(tmp_path: Path) -> Path:
    return tmp_path / "history.jsonl"


@pytest.fixture
def faults() -> Iterator[None]:
    yield
    _io.faults = None


def history(thread: str, last: int, every: int = 4) -> list[dict[str, object]]:
    """Records 1..last of a main branch, with a checkpoint at 1, 1 + every, ..."""
    return [
        checkpoint(seq, thread) if seq % every == 1 else event(seq, thread)
        for seq in range(1, last + 1)
    ]


async def filled(path: Path, threads: dict[str, int]) -> FilesystemStateStore:
    store = FilesystemStateStore(path)
    for thread, last in threads.items():
        await store.append(thread, "main", history(thread, last), after=0)
    return store


def lines(path: Path) -> list[bytes]:
    return path.read_bytes().splitlines(keepends=True)


async def test_delete_thread_removes_its_bytes_and_keeps_other_lines_as_they_were(
    path: Path,
) -> None:
    store = await filled(path, {"secret-thread": 3, "other": 3})
    before = [line for line in lines(path)[1:] if b"secret-thread" not in line]
    assert await store.delete_thread("secret-thread")
    data = path.read_bytes()
    assert b"secret-thread" not in data
    assert lines(path)[1:] == [line for line in before if b'"type":"batch"' not in line]
    assert seqs(await FilesystemStateStore(path).read("other", "main")) == [1, 2, 3]


async def test_another_store_on_the_path_follows_the_rewritten_file(path: Path) -> None:
    store = await filled(path, {"a": 12, "b": 2})
    other = FilesystemStateStore(path)
    assert await other.last_sequence("a", "main") == 12
    await store.prune("a", keep_last=2)
    assert seqs(await other.read("a", "main")) == [9, 10, 11, 12]
    await other.append("a", "main", [event(13, "a")], after=12)
    await store.delete_thread("b")
    assert seqs(await store.read("a", "main")) == [9, 10, 11, 12, 13]
    assert await other.read("b", "main") == []


async def test_a_pruned_file_is_version_4_with_one_start_line_per_cut_branch(
    path: Path,
) -> None:
    store = await filled(path, {"a": 12})
    await store.prune("a", keep_last=6)
    header = orjson.loads(lines(path)[0])
    assert header["version"] == 4
    assert [orjson.loads(line[: line.index(b', "c"')] + b"}") for line in lines(path)[1:2]] == [
        {"type": "start", "thread": "a", "branch": "main", "seq": 5}
    ]
    await store.prune("a", keep_last=1)  # the start line moves; the file stays readable
    starts = [line for line in lines(path) if b'"type":"start"' in line]
    assert len(starts) == 1 and b'"seq":9' in starts[0]
    reopened = FilesystemStateStore(path)
    assert seqs(await reopened.read("a", "main")) == [9, 10, 11, 12]
    await reopened.append("a", "main", [event(13, "a")], after=12)  # a v4 file is written to
    assert orjson.loads(lines(path)[0])["version"] == 4


async def test_a_start_line_that_contradicts_the_records_is_reported(path: Path) -> None:
    store = await filled(path, {"a": 12})
    await store.prune("a", keep_last=1)
    data = path.read_bytes()
    start = next(line for line in lines(path) if b'"type":"start"' in line)
    body = start[: start.index(b', "c"')].replace(b'"seq":9', b'"seq":7')
    path.write_bytes(data.replace(start, _codec._seal(body)))
    with pytest.raises(StateStoreError, match=r"line 3 .*has seq 9, but the branch's next"):
        FilesystemStateStore(path)


async def test_a_rewrite_that_drops_nothing_leaves_the_file_alone(path: Path) -> None:
    store = await filled(path, {"a": 3})
    inode, data = os.stat(path).st_ino, path.read_bytes()
    assert await store.prune(keep_last=1) == 0
    assert await store.delete_thread("nobody") is False
    assert (os.stat(path).st_ino, path.read_bytes()) == (inode, data)


async def test_a_failed_rename_leaves_the_old_file_and_no_temporary_one(
    path: Path, faults: None
) -> None:
    store = await filled(path, {"a": 12})
    data = path.read_bytes()
    _io.faults = _io.FaultPlan(fail_op="rename", error=errno.EACCES)
    with pytest.raises(StateStoreError, match=r"Cannot rewrite .*Nothing was dropped"):
        await store.prune("a", keep_last=1)
    _io.faults = None
    assert path.read_bytes() == data
    assert sorted(p.name for p in path.parent.iterdir()) == ["history.jsonl"]
    assert seqs(await store.read("a", "main"))[0] == 1
    assert await store.prune("a", keep_last=1) == 8  # and works once the fault is gone


async def test_a_temporary_file_a_killed_rewrite_left_is_removed_by_the_next(
    path: Path,
) -> None:
    store = await filled(path, {"a": 12})
    stale = path.with_name(f"{path.name}.rewrite-99999-0000abcd.tmp")
    stale.write_bytes(b"half a rewrite")
    await store.prune("a", keep_last=1)
    assert not stale.exists()


async def test_a_read_only_store_refuses_to_delete_or_prune(path: Path) -> None:
    await filled(path, {"a": 12})
    reader = FilesystemStateStore(path, read_only=True)
    with pytest.raises(StateStoreError, match="read_only=True"):
        await reader.delete_thread("a")
    with pytest.raises(StateStoreError, match="read_only=True"):
        await reader.prune(keep_last=1)
    assert [t.thread_id for t in (await reader.list_threads()).threads] == ["a"]
