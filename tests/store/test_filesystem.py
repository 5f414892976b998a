"""FilesystemStateStore: its file format, damaged files, and sharing a file between stores."""

from __future__ import annotations

import gc
import os
import re
import threading
import time
import uuid
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import anyio
import anyio.to_thread
import orjson
import pytest

from nodestep._errors import StateStoreError, ThreadConflictError
from nodestep.store import FilesystemStateStore, Record, _codec
from nodestep.store._file import io as _io
from nodestep.testing import checkpoint, event, events, fork, seqs

# The async tests run once per back end; the sync ones test the constructor or pure code.
pytestmark = pytest.mark.anyio

Opener = Callable[..., FilesystemStateStore]


@pytest.fixture
def path(tmp_path: Path) -> Path:
    return tmp_path / "history.jsonl"


@pytest.fixture
def open_store(path: Path) -> Iterator[Opener]:
    """Open stores (on ``path`` unless told otherwise) and close them all at the end."""
    opened: list[FilesystemStateStore] = []

    def opener(where: Path | None = None, **kwargs: Any) -> FilesystemStateStore:
        store = FilesystemStateStore(where or path, **kwargs)
        opened.append(store)
        return store

    yield opener
    # A plain fixture, as the constructor's sync tests use it too: close on a loop of its own.
    for store in opened:
        anyio.run(store.aclose)


@pytest.fixture
def faults() -> Iterator[_io.FaultPlan]:
    plan = _io.faults = _io.FaultPlan()
    yield plan
    _io.faults = None


HEADER = b'{"type":"header","format":"nodestep-history","version":1,"created":1.5}\n'


def write_lines(path: Path, records: list[Record], header: bytes = HEADER) -> list[bytes]:
    """Write a history file by hand; return its lines."""
    lines = [header, *(orjson.dumps(r) + b"\n" for r in records)]
    path.write_bytes(b"".join(lines))
    return lines


# -- the header ---------------------------------------------------------------------------


def test_new_file_starts_with_a_header(open_store: Opener, path: Path) -> None:
    before = time.time()
    open_store()
    first, rest = path.read_bytes().split(b"\n", 1)
    header = orjson.loads(first)
    assert header.keys() == {"type", "format", "version", "created"}
    assert (header["type"], header["format"], header["version"]) == (
        "header",
        "nodestep-history",
        3,
    )
    assert before <= header["created"] <= time.time()
    assert rest == b""


def test_empty_file_gets_a_header(open_store: Opener, path: Path) -> None:
    path.touch()
    store = open_store()
    assert path.read_bytes().startswith(b'{"type":"header"')
    assert store.repaired_bytes == 0


async def test_missing_parent_directories_are_created(open_store: Opener, tmp_path: Path) -> None:
    where = tmp_path / "a" / "b" / "c" / "history.jsonl"
    store = open_store(where)
    await store.append("t1", "main", events(1, 1), after=0)
    assert where.is_file()
    assert store.path == where and store.path.is_absolute()


NOT_A_HEADER = "is not a nodestep history file: its first line is not a header"
NO_HEADER_LINE = "is not a nodestep history file: it has no header line"
NOT_A_RECORD = r"line 1 \(byte 0\) is not a valid record: expected one JSON object per line"


@pytest.mark.parametrize(
    ("content", "words"),
    [
        (b'{"a": 1}\n', NOT_A_HEADER),
        (orjson.dumps(event(1)) + b"\n", NOT_A_HEADER),
        (b"[1, 2]\n" + HEADER, NOT_A_RECORD + ", found a JSON list"),
        (b"not json at all\n", NOT_A_RECORD + ", found invalid JSON"),
        (b"hello world, no newline", NO_HEADER_LINE),
        (b"\0\0\0xyz", NO_HEADER_LINE),
    ],
    ids=["object", "event-first", "array", "text", "no-newline", "binary"],
)
def test_file_without_header_is_refused_and_left_alone(
    path: Path, content: bytes, words: str
) -> None:
    path.write_bytes(content)
    with pytest.raises(StateStoreError, match=words) as info:
        FilesystemStateStore(path)
    assert info.value.path == str(path)
    assert str(path) in str(info.value)
    assert path.read_bytes() == content


