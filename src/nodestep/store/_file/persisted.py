"""The file store's persisted index, ``<path>.idx``: a cold open reads one thread, not the file.

Without it, a store opening a history file reads, checks and indexes every line (3 µs a
line: a third of a second for 100,000 records) and keeps all of it in memory. The index
file keeps what that reading finds, per thread, so that a new store reads a small header
and a directory of threads, and a thread's part (where its records are, its checkpoints,
event ids and request keys) only when it is first asked about: a cold ``get_state`` reads
that thread's part and its records, and the memory a store holds does not grow with the
other threads' history.

The history file stays the truth; the index is a cache of it, never trusted over it:

* It covers a prefix of the file (``covers`` bytes, whole appends), and names the file by
  device and inode and by the CRC-32 of its first and last 4 KiB before ``covers``. A file
  replaced (a prune's rewrite, a restore), cut, or changed there does not match, and the
  store reads the file as if there were no index. What was appended after ``covers``, by
  any process, is read and indexed from the file as usual.
* The directory and every thread's part carry a CRC-32; a part that fails it (a damaged
  disk) raises ``StateStoreError`` once, the index file is removed, and the next call reads
  the history file again.
* Lines indexed from it are checked against their own checksums when read (another
  process checked them when it indexed them, not this one).
* It is written whole to a temporary file and renamed over ``<path>.idx``, so a crash
  leaves the old index or the new one. It is never written while a record is: appends
  never wait for it. It is not flushed to the disk: after a power cut a garbled index
  fails its checks and is rebuilt, at the cost of one full read.

A store writes it after reading at least ``SAVE_AFTER`` bytes of the file that the index did
not cover (on its first open of a long file, say), and when it closes after appending that
much. Layout: a 512-byte header line (JSON, padded), the threads' parts (JSON each), the
directory in buckets (JSON each: thread -> [offset, size, crc, created, updated, status,
last seq]), and a table of fixed-size slots, one per bucket (``SLOT``).
"""

from __future__ import annotations

import logging
import os
import secrets
import struct
import weakref
import zlib
from collections import defaultdict
from collections.abc import Callable, Sequence
from contextlib import suppress
from pathlib import Path
from typing import Any, NamedTuple

import orjson

from nodestep._errors import StateStoreError
from nodestep.store._contract import BranchRecord, Record
from nodestep.store._file import io
from nodestep.store._index import BranchIndex, RecordIndex, ThreadStats
from nodestep.store._threads import ThreadInfo

__all__ = [
    "FORMAT",
    "HEAD",
    "SAVE_AFTER",
    "SLOT",
    "VERSION",
    "Covered",
    "LazyRecordIndex",
    "bucket_of",
    "load",
    "prints",
    "save",
    "sidecar",
]

logger = logging.getLogger("nodestep.store.filesystem")

SAVE_AFTER = 1 << 20
"""Bytes of history read past the index (or appended) before a store writes a new index."""
FORMAT = "nodestep-index"
VERSION = 3
"""The index's own format. 2: an event id is looked up per thread; a version 1 index kept
one place per id for the whole file, so a thread whose event id a later thread repeated
lacks it there. 3: every copy of an id a thread holds twice is kept (the id names the
first, ``_index.first_copy``); a version 2 index kept the last one written. An index of an
older version is not used (the store reads the file instead)."""
HEAD = 512  # the header line's fixed size: it is written last, over its placeholder
_PRINT = 4096  # bytes of the history file at each end of the covered part its CRCs cover
SLOT = struct.Struct("<QIII")  # a directory bucket's offset, size, CRC, and the slot's CRC


class Covered(NamedTuple):
    """What an index covers of its history file: ``IndexedLog``'s state at ``end``."""

    end: int
    lines: int
    version: int
    checked_from: int | None


def sidecar(path: Path) -> Path:
    """Return the index file of the history file ``path``."""
    return path.with_name(path.name + ".idx")


def prints(fd: int, covers: int) -> list[int]:
    """The CRC-32s of the history file's first and last ``_PRINT`` bytes before ``covers``."""
    first = io.pread(fd, min(_PRINT, covers), 0)
    last = io.pread(fd, min(_PRINT, covers), max(0, covers - _PRINT))
    return [zlib.crc32(first), zlib.crc32(last)]


