"""The file memory store's log: compaction, a torn tail, a damaged line, two openers."""

from __future__ import annotations

from pathlib import Path

import pytest

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