@pytest.mark.parametrize(
    ("header", "words"),
    [
        (b'{"type":"header","format":"other-format","version":1}\n', "'other-format'"),
        (b'{"type":"header","format":"nodestep-history","version":5}\n', "version 5"),
        (b'{"type":"header","format":"nodestep-history"}\n', "version None"),
    ],
)
def test_header_of_another_format_or_a_newer_version_is_refused(
    path: Path, header: bytes, words: str
) -> None:
    path.write_bytes(header)
    with pytest.raises(StateStoreError, match=words) as info:
        FilesystemStateStore(path)
    assert (info.value.line, info.value.offset) == (1, 0)
    assert path.read_bytes() == header


@pytest.mark.parametrize("cut", [1, 20, 67, 75])
async def test_header_cut_while_being_written_is_written_again(
    open_store: Opener, path: Path, cut: int
) -> None:
    open_store()
    torn = path.read_bytes()[:cut]
    path.write_bytes(torn)
    store = open_store()
    assert store.repaired_bytes == cut
    await store.append("t1", "main", events(1, 1), after=0)
    assert seqs(await open_store().read("t1", "main")) == [1]


# -- the main branch is implied ----------------------------------------------------------


def lines_of(path: Path) -> list[Record]:
    """Return the records of the file's lines as they are on disk."""
    return [orjson.loads(line) for line in path.read_bytes().splitlines()]


async def test_main_branch_event_lines_leave_out_the_branch(open_store: Opener, path: Path) -> None:
    store = open_store()
    await store.append("t1", "main", [event(1)], after=0)
    await store.append("t1", "main", [event(2), checkpoint(3)], after=1)
    on_disk = [r for r in lines_of(path) if r["type"] not in ("header", "batch")]
    assert seqs(on_disk) == [1, 2, 3]
    assert all("branch" not in r for r in on_disk)


async def test_forked_branch_lines_keep_their_branch(open_store: Opener, path: Path) -> None:
    store = open_store()
    main = events(1, 2)
    await store.append("t1", "main", main, after=0)
    branch = fork("t1", "alt", main[0])
    await store.create_branch(branch, [checkpoint(2, branch="alt")])
    await store.append("t1", "alt", [event(3, branch="alt")], after=2)
    by_type: dict[str, list[Record]] = {}
    for record in lines_of(path):
        by_type.setdefault(record["type"], []).append(record)
    assert [r["branch"] for r in by_type["branch"]] == ["alt"]
    assert [r.get("branch") for r in by_type["checkpoint"]] == ["alt"]
    assert [r.get("branch") for r in by_type["state_updated"]] == [None, None, "alt"]


async def test_main_branch_events_read_back_with_their_branch(
    open_store: Opener, path: Path
) -> None:
    store = open_store()
    records = [event(1), checkpoint(2)]
    await store.append("t1", "main", records, after=0)
    for reader in (store, open_store()):  # from this store's index and from a fresh one
        back = await reader.read("t1", "main")
        assert back == records
        assert [r["branch"] for r in back] == ["main", "main"]
        assert await reader.locate("t1", records[1]["id"]) == ("main", 2)
        assert await reader.last_checkpoint("t1", "main") == 2


async def test_event_lines_with_and_without_a_main_branch_both_read(
    open_store: Opener, path: Path
) -> None:
    # A line spelling out "branch": "main" (a hand-edited file, say) means the same thing.
    records = events(1, 2)
    write_lines(path, [records[0], {k: v for k, v in records[1].items() if k != "branch"}])
    assert await open_store().read("t1", "main") == records


def test_one_int_superstep_record_takes_under_200_bytes() -> None:
    # The engine's record of a superstep where one node set one int field, in its key
    # order, a thousand steps into a thread: the size a benchmark holds the file store to.
    record = {
        "type": "superstep_completed",
        "step": 999,
        "node": "loop",
        "update": {"n": 1000},
        "routes": ["loop"],
        "id": str(uuid.uuid4()),
        "seq": 1021,
        "ts": 1_796_001_501.0083431,
        "thread": "t1",
        "branch": "main",
    }
    assert len(_codec.encode_event(record)) < 200


# -- reopening ----------------------------------------------------------------------------