def load(path: Path, fd: int, st: os.stat_result) -> tuple[LazyRecordIndex, Covered] | None:
    """Open the index of the history file ``fd`` (status ``st``), if it matches the file.

    Returns:
        The index, lazily loading each thread, and what it covers; ``None`` when there is
        no index, or it does not match the file (it is then ignored: the file is read).
    """
    try:
        side = os.open(sidecar(path), os.O_RDONLY | getattr(os, "O_BINARY", 0))
    except OSError:
        return None
    try:
        head = orjson.loads(io.pread(side, HEAD, 0))
        covers = head["covers"]
        if (
            head.get("format") != FORMAT
            or head.get("version") != VERSION
            or [head["dev"], head["ino"]] != [st.st_dev, st.st_ino]
            or not 0 < covers <= st.st_size
            or head["prints"] != prints(fd, covers)
        ):
            raise ValueError("the index is of another file, or of this one before a change")
        table, buckets = head["dir"]
        if type(table) is not int or type(buckets) is not int or buckets < 1:
            raise ValueError("the index's header has no directory")
        if io.fstat(side).st_size != table + buckets * SLOT.size:
            raise ValueError("the index is not as long as its header says: cut, or grown")
    except (OSError, ValueError, KeyError, TypeError) as e:  # JSONDecodeError is a ValueError
        logger.debug("%s: not using the index %s: %s", path, sidecar(path), e)
        os.close(side)
        return None
    covered = Covered(covers, head["lines"], head["data_version"], head["checked_from"])
    return LazyRecordIndex(side, path, table, buckets), covered


