"""The file store's persisted index (``<path>.idx``): cheap cold opens, never trusted over the file.

``SAVE_AFTER`` is set low here, so that small files get an index. Each test compares what a
store opened from the index answers with what a store that read the whole file answers.
"""

from __future__ import annotations

import gc
import os
import random
import tempfile
import tracemalloc
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from forking import in_child, kill_and_collect, needs_fork, runner
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from nodestep._errors import StateStoreError
from nodestep.store import FilesystemStateStore
from nodestep.store._file import io as _io
from nodestep.store._file import persisted
from nodestep.testing import checkpoint, event, fork, seqs

pytestmark = pytest.mark.anyio


@pytest.fixture(autouse=True)
def small_saves(monkeypatch: pytest.MonkeyPatch) -> Iterator[None]:
    monkeypatch.setattr(persisted, "SAVE_AFTER", 1)
    yield
    _io.faults = None


@pytest.fixture
def path(tmp_path: Path) -> Path:
    return tmp_path / "history.jsonl"


def index_of(path: Path) -> Path:
    return persisted.sidecar(path)


async def write(path: Path, threads: int, last: int = 30, start: int = 0) -> None:
    """Append records 1..last to threads t<start>.., with a checkpoint every 10, and close."""
    store = FilesystemStateStore(path)
    for k in range(start, start + threads):
        records = [
            checkpoint(seq, f"t{k}") if seq % 10 == 1 else event(seq, f"t{k}", pad="x" * 50)
            for seq in range(1, last + 1)
        ]
        records[3] = {**records[3], "type": "run_started", "request": f"key-{k}"}
        await store.append(f"t{k}", "main", records, after=0)
    await store.aclose()


async def answers(store: FilesystemStateStore, threads: list[str]) -> list[Any]:
    """Everything a store says about ``threads``."""
    out: list[Any] = [(await store.list_threads(limit=1000)).threads]
    for thread in threads:
        records = await store.read(thread, "main")
        out += [
            records,
            await store.read_tail(thread, "main"),
            await store.locate(thread, records[-1]["id"]),
            await store.find_request(thread, "main", f"key-{thread[1:]}"),
            await store.list_branches(thread),
            await store.last_checkpoint(thread, "main", at_or_before=15),
        ]
    return out


async def full_scan(path: Path, threads: list[str]) -> list[Any]:
    """What a store that reads the whole file answers (the index moved aside meanwhile)."""
    aside = index_of(path).with_name("aside")
    os.replace(index_of(path), aside)
    try:
        return await answers(FilesystemStateStore(path), threads)
    finally:
        os.replace(aside, index_of(path))


def lazy(store: FilesystemStateStore) -> persisted.LazyRecordIndex:
    index = store._log.records
    assert isinstance(index, persisted.LazyRecordIndex)
    return index


async def test_a_cold_open_reads_the_asked_threads_records_only(path: Path) -> None:
    await write(path, 60)
    assert index_of(path).exists()
    _io.faults = plan = _io.FaultPlan()
    store = FilesystemStateStore(path)
    tail = await store.read_tail("t7", "main")
    read = sum(size for _, size in plan.reads())
    assert seqs(tail) == [21, 22, 23, 24, 25, 26, 27, 28, 29, 30]
    # The index's header, one slot, one bucket and t7's part, both ends of the file (the
    # index's check that the file is the one it indexed) and t7's last records: not all.
    assert read < os.path.getsize(path) / 10, f"read {read} bytes"
    assert len(lazy(store).pending()) == 59  # only t7 was loaded


async def test_an_index_answers_as_reading_the_whole_file_does(path: Path) -> None:
    await write(path, 6)
    store = FilesystemStateStore(path)
    first = (await store.read("t2", "main"))[4]
    assert await store.create_branch(fork("t2", "b", first), [checkpoint(6, "t2", "b")])
    await store.prune("t3", keep_last=5)  # a start line in the file, and a new index
    await store.aclose()
    threads = [f"t{k}" for k in range(6)]
    FilesystemStateStore(path)  # reads the rewritten file and writes its index
    indexed = FilesystemStateStore(path)
    assert isinstance(indexed._log.records, persisted.LazyRecordIndex)
    assert await answers(indexed, threads) == await full_scan(path, threads)