async def test_reopened_store_reads_everything_back(open_store: Opener, path: Path) -> None:
    store = open_store(fsync=True)
    main = [event(1), checkpoint(2), event(3, text="日本語 ✓")]
    await store.append("t1", "main", main[:1], after=0)
    await store.append("t1", "main", main[1:], after=1)
    other = [checkpoint(1, "t2")]
    await store.append("t2", "main", other, after=0)
    branch = fork("t1", "alt", main[1])
    alt = [checkpoint(3, branch="alt"), event(4, branch="alt")]
    assert await store.create_branch(branch, alt[:1])
    await store.append("t1", "alt", alt[1:], after=3)
    await store.aclose()

    again = open_store()
    assert again.repaired_bytes == 0
    assert await again.read("t1", "main") == main
    assert await again.read("t2", "main") == other
    assert await again.read("t1", "alt") == alt
    assert await again.list_branches("t1") == [branch]
    assert await again.last_checkpoint("t1", "main") == 2
    assert await again.last_checkpoint("t1", "alt") == 3
    assert await again.locate("t1", alt[1]["id"]) == ("alt", 4)
    assert await again.last_sequence("t1", "main") == 3


async def test_closed_store_refuses_to_work(open_store: Opener) -> None:
    store = open_store()
    await store.aclose()
    with pytest.raises(StateStoreError, match="closed"):
        await store.last_sequence("t1", "main")


# -- damaged records ----------------------------------------------------------------------


@pytest.mark.parametrize(
    ("bad", "words"),
    [
        (b"{not json}\n", "expected one JSON object per line, found invalid JSON"),
        (b'{"text": "\xff\xfe"}\n', "found invalid JSON .*UTF-8"),
        (b"[1, 2, 3]\n", "expected one JSON object per line, found a JSON list"),
        (b'{"id":"x","ts":1,"thread":"t1","branch":"main","type":"e"}\n', "'seq'"),
        (b'{"id":"x","seq":"2","ts":1,"thread":"t1","branch":"main","type":"e"}\n', "'2'"),
        (HEADER, "header record cannot be here"),
        (b'{"type":"branch","thread":"t1"}\n', "in a branch record, its 'branch' must be"),
        (b'{"type":"batch","lines":2,"bytes":100}\n', "announces 2 lines in 100 bytes"),
        (b'{"type":"batch","lines":0,"bytes":0}\n', "announces 0 lines"),
    ],
    ids=[
        "invalid-json",
        "not-utf8",
        "array",
        "missing-seq",
        "string-seq",
        "header",
        "branch",
        "batch-lying",
        "batch-empty",
    ],
)
def test_damaged_line_in_the_middle_names_file_line_and_offset(
    path: Path, bad: bytes, words: str
) -> None:
    lines = write_lines(path, events(1, 4))
    lines[3:4] = [bad]  # line 4, the event with seq 3
    path.write_bytes(b"".join(lines))
    offset = sum(map(len, lines[:3]))
    with pytest.raises(StateStoreError, match=words) as info:
        FilesystemStateStore(path)
    error = info.value
    assert (error.path, error.line, error.offset) == (str(path), 4, offset)
    assert f"line 4 (byte {offset})" in str(error)
    assert "restore it from a backup" in str(error)


@pytest.mark.parametrize(
    ("order", "found", "expected"), [([1, 2, 4], 4, 3), ([1, 2, 2], 2, 3), ([2], 2, 1)]
)
def test_sequence_gap_or_duplicate_is_reported_precisely(
    path: Path, order: list[int], found: int, expected: int
) -> None:
    records = [event(seq) for seq in order]
    lines = write_lines(path, records)
    words = f"has seq {found}, but the branch's next sequence number is {expected}"
    with pytest.raises(StateStoreError, match=words) as info:
        FilesystemStateStore(path)
    error = info.value
    assert (error.line, error.offset) == (len(lines), sum(map(len, lines[:-1])))
    assert f"has seq {found}, but the branch's next sequence number is {expected}" in str(error)
    assert records[-1]["id"] in str(error)


async def test_damaged_line_appended_later_fails_every_call(open_store: Opener, path: Path) -> None:
    store = open_store()
    await store.append("t1", "main", events(1, 1), after=0)
    await store.append("t1", "main", events(2, 2), after=1)
    offset = path.stat().st_size
    with path.open("ab") as f:
        f.write(b"garbage\n")
    words = re.escape(f"line 4 (byte {offset}) is not a valid record") + ".*found invalid JSON"
    for _ in range(2):
        with pytest.raises(StateStoreError, match=words) as info:
            await store.read("t1", "main")
        assert (info.value.line, info.value.offset) == (4, offset)


