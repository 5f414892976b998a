"""The file memory store's log: compaction, a torn tail, a damaged line, two openers."""

from __future__ import annotations

import tempfile
from pathlib import Path

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from nodestep import StateStoreError
from nodestep.memory import FilesystemMemoryStore
from nodestep.testing import FakeTime

NS = ("users", "u-1")


def test_rewriting_one_key_compacts_the_log_and_another_opener_follows(tmp_path: Path) -> None:
    path = tmp_path / "memory.jsonl"
    writer, reader = FilesystemMemoryStore(path), FilesystemMemoryStore(path)
    writer.put_sync(NS, "other", {"v": "kept"})
    assert reader.get_sync(NS, "other") is not None  # the reader's index is built now
    for i in range(2_500):
        writer.put_sync(NS, "k", {"i": i})
    assert len(path.read_bytes().splitlines()) < 1_001  # compacted, more than once
    item = reader.get_sync(NS, "k")
    assert item is not None and item.value == {"i": 2_499}
    assert reader.get_sync(NS, "other") is not None
    reader.put_sync(NS, "from-reader", {"v": 1})
    assert writer.get_sync(NS, "from-reader") is not None
    writer.close()
    reader.close()


def test_a_torn_tail_is_invisible_to_readers_and_cut_by_the_next_writer(tmp_path: Path) -> None:
    path = tmp_path / "memory.jsonl"
    store = FilesystemMemoryStore(path)
    store.put_sync(NS, "a", {"v": 1})
    with open(path, "ab") as log:  # what a writer killed in the middle of a line leaves
        log.write(b'{"op": "put", "ns": ["users", "u-1"], "key": "b", "val')
    reopened = FilesystemMemoryStore(path)
    assert [i.key for i in reopened.search_sync(NS)] == ["a"]
    reopened.put_sync(NS, "c", {"v": 3})
    assert path.read_bytes().count(b"\n") == 2 and path.read_bytes().endswith(b"\n")
    assert [i.key for i in FilesystemMemoryStore(path).search_sync(NS)] == ["a", "c"]
    assert [i.key for i in store.search_sync(NS)] == ["a", "c"]


def test_a_damaged_line_is_reported_with_the_file_line_and_byte_offset(tmp_path: Path) -> None:
    path = tmp_path / "memory.jsonl"
    store = FilesystemMemoryStore(path)
    store.put_sync(NS, "a", {"v": 1})
    first = path.stat().st_size
    with open(path, "ab") as log:
        log.write(b"not json\n")
    with pytest.raises(StateStoreError, match=r"line 2 at byte \d+ is no entry") as caught:
        FilesystemMemoryStore(path).get_sync(NS, "a")
    assert (caught.value.path, caught.value.line, caught.value.offset) == (str(path), 2, first)


def test_a_byte_changed_on_the_disk_is_found_by_its_line_s_checksum(tmp_path: Path) -> None:
    path = tmp_path / "memory.jsonl"
    store = FilesystemMemoryStore(path)
    store.put_sync(NS, "a", {"amount": 100})
    store.put_sync(NS, "b", {"amount": 200})
    data = path.read_bytes()
    second = data.index(b"\n") + 1
    path.write_bytes(data.replace(b'"amount":200', b'"amount":900'))
    with pytest.raises(StateStoreError, match=r"line 2 at byte \d+ is no entry.*checksum"):
        FilesystemMemoryStore(path).get_sync(NS, "a")
    with pytest.raises(StateStoreError) as caught:
        FilesystemMemoryStore(path).search_sync(NS)
    assert (caught.value.line, caught.value.offset) == (2, second)


def test_a_sweep_rewrites_the_log_without_the_expired_items(tmp_path: Path) -> None:
    path = tmp_path / "memory.jsonl"
    clock = FakeTime(1_000.0)
    store = FilesystemMemoryStore(path, clock=clock)
    for i in range(10):
        store.put_sync(NS, f"k{i}", {"i": i}, ttl=10 if i % 2 else None)
    clock.advance(20)
    assert store.sweep_sync() == 5
    assert len(path.read_bytes().splitlines()) == 5
    other = FilesystemMemoryStore(path, clock=clock)
    assert [i.key for i in other.search_sync(NS)] == ["k0", "k2", "k4", "k6", "k8"]


def test_a_write_cut_at_any_byte_leaves_the_old_items_and_the_next_write_repairs_it(
    tmp_path: Path,
) -> None:
    path = tmp_path / "memory.jsonl"
    store = FilesystemMemoryStore(path)
    store.put_sync(NS, "a", {"v": "old"})
    before = path.read_bytes()
    store.put_sync(NS, "a", {"v": "new", "pad": "é" * 20})  # multi-byte characters too
    line = path.read_bytes()[len(before) :]
    for cut in range(len(line)):  # a writer killed after `cut` bytes of its line
        path.write_bytes(before + line[:cut])
        reader = FilesystemMemoryStore(path)
        item = reader.get_sync(NS, "a")
        assert item is not None and item.value == {"v": "old"}, cut
        assert path.read_bytes() == before + line[:cut], "a reader changed the file"
        reader.put_sync(NS, "b", {"v": cut})
        assert path.read_bytes().startswith(before) and path.read_bytes().endswith(b"\n")
        assert [i.key for i in FilesystemMemoryStore(path).search_sync(NS)] == ["a", "b"]


@settings(max_examples=60, deadline=None)
@given(data=st.data())
def test_a_flipped_byte_reads_as_the_items_before_it_or_a_precise_error(data: st.DataObject):
    with tempfile.TemporaryDirectory() as folder:
        path = Path(folder) / "memory.jsonl"
        store = FilesystemMemoryStore(path, clock=FakeTime(1_000.0))  # the same bytes each run
        for i in range(4):
            store.put_sync(NS, f"k{i}", {"i": i, "text": "abc" * i})
        good = path.read_bytes()
        at = data.draw(st.integers(0, len(good) - 1))
        flipped = bytes([good[at] ^ data.draw(st.integers(1, 255))])
        path.write_bytes(good[:at] + flipped + good[at + 1 :])
        try:
            found = FilesystemMemoryStore(path).search_sync(NS)
        except StateStoreError as error:
            assert error.path == str(path) and error.line is not None
            assert error.offset is not None and error.offset <= at
            return
        # Read without an error: only when the flip cut the last line's newline, so the
        # last entry is a torn tail, unseen; the items before it are intact.
        assert at == len(good) - 1
        assert [i.value["i"] for i in found] == [0, 1, 2]


@pytest.mark.skipif(not Path("/proc/self/fd").is_dir(), reason="counts /proc/self/fd (Linux)")
def test_a_store_dropped_without_close_gives_back_its_descriptors(tmp_path: Path) -> None:
    # Leaked descriptors numbered past 1,024 break libraries that wait with select(),
    # psycopg's connection pool among them.
    before = len(list(Path("/proc/self/fd").iterdir()))
    for i in range(50):
        FilesystemMemoryStore(tmp_path / "memory.jsonl").put_sync(NS, "k", {"i": i})
    assert len(list(Path("/proc/self/fd").iterdir())) == before
