"""``FilesystemMemoryStore``: memory items in one JSON-lines log, with an index in memory.

Each write appends one line to the log (``put``, ``del`` or ``touch`` of one key), in one
``write`` call on a descriptor opened for appending; each process keeps an index of the
live items, and before every call reads the lines other processes appended since its last
call (a ``stat`` says whether there are any). A put therefore costs one lock, one stat and
one append, as the file state store's append does, whatever the number of items.

Writers of all processes take the lock of ``<path>.lock`` (``flock``) around the catch-up
and the append, so a put that keeps an item's ``created_at`` sees the latest write of the
key. Readers take no lock: a line still being written has no newline yet, and is read
once it has one. A writer killed mid-line leaves a tail without a newline: invisible to
readers, and cut by the next writer before it appends (the file state store does the
same).

Each line is the CRC-32 of its entry, in eight hex digits and a space, then the entry's
JSON: a byte changed on the disk is found when the line is read, never taken as data.

The log is compacted (the live items written to a new file, renamed over the log) when
it holds more than twice as many lines as live items, and by ``sweep``: a process sees
the new file by its inode and reads it anew.
"""

from __future__ import annotations

import fcntl
import os
import threading
import weakref
import zlib
from collections.abc import Callable
from dataclasses import replace
from pathlib import Path
from typing import Any

import orjson

from nodestep._errors import StateStoreError
from nodestep._memory.contract import MemoryStore
from nodestep._memory.items import Row

__all__ = ["FilesystemMemoryStore"]

Key = tuple[tuple[str, ...], str]

_MIN_COMPACT = 1000  # lines: a small log is never worth rewriting