@pytest.mark.parametrize(
    ("change", "words"),
    [
        ({"thread": "t2"}, "belongs to thread 't2'"),
        ({"seq": 5}, "its seq is 5, but it must be 3"),
        ({"type": "branch"}, "reserved"),
        ({"id": None}, "'id' must be a string"),
        ({"values": {1, 2}}, "not JSON data"),
    ],
)
async def test_invalid_records_are_refused_and_nothing_is_written(
    open_store: Opener, path: Path, change: dict[str, Any], words: str
) -> None:
    store = open_store()
    await store.append("t1", "main", events(1, 1), after=0)
    size = path.stat().st_size
    with pytest.raises(StateStoreError, match=words):
        await store.append("t1", "main", [event(2), {**event(3), **change}], after=1)
    assert path.stat().st_size == size
    assert await store.last_sequence("t1", "main") == 1


# -- several stores on one file -----------------------------------------------------------


async def test_each_store_sees_what_the_other_appended(open_store: Opener) -> None:
    a, b = open_store(), open_store()
    first = events(1, 3)
    await a.append("t1", "main", first, after=0)
    assert await b.read("t1", "main") == first
    await b.append("t1", "main", events(4, 4), after=3)
    assert await a.last_sequence("t1", "main") == 4
    branch = fork("t1", "alt", first[0])
    assert await a.create_branch(branch, [checkpoint(2, branch="alt")])
    assert not await b.create_branch(branch, [checkpoint(2, branch="alt")])
    assert await b.list_branches("t1") == [branch]


async def test_catch_up_reads_only_the_bytes_appended_since(
    open_store: Opener, path: Path, faults: _io.FaultPlan
) -> None:
    writer, reader = open_store(), open_store()
    await writer.append("t1", "main", events(1, 200), after=0)
    assert await reader.last_sequence("t1", "main") == 200
    known = path.stat().st_size
    await writer.append("t1", "main", events(201, 203), after=200)
    faults.log.clear()
    assert await reader.last_sequence("t1", "main") == 203
    assert faults.reads() == [(known, path.stat().st_size - known)]

    faults.log.clear()
    assert seqs(await reader.read("t1", "main", start=100, stop=102)) == [100, 101, 102]
    [(offset, size)] = faults.reads()  # three adjacent lines, one read
    assert 0 < size < 3 * 400 and offset > known // 3


async def test_reads_skip_other_threads_lines(open_store: Opener, faults: _io.FaultPlan) -> None:
    store = open_store()
    for seq in range(1, 4):
        for thread in ("t1", "t2"):
            await store.append(thread, "main", [event(seq, thread)], after=seq - 1)
    faults.log.clear()
    assert seqs(await store.read("t1", "main")) == [1, 2, 3]
    assert len(faults.reads()) == 3  # the lines are apart: one read each, none in between


async def test_file_replaced_by_another_is_indexed_again(
    open_store: Opener, path: Path, tmp_path: Path
) -> None:
    store = open_store()
    await store.append("t1", "main", events(1, 3), after=0)
    other = tmp_path / "other.jsonl"
    replacement = events(1, 1, "t9")
    await open_store(other).append("t9", "main", replacement, after=0)
    os.replace(other, path)
    assert await store.read("t9", "main") == replacement
    assert await store.last_sequence("t1", "main") == 0
    await store.append("t9", "main", events(2, 2, "t9"), after=1)
    assert seqs(await open_store().read("t9", "main")) == [1, 2]


async def test_a_warm_last_sequence_is_one_fstat_without_lock_or_read(
    open_store: Opener, faults: _io.FaultPlan
) -> None:
    store = open_store()
    await store.append("t1", "main", events(1, 3), after=0)
    assert await store.last_sequence("t1", "main") == 3  # after its own write: the locked path
    faults.log.clear()
    assert await store.last_sequence("t1", "main") == 3
    assert await store.last_sequence("t2", "main") == 0
    assert [op for op, _, _ in faults.log] == ["fstat", "fstat"]