class LazyRecordIndex(RecordIndex):
    """A ``RecordIndex`` that loads each thread's part from the index file when first needed.

    Attributes:
        damaged: A thread's part failed its checksum: the store must read the file again.
    """

    def __init__(self, fd: int, path: Path, table: int, buckets: int) -> None:
        super().__init__()
        self.path = path
        self.damaged = False
        self.on_damage: Callable[[], None] = lambda: None
        self._fd = fd
        self._table, self._buckets = table, buckets
        self._read: set[int] = set()  # the directory buckets read so far
        self._pending: dict[str, list[Any]] = {}  # their threads not loaded yet
        self._closer = weakref.finalize(self, _close, fd)

    def close(self) -> None:
        """Close the index file; threads not loaded yet cannot be loaded afterwards."""
        self._closer()

    def _need(self, thread: object) -> None:
        if type(thread) is not str or thread in self.threads:
            return  # loaded (or new since the index: the index has no part of it)
        bucket = bucket_of(thread, self._buckets)
        if bucket not in self._read:
            self._read_bucket(bucket)
        if thread in self._pending:
            self._load(thread)

    def _read_bucket(self, bucket: int) -> None:
        """Read the directory entries of one bucket of threads.

        Raises:
            StateStoreError: The bucket fails its checksum (the store then reads the file).
        """
        try:
            slot = io.pread(self._fd, SLOT.size, self._table + bucket * SLOT.size)
            offset, size, crc, check = SLOT.unpack(slot)
            if zlib.crc32(slot[:-4]) != check:
                raise ValueError("its place fails its checksum")
            data = io.pread(self._fd, size, offset)
            if len(data) != size or zlib.crc32(data) != crc:
                raise ValueError("it fails its checksum")
            entries = orjson.loads(data)
        except (OSError, ValueError, struct.error) as e:
            raise self._damaged(f"the directory bucket {bucket} ({e})") from None
        self._read.add(bucket)
        for thread, entry in entries.items():
            if thread not in self.threads:
                self._pending[thread] = entry

    def _read_all(self) -> None:
        for bucket in range(self._buckets):
            if bucket not in self._read:
                self._read_bucket(bucket)

    def _damaged(self, what: str) -> StateStoreError:
        self.damaged = True
        self.on_damage()
        with suppress(OSError):
            os.unlink(sidecar(self.path))
        return StateStoreError(
            f"{sidecar(self.path)}, the index of {self.path}, is damaged: {what}. It was "
            f"removed; nothing was read or written. Try again: the next call reads the "
            f"history file itself.",
            path=str(self.path),
        )

    def section(self, thread: str) -> bytes:
        """Return the stored part of a thread not loaded yet, checked against its CRC.

        Raises:
            StateStoreError: The part fails its checksum (the store then reads the file).
        """
        offset, size, crc = self._pending[thread][:3]
        try:
            data = io.pread(self._fd, size, offset)
        except OSError:
            data = b""
        if len(data) != size or zlib.crc32(data) != crc:
            raise self._damaged(f"the part of thread {thread!r} fails its checksum")
        return data

    def _load(self, thread: str) -> None:
        try:
            self._apply(thread, orjson.loads(self.section(thread)))
        except (KeyError, ValueError, TypeError) as e:  # a part this nodestep did not write
            raise self._damaged(f"the part of thread {thread!r} is malformed ({e!r})") from None
        del self._pending[thread]

    def _apply(self, thread: str, part: dict[str, Any]) -> None:
        for branch, first, offsets, sizes, checkpoints, stamps in part["b"]:
            self.branches[(thread, branch)] = BranchIndex(
                first, list(zip(offsets, sizes, strict=True)), checkpoints, stamps
            )
        ids = self.ids
        for event_id, branch, seq in part["i"]:
            where = (branch, seq)
            if ids.setdefault((thread, event_id), where) is not where:
                self.add_repeat(thread, event_id, where)
        for branch, key, seq in part["r"]:
            self.requests[(thread, branch, key)] = seq
        if part["f"]:
            self.forks[thread] = [BranchRecord.from_json(f) for f in part["f"]]
        self.threads[thread] = ThreadStats(part["u"], part["s"], part["k"])

    def load_all(self) -> None:
        """Load every thread not loaded yet."""
        self._read_all()
        for thread in list(self._pending):
            self._load(thread)

    def pending(self) -> dict[str, list[Any]]:
        """Return the directory entries of the threads not loaded yet, every bucket read."""
        self._read_all()
        return self._pending

    # -- RecordIndex, each thread loaded first ----------------------------------------------

    def last_sequence(self, thread_id: str, branch_id: str) -> int:
        self._need(thread_id)
        return super().last_sequence(thread_id, branch_id)

    def add_stored(self, record: Record, location: Any) -> str | None:
        self._need(record.get("thread"))
        return super().add_stored(record, location)

    def add_events(self, records: Sequence[Record], locations: Sequence[Any]) -> None:
        # add_event's too: it indexes its record through add_events.
        if records:
            self._need(records[0]["thread"])
        super().add_events(records, locations)

    def add_branch(self, branch: BranchRecord) -> None:
        self._need(branch.thread_id)
        super().add_branch(branch)

    def has_branch(self, thread_id: str, branch_id: str) -> bool:
        self._need(thread_id)
        return super().has_branch(thread_id, branch_id)

    def has_thread(self, thread_id: str) -> bool:
        self._need(thread_id)
        return super().has_thread(thread_id)

    def locations(self, thread_id: str, branch_id: str, start: int, stop: int | None) -> list[Any]:
        self._need(thread_id)
        return super().locations(thread_id, branch_id, start, stop)

    def last_checkpoint(
        self, thread_id: str, branch_id: str, at_or_before: int | None
    ) -> int | None:
        self._need(thread_id)
        return super().last_checkpoint(thread_id, branch_id, at_or_before)

    def locate(self, thread_id: str, event_id: str) -> tuple[str, int] | None:
        self._need(thread_id)
        return super().locate(thread_id, event_id)

    def find_request(self, thread_id: str, branch_id: str, key: str) -> int | None:
        self._need(thread_id)
        return super().find_request(thread_id, branch_id, key)

    def list_branches(self, thread_id: str) -> list[BranchRecord]:
        self._need(thread_id)
        return super().list_branches(thread_id)

    def thread_infos(self) -> list[ThreadInfo]:
        self._read_all()
        stored = [
            ThreadInfo(thread, entry[5], entry[3], entry[4], entry[6])
            for thread, entry in self._pending.items()
        ]
        return super().thread_infos() + stored

    def drop_thread(self, thread_id: str) -> bool:
        self._need(thread_id)
        return super().drop_thread(thread_id)

    def prune_cuts(
        self, thread_id: str | None, keep_last: int | None, older_than: float | None
    ) -> dict[tuple[str, str], int]:
        if thread_id is None:
            self.load_all()
        self._need(thread_id)
        return super().prune_cuts(thread_id, keep_last, older_than)


def _close(fd: int) -> None:
    with suppress(OSError):  # closed already
        os.close(fd)


def bucket_of(thread: str, buckets: int) -> int:
    """Return the directory bucket of ``thread``: the same in every process and version."""
    return zlib.crc32(thread.encode("utf-8", "surrogatepass")) % buckets


# -- writing the index ----------------------------------------------------------------------