class FilesystemMemoryStore(MemoryStore):
    """Keep memory items in a JSON-lines file, shared by the processes of a machine.

    Args:
        path: The log file (e.g. ``memory.jsonl``); created, with its folder, if missing.
            Its lock is ``<path>.lock``, beside it.
        fsync: Flush each write to the disk before it returns, so it survives a power cut
            (a crash of the process never loses a write that returned, with or without).
        **options: ``MemoryStore``'s options (``ttl``, ``refresh_ttl``, ``embeddings``,
            ``index_fields``, ``clock``).

    Raises:
        StateStoreError: The file cannot be made or read, or holds a line that is not an
            item (the message names the file, the line and its byte offset).
    """

    def __init__(self, path: str | os.PathLike[str], *, fsync: bool = False, **options: Any):
        super().__init__(**options)
        self.path = Path(os.path.abspath(path))
        self.fsync = fsync
        self._lock = threading.Lock()
        self._h = _Handles()
        # A store dropped without close() gives its descriptors back when collected.
        weakref.finalize(self, self._h.close)
        self._inode = 0
        self._offset = 0  # the bytes of the log read into the index
        self._lines = 0  # the lines of the log read: what compaction compares
        self._index: dict[Key, Row] = {}
        with self._lock:
            self._open()

    def __repr__(self) -> str:
        return f"FilesystemMemoryStore({str(self.path)!r})"

    def _error(self, action: str, error: Exception, **where: Any) -> StateStoreError:
        return StateStoreError(
            f"Cannot {action} the memory store {self.path}: {error}. Check that the folder "
            f"exists and nodestep may read and write it.",
            path=str(self.path),
            **where,
        )

    # -- the log and the index, the store's thread lock held ------------------------------

    def _open(self) -> None:
        """Open the log (and, when closed, its lock file) anew, with an empty index."""
        if self._h.fd >= 0 and self._h.pid == os.getpid():
            os.close(self._h.fd)
        try:
            self.path.parent.mkdir(parents=True, exist_ok=True)
            self._h.fd = os.open(self.path, os.O_RDWR | os.O_APPEND | os.O_CREAT, 0o644)
            if self._h.lock < 0:
                self._h.lock = os.open(f"{self.path}.lock", os.O_RDWR | os.O_CREAT, 0o644)
            self._inode = os.fstat(self._h.fd).st_ino
        except OSError as e:
            raise self._error("open", e) from e
        self._h.pid = os.getpid()
        self._offset = self._lines = 0
        self._index = {}

    def _ready(self) -> None:
        """Open the log after a ``close`` or in a forked child, whose descriptors are not its own.

        A child must not lock through its parent's lock descriptor: an ``flock`` belongs to
        the open file, which the two would share, so neither would keep the other out.
        """
        if self._h.pid != os.getpid():
            self._h.fd = self._h.lock = -1
            self._open()

    def _catch_up(self, *, writing: bool) -> None:
        """Read the lines appended since the last call; a writer cuts a torn tail."""
        try:
            stat = os.stat(self.path)
        except FileNotFoundError:
            stat = None
        if stat is None or stat.st_ino != self._inode:  # compacted (or removed): anew
            self._open()
            stat = os.fstat(self._h.fd)
        if stat.st_size == self._offset:
            return
        data = os.pread(self._h.fd, stat.st_size - self._offset, self._offset)
        end = data.rfind(b"\n") + 1
        for line in data[:end].splitlines(keepends=True):
            self._apply(line)
        if writing and end < len(data):
            os.truncate(self.path, self._offset)  # a dead writer's torn line

    def _apply(self, line: bytes) -> None:
        """Apply one whole line of the log to the index."""
        self._lines += 1
        try:
            entry = _entry_of(line)
            key: Key = (tuple(entry["ns"]), entry["key"])
            op = entry["op"]
            if op == "put":
                self._index[key] = Row(
                    key[0], key[1], entry["value"], entry["created_at"], entry["updated_at"],
                    entry["ttl"], entry["expires_at"], entry["vectors"],
                )  # fmt: skip
            elif op == "del":
                self._index.pop(key, None)
            elif op == "touch" and key in self._index:
                self._index[key].expires_at = entry["expires_at"]
        except (ValueError, KeyError, TypeError) as e:
            # Not a permission problem (what _error advises): the bytes on the disk
            # changed, and only the file's owner can say which copy is right.
            raise StateStoreError(
                f"The memory store {self.path} is damaged: line {self._lines} at byte "
                f"{self._offset} is no entry ({e}). A line changed on the disk is never "
                f"taken as data: restore the file from a backup, or move it aside to start "
                f"an empty store.",
                path=str(self.path), line=self._lines, offset=self._offset,
            ) from e  # fmt: skip
        self._offset += len(line)

    def _write(self, make: Callable[[], dict[str, Any] | None]) -> bool:
        """Append the entry ``make`` returns, caught up and with the writers' lock held.

        ``make`` runs after the catch-up, so it sees every other process's writes; it
        returns ``None`` to write nothing. Returns whether an entry was written.
        """
        with self._lock:
            self._ready()
            fcntl.flock(self._h.lock, fcntl.LOCK_EX)
            try:
                self._catch_up(writing=True)
                entry = make()
                if entry is None:
                    return False
                line = _line_of(entry)
                try:
                    os.write(self._h.fd, line)
                    if self.fsync:
                        os.fsync(self._h.fd)
                except OSError as e:
                    raise self._error("write to", e) from e
                self._apply(line)  # parsed back: the index holds no caller's object
                if self._lines > max(_MIN_COMPACT, 2 * len(self._index)):
                    self._compact(None)
                return True
            finally:
                fcntl.flock(self._h.lock, fcntl.LOCK_UN)

    def _compact(self, now: float | None) -> int:
        """Rewrite the log with its items (live at ``now``); return how many were dropped."""
        rows = [r for r in self._index.values() if now is None or r.live(now)]
        temp = self.path.with_name(f".{self.path.name}.{os.getpid()}.compact")
        try:
            with open(temp, "wb") as out:
                for row in rows:
                    out.write(_line_of(_put_entry(row)))
                out.flush()
                os.fsync(out.fileno())  # the rename must never publish a file not yet whole
            os.replace(temp, self.path)
        except OSError as e:
            raise self._error("compact", e) from e
        dropped = len(self._index) - len(rows)
        self._open()
        self._catch_up(writing=True)
        return dropped

    # -- the row operations ---------------------------------------------------------------

    def _read(self, namespace: tuple[str, ...], key: str) -> Row | None:
        with self._lock:
            self._ready()
            self._catch_up(writing=False)
            row = self._index.get((namespace, key))
            return None if row is None else _copy(row)

    def _upsert(self, row: Row) -> None:
        def entry() -> dict[str, Any]:
            old = self._index.get((row.namespace, row.key))
            if old is not None and old.live(row.updated_at):
                row.created_at = old.created_at
            return _put_entry(row)

        self._write(entry)

    def _remove(self, namespace: tuple[str, ...], key: str) -> bool:
        def entry() -> dict[str, Any] | None:
            if (namespace, key) not in self._index:
                return None
            return {"op": "del", "ns": list(namespace), "key": key}

        return self._write(entry)

    def _rows(self, prefix: tuple[str, ...]) -> list[Row]:
        n = len(prefix)
        with self._lock:
            self._ready()
            self._catch_up(writing=False)
            return [_copy(r) for (ns, _), r in self._index.items() if ns[:n] == prefix]

    def _touch(self, namespace: tuple[str, ...], key: str, expires_at: float) -> None:
        def entry() -> dict[str, Any] | None:
            if (namespace, key) not in self._index:
                return None
            return {"op": "touch", "ns": list(namespace), "key": key, "expires_at": expires_at}

        self._write(entry)

    def _sweep(self, now: float) -> int:
        with self._lock:
            self._ready()
            fcntl.flock(self._h.lock, fcntl.LOCK_EX)
            try:
                self._catch_up(writing=True)
                if all(r.live(now) for r in self._index.values()):
                    return 0
                return self._compact(now)
            finally:
                fcntl.flock(self._h.lock, fcntl.LOCK_UN)

    def _close(self) -> None:
        with self._lock:
            self._h.close()  # the next call opens the log anew


class _Handles:
    """The log's and the lock's descriptors, and the process that opened them."""

    def __init__(self) -> None:
        self.fd = self.lock = -1
        self.pid = 0

    def close(self) -> None:
        """Close both descriptors, if this process opened them."""
        if self.pid == os.getpid():
            for fd in (self.fd, self.lock):
                if fd >= 0:
                    os.close(fd)
        self.fd = self.lock = -1
        self.pid = 0


def _line_of(entry: dict[str, Any]) -> bytes:
    """Return the log line of ``entry``: its checksum, a space, its JSON, a newline."""
    data = orjson.dumps(entry)
    return b"%08x %s\n" % (zlib.crc32(data), data)


def _entry_of(line: bytes) -> Any:
    """Return the entry of a whole log line.

    Raises:
        ValueError: The line is not a checksum and JSON, or they do not match.
    """
    data = line[9:].rstrip(b"\n")
    if line[8:9] != b" " or line[:8] != b"%08x" % zlib.crc32(data):
        raise ValueError(f"its checksum does not match its bytes {line[:40]!r}...")
    return orjson.loads(data)


def _put_entry(row: Row) -> dict[str, Any]:
    return {
        "op": "put", "ns": list(row.namespace), "key": row.key, "value": row.value,
        "created_at": row.created_at, "updated_at": row.updated_at, "ttl": row.ttl,
        "expires_at": row.expires_at, "vectors": row.vectors,
    }  # fmt: skip


def _copy(row: Row) -> Row:
    return replace(row, value=orjson.loads(orjson.dumps(row.value)))