async def test_what_was_appended_after_the_index_was_written_is_read_from_the_file(
    path: Path,
) -> None:
    await write(path, 4)
    os.replace(index_of(path), index_of(path).with_name("old.idx"))
    await write(path, 2, start=4)  # written and indexed by another store...
    os.replace(index_of(path).with_name("old.idx"), index_of(path))  # ...index lost: old one
    store = FilesystemStateStore(path)
    assert isinstance(store._log.records, persisted.LazyRecordIndex)
    assert seqs(await store.read("t5", "main")) == list(range(1, 31))
    threads = [f"t{k}" for k in range(6)]
    assert await answers(store, threads) == await full_scan(path, threads)


@pytest.mark.parametrize(
    "change",
    [
        "another file at the path",
        "file cut before the index's end",
        "a byte changed near the index's end",
        "index cut short",
        "index garbage",
    ],
)
async def test_an_index_that_does_not_match_the_file_is_never_used(path: Path, change: str) -> None:
    await write(path, 3)
    data, index = path.read_bytes(), index_of(path)
    if change == "another file at the path":
        os.replace(index, index.with_name("kept"))
        path.unlink()
        await write(path, 3, start=0)  # the same shape, other ids
        os.replace(index.with_name("kept"), index)
    elif change == "file cut before the index's end":
        with path.open("r+b") as f:
            f.truncate(len(data) - 100)
    elif change == "a byte changed near the index's end":
        at = len(data) - 40  # inside the last record's values
        path.write_bytes(data[:at] + bytes([data[at] ^ 1]) + data[at + 1 :])
    elif change == "index cut short":
        index.write_bytes(index.read_bytes()[:300])
    else:
        index.write_bytes(b"\x00garbage" * 100)
    if change == "a byte changed near the index's end":
        with pytest.raises(StateStoreError, match=r"line \d+ .*checksum"):
            FilesystemStateStore(path)  # read in full, the change is found, not missed
        return
    store = FilesystemStateStore(path)
    assert type(store._log.records) is not persisted.LazyRecordIndex
    assert seqs(await store.read("t0", "main")) == list(range(1, 31))
    if change == "file cut before the index's end":
        assert await store.read("t2", "main") == []  # its torn append was cut off


@pytest.mark.parametrize("where", ["part", "directory", "slot"])
async def test_a_damaged_part_of_the_index_fails_once_and_the_file_is_read_instead(
    path: Path, where: str
) -> None:
    await write(path, 3)
    index = index_of(path)
    data = bytearray(index.read_bytes())
    offset = lazy(FilesystemStateStore(path)).pending()["t1"][0]
    if where == "directory":
        offset = persisted.SLOT.unpack(data[-persisted.SLOT.size :])[0]
    elif where == "slot":
        offset = len(data) - 10
    data[offset + 5] ^= 1
    index.write_bytes(bytes(data))
    store = FilesystemStateStore(path)
    with pytest.raises(StateStoreError, match=r"index of .* is damaged: the (part|directory)"):
        await store.last_sequence("t1", "main")  # the lock-free path too
    assert not index.exists()
    assert await store.last_sequence("t1", "main") == 30
    assert seqs(await store.read("t1", "main")) == list(range(1, 31))


async def test_a_read_only_store_uses_an_index_but_never_writes_one(path: Path) -> None:
    await write(path, 3)
    reader = FilesystemStateStore(path, read_only=True)
    assert isinstance(reader._log.records, persisted.LazyRecordIndex)
    index_of(path).unlink()
    reader = FilesystemStateStore(path, read_only=True)
    assert seqs(await reader.read("t0", "main"))[-1] == 30
    await reader.aclose()
    assert not index_of(path).exists()


async def test_a_prune_removes_the_index_and_an_old_index_put_back_is_not_used(
    path: Path,
) -> None:
    await write(path, 3)
    old = index_of(path).read_bytes()
    store = FilesystemStateStore(path)
    await store.prune(keep_last=1)
    index_of(path).write_bytes(old)  # the index of the file before the rewrite
    reopened = FilesystemStateStore(path)
    assert type(reopened._log.records) is not persisted.LazyRecordIndex
    assert seqs(await reopened.read("t0", "main")) == list(range(21, 31))


@pytest.mark.slow  # tracemalloc slows every allocation down
async def test_memory_after_a_cold_open_does_not_grow_with_other_threads_history(
    tmp_path: Path,
) -> None:
    async def held(threads: int) -> int:
        path = tmp_path / f"{threads}.jsonl"
        await write(path, threads, last=60)
        gc.collect()
        tracemalloc.start()
        try:
            store = FilesystemStateStore(path)
            await store.read_tail("t1", "main")
            gc.collect()
            return tracemalloc.get_traced_memory()[0]
        finally:
            tracemalloc.stop()
            del store

    few, many = await held(5), await held(85)
    # Each more thread costs its directory entry, not its 60 records' index (~12 KB).
    assert (many - few) / 80 < 1_000, f"{(many - few) / 80:.0f} bytes per other thread"