def _parts(index: RecordIndex) -> dict[str, dict[str, Any]]:
    """Group the loaded part of ``index`` by thread, in the stored form of a thread's part."""
    parts: dict[str, dict[str, Any]] = defaultdict(
        lambda: {"b": [], "i": [], "r": [], "f": [], "u": 0.0, "s": None, "k": []}
    )
    for (thread, branch), b in index.branches.items():
        offsets = [offset for offset, _ in b.locations]
        sizes = [size for _, size in b.locations]
        parts[thread]["b"].append(
            [branch, b.first_seq, offsets, sizes, b.checkpoints, b.checkpoint_ts]
        )
    for (thread, event_id), (branch, seq) in index.ids.items():
        parts[thread]["i"].append([event_id, branch, seq])
    for (thread, event_id), others in index.repeats.items():
        parts[thread]["i"] += [[event_id, branch, seq] for branch, seq in others]
    for (thread, branch, key), seq in index.requests.items():
        parts[thread]["r"].append([branch, key, seq])
    for thread, forks in index.forks.items():
        parts[thread]["f"] = [fork.to_json() for fork in forks]
    for thread, stats in index.threads.items():
        parts[thread].update(u=stats.updated, s=stats.status, k=stats.forked)
    return parts


def save(path: Path, fd: int, index: RecordIndex, covered: Covered) -> None:
    """Write the index of the history file ``fd`` up to ``covered.end``; never raises.

    The caller holds a file lock, so the covered part is whole. A failure to write the
    index is logged and otherwise ignored: the index only saves time.
    """
    tmp = sidecar(path).with_name(f"{sidecar(path).name}.{secrets.token_hex(4)}.tmp")
    try:
        st = io.fstat(fd)
        now = io.stat(path)
        if (now.st_dev, now.st_ino) != (st.st_dev, st.st_ino):
            return  # another file is at the path now (a prune's rewrite): not this index's
        head = {
            "format": FORMAT,
            "version": VERSION,
            "covers": covered.end,
            "lines": covered.lines,
            "data_version": covered.version,
            "checked_from": covered.checked_from,
            "dev": st.st_dev,
            "ino": st.st_ino,
            "prints": prints(fd, covered.end),
        }
        # The index names threads and events: readable by whom the history file is.
        flags = os.O_WRONLY | os.O_CREAT | os.O_EXCL | getattr(os, "O_BINARY", 0)
        out = os.open(tmp, flags, st.st_mode & 0o666)
        try:
            head["dir"] = _write_parts(out, index)
            line = orjson.dumps(head)
            if len(line) >= HEAD:
                raise ValueError(f"the index header takes {len(line)} bytes")
            io.pwrite(out, line.ljust(HEAD - 1) + b"\n", 0)
        finally:
            os.close(out)
        os.replace(tmp, sidecar(path))
    except (OSError, ValueError, StateStoreError) as e:
        logger.info("%s: could not write its index %s: %s", path, sidecar(path), e)
        with suppress(OSError):
            os.unlink(tmp)


def _write_parts(out: int, index: RecordIndex) -> list[int]:
    """Write every thread's part, then the directory; return ``[table offset, buckets]``.

    The directory is in buckets (a thread's is ``bucket_of``), about 16 threads each, and a
    table of fixed-size slots says where each bucket is: a lookup reads one slot and one
    bucket, whatever the number of threads.
    """
    infos = {info.thread_id: info for info in index.thread_infos()}
    parts = _parts(index)
    lazy = index if isinstance(index, LazyRecordIndex) else None
    pending = lazy.pending() if lazy is not None else {}
    count = max(1, len(infos) // 16)
    buckets: list[dict[str, list[Any]]] = [{} for _ in range(count)]
    pos, chunk = HEAD, []
    for thread, info in infos.items():
        # A thread not loaded yet: its part as the old index file holds it, checked.
        if lazy is not None and thread in pending:
            blob = lazy.section(thread)
        else:
            blob = orjson.dumps(parts[thread])
        entry = [pos, len(blob), zlib.crc32(blob), info.created_at, info.updated_at]
        buckets[bucket_of(thread, count)][thread] = [*entry, info.status, info.last_sequence]
        chunk.append(blob)
        pos += len(blob)
    blobs = [orjson.dumps(bucket) for bucket in buckets]
    slots = []
    for blob in blobs:
        chunk.append(blob)
        head = SLOT.pack(pos, len(blob), zlib.crc32(blob), 0)[:-4]
        slots.append(head + zlib.crc32(head).to_bytes(4, "little"))
        pos += len(blob)
    chunk.append(b"".join(slots))
    data = b"".join(chunk)
    io.pwrite(out, data, HEAD)
    return [pos, count]