async def test_a_warm_last_sequence_sees_another_stores_append_at_once(open_store: Opener) -> None:
    reader, writer = open_store(), open_store()
    await writer.append("t1", "main", events(1, 2), after=0)
    for last in range(2, 40):
        assert await reader.last_sequence("t1", "main") == last
        assert await reader.last_sequence("t1", "main") == last  # the warm path, unchanged file
        await writer.append("t1", "main", events(last + 1, last + 1), after=last)


async def test_a_warm_last_sequence_follows_a_file_renamed_over_the_path(
    open_store: Opener, path: Path, tmp_path: Path
) -> None:
    store = open_store()
    await store.append("t1", "main", events(1, 3), after=0)
    assert await store.last_sequence("t1", "main") == 3  # warm: the next call may skip the lock
    other = tmp_path / "other.jsonl"
    await open_store(other).append("t1", "main", events(1, 5), after=0)
    os.replace(other, path)  # same size or not, the old file lost its link
    assert await store.last_sequence("t1", "main") == 5


async def test_a_warm_last_sequence_follows_a_replaced_file_that_has_another_link(
    open_store: Opener, path: Path, tmp_path: Path
) -> None:
    store = open_store()
    await store.append("t1", "main", events(1, 3), after=0)
    os.link(path, tmp_path / "backup.jsonl")  # the old file lives on under another name
    assert await store.last_sequence("t1", "main") == 3
    assert await store.last_sequence("t1", "main") == 3
    other = tmp_path / "other.jsonl"
    await open_store(other).append("t1", "main", events(1, 4), after=0)
    os.replace(other, path)
    assert await store.last_sequence("t1", "main") == 4


async def test_file_cut_by_another_program_is_indexed_again(open_store: Opener, path: Path) -> None:
    store = open_store()
    await store.append("t1", "main", events(1, 2), after=0)
    keep = path.stat().st_size
    await store.append("t1", "main", events(3, 5), after=2)
    os.truncate(path, keep)
    assert await store.last_sequence("t1", "main") == 2
    await store.append("t1", "main", events(3, 3), after=2)
    assert seqs(await open_store().read("t1", "main")) == [1, 2, 3]


@pytest.mark.parametrize("warm", [False, True])
async def test_deleted_file_is_reported(open_store: Opener, path: Path, warm: bool) -> None:
    store = open_store()
    if warm:  # the index covers the whole file: the next call may skip the lock
        await store.append("t1", "main", events(1, 1), after=0)
        assert await store.last_sequence("t1", "main") == 1
    path.unlink()
    with pytest.raises(StateStoreError, match="deleted or moved"):
        await store.last_sequence("t1", "main")


async def test_stores_of_one_file_in_several_threads_never_duplicate_a_sequence(
    open_store: Opener, anyio_backend_name: str
) -> None:
    # Each store has its own descriptor, so the file lock, not the thread lock, keeps
    # them apart.
    stores = [open_store() for _ in range(3)]

    async def writer(store: FilesystemStateStore, k: int) -> None:
        done = 0
        while done < 50:
            last = await store.last_sequence("t1", "main")
            try:
                await store.append("t1", "main", [event(last + 1, writer=k)], after=last)
                done += 1
            except ThreadConflictError:
                pass

    def start_and_join() -> None:
        # Real threads, each running a loop of this test's kind.
        threads = [
            threading.Thread(
                target=anyio.run, args=(writer, store, k), kwargs={"backend": anyio_backend_name}
            )
            for k, store in enumerate(stores)
        ]
        for t in threads:
            t.start()
        for t in threads:
            t.join()

    await anyio.to_thread.run_sync(start_and_join)
    assert seqs(await open_store().read("t1", "main")) == list(range(1, 151))


@pytest.mark.slow
@pytest.mark.skipif(not os.path.isdir("/proc/self/fd"), reason="counts descriptors in /proc")
def test_a_dropped_store_closes_its_descriptors(tmp_path: Path) -> None:
    path = tmp_path / "h.jsonl"
    gc.collect()
    before = len(os.listdir("/proc/self/fd"))
    for _ in range(20):
        FilesystemStateStore(path)
    gc.collect()
    assert len(os.listdir("/proc/self/fd")) == before