@pytest.mark.slow
@needs_fork
def test_kill_9_while_appending_and_writing_indexes_never_leaves_a_wrong_index(
    tmp_path: Path,
) -> None:
    rng = random.Random(2626)
    path = tmp_path / "history.jsonl"
    run = runner("asyncio")
    for _ in range(10):
        read_end, write_end = os.pipe()

        def child() -> int:
            k = 0
            while True:  # each pass appends, then closes: the close writes the index
                store = FilesystemStateStore(path)
                thread = f"t{k % 5}"
                last = run(store.last_sequence(thread, "main"))
                first = checkpoint(last + 1, thread) if last % 10 == 0 else event(last + 1, thread)
                run(store.append(thread, "main", [first, event(last + 2, thread)], after=last))
                run(store.aclose())
                k += 1

        pid = in_child(child)
        kill_and_collect(pid, read_end, write_end, rng.uniform(0.01, 0.15))
        threads = [t.thread_id for t in run(FilesystemStateStore(path).list_threads()).threads]
        if index_of(path).exists():
            indexed = run(answers(FilesystemStateStore(path), threads))
            assert indexed == run(full_scan(path, threads))


async def test_list_threads_of_a_cold_store_comes_from_the_directory_alone(path: Path) -> None:
    await write(path, 30)
    store = FilesystemStateStore(path)
    page = await store.list_threads(limit=100)
    assert len(page.threads) == 30
    assert len(lazy(store).pending()) == 30  # no thread's part was read for it
    assert page.threads == (await full_scan(path, []))[0]


async def test_the_index_is_readable_by_whom_the_history_file_is(path: Path) -> None:
    path.touch(mode=0o600)
    os.chmod(path, 0o600)
    await write(path, 3)
    assert index_of(path).stat().st_mode & 0o777 == 0o600


operations = st.lists(
    st.tuples(st.sampled_from(["append", "fork", "prune", "delete", "reopen"]), st.integers(0, 3)),
    min_size=1,
    max_size=25,
)


@pytest.mark.slow
@settings(
    max_examples=25, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture]
)
@given(ops=operations)
async def test_any_history_reopened_from_its_index_answers_as_a_full_read(
    ops: list[tuple[str, int]], tmp_path: Path
) -> None:
    with tempfile.TemporaryDirectory(dir=tmp_path) as tmp:
        path = Path(tmp) / "history.jsonl"
        store = FilesystemStateStore(path)
        for op, k in ops:
            thread = f"t{k}"
            last = await store.last_sequence(thread, "main")
            if op == "append":
                batch = [
                    checkpoint(seq, thread) if seq % 5 == 1 else event(seq, thread)
                    for seq in range(last + 1, last + 7)
                ]
                await store.append(thread, "main", batch, after=last)
            elif op == "fork" and last:
                at = (await store.read(thread, "main"))[-1]
                await store.create_branch(
                    fork(thread, f"b{last}", at), [checkpoint(last + 1, thread, f"b{last}")]
                )
            elif op == "prune":
                await store.prune(thread, keep_last=2)
            elif op == "delete":
                await store.delete_thread(thread)
            else:
                await store.aclose()
                store = FilesystemStateStore(path)
        await store.aclose()
        threads = [t.thread_id for t in (await FilesystemStateStore(path).list_threads()).threads]
        if threads and index_of(path).exists():
            indexed = FilesystemStateStore(path)
            assert await answers(indexed, threads) == await full_scan(path, threads)


async def test_records_indexed_in_a_thread_not_loaded_yet_load_its_part_first(
    path: Path,
) -> None:
    # An append indexes its records as one batch (``add_events``), and ``add_event`` goes
    # through it: the thread's part of the index must be there before they are added.
    await write(path, 3)
    store = FilesystemStateStore(path)
    index = lazy(store)
    assert "t1" in index.pending()
    index.add_events([event(31, "t1")], [(0, 1)])
    index.add_event(event(32, "t1"), (1, 1))
    assert "t1" not in index.pending()
    assert index.last_sequence("t1", "main") == 32
    assert len(index.locations("t1", "main", 1, None)) == 32
    assert index.find_request("t1", "main", "key-1") == 4
