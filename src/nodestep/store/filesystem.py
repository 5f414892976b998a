"""``FilesystemStateStore``: every thread's history in one JSON Lines file.

The file is a header line and then one JSON object per line, appended and never changed:

* ``{"type":"header","format":"nodestep-history","version":1,"created":...}`` first;
* event records, as the engine builds them (see ``nodestep.store.base``);
* branch records, ``BranchRecord.to_json()``;
* ``{"type":"batch","lines":n,"bytes":b}`` before the *n* lines (*b* bytes) written by one
  append of several lines. A crash can leave any prefix of a write on disk; the batch line
  lets the next writer tell a whole append from part of one, so an append is all-or-nothing
  even across ``kill -9`` or a power cut.
"""

from __future__ import annotations

import logging
import os
import threading
import time
from collections.abc import Iterator, Sequence
from contextlib import contextmanager, suppress
from pathlib import Path
from typing import Any, NoReturn

import orjson

from nodestep.errors import StateStoreError, ThreadConflictError
from nodestep.store import _io
from nodestep.store.base import BranchRecord, Record, StateStore
from nodestep.store.index import RecordIndex

__all__ = ["FilesystemStateStore"]

FORMAT = "nodestep-history"
VERSION = 1
# The header's bytes up to its timestamp: a file holding only a prefix of this (or this
# and part of the timestamp) was cut while its header was written, and is still ours.
_HEADER_START = orjson.dumps({"type": "header", "format": FORMAT, "version": VERSION})[:-1]
_HEADER_START += b',"created":'
_CHUNK = 1 << 22  # catch-up reads at most 4 MiB at a time, whatever the file's length
_NL = orjson.OPT_APPEND_NEWLINE
_Keys = tuple[tuple[str, type | tuple[type, ...], str], ...]
_EVENT_KEYS: _Keys = (
    ("id", str, "a string"),
    ("seq", int, "an integer"),
    ("ts", (int, float), "a number"),
    ("thread", str, "a string"),
    ("branch", str, "a string"),
    ("type", str, "a string"),
)
_BRANCH_KEYS: _Keys = (
    ("thread", str, "a string"),
    ("branch", str, "a string"),
    ("parent", str, "a string"),
    ("from_event", str, "a string"),
    ("from_seq", int, "an integer"),
    ("ts", (int, float), "a number"),
)
_NOT_EVENTS = frozenset({"header", "branch", "batch"})
_DAMAGED = (
    "The file is damaged there: restore it from a backup, or cut the file before that line "
    "(at byte {offset}) to keep the history up to it."
)

logger = logging.getLogger(__name__)

# Guards the reopen after a fork. A lock another thread held at fork time stays held in the
# child forever, hence a new one in every child.
_fork_lock = threading.Lock()


def _new_fork_lock() -> None:
    global _fork_lock
    _fork_lock = threading.Lock()


if hasattr(os, "register_at_fork"):
    os.register_at_fork(after_in_child=_new_fork_lock)


class FilesystemStateStore(StateStore):
    """Keep every thread's history in one JSON Lines file that several processes can share.

    Each record is one line of JSON (serialized with orjson) appended to ``path``; the first
    line is a header, and a file without one is refused. Missing parent directories are
    created.

    Durability: with ``fsync=False`` every record is handed to the operating system before
    ``append`` returns, so it survives the process being killed, but not a power loss. With
    ``fsync=True`` it is also flushed to the disk, which survives power loss and costs a
    disk flush per append (0.1 to 1 ms on SSDs, more on disks). A write cut short by either
    (the last line broken, or part of a several-record append) is cut off when the file is
    next written, and the size cut is added to ``repaired_bytes``. A whole line that is not
    a valid record is never skipped: it raises ``StateStoreError`` naming the file, the line
    and its byte offset.

    Locking and concurrency: each operation locks the file (``fcntl.flock`` on the file on
    Linux and macOS; ``msvcrt`` on ``<path>.lock`` on Windows), shared to read and exclusive
    to write, and never holds the lock across an ``await``; a thread lock lets threads share
    one store. Writers are optimistic: ``append(after=n)`` raises ``ThreadConflictError``,
    storing nothing, when another writer has appended to that branch since. A process
    forked from one holding the store reopens the file on its first call.

    The index: the store keeps in memory where each branch's records are (byte offsets by
    sequence number), its checkpoints and its event ids. Each operation reads only the bytes
    other processes appended since the last one, so its cost does not grow with the history.
    Writes are done inline in the async methods, not in a worker thread: an append costs a
    few microseconds, and a hop to a thread about 70.

    Args:
        path: The history file; created, with its header, when missing or empty.
        fsync: Flush every append to the disk before returning.

    Attributes:
        path: The history file, as an absolute path.
        fsync: Whether appends are flushed to the disk.
        repaired_bytes: Bytes of unfinished writes this store cut off the file's end;
            0 normally.

    Raises:
        StateStoreError: The file cannot be opened, is not a nodestep history, or holds a
            damaged record.
    """

    def __init__(self, path: str | os.PathLike[str], *, fsync: bool = False) -> None:
        self.path = Path(os.path.abspath(path))
        self.fsync = fsync
        self.repaired_bytes = 0
        self._lock = threading.Lock()
        self._fd = -1
        self._lock_fd = -1
        try:
            self.path.parent.mkdir(parents=True, exist_ok=True)
        except OSError as e:
            raise self._os_error("create the directory of", e) from e
        self._open()
        try:
            # Index under a shared lock, so other processes' readers go on meanwhile; take
            # the exclusive lock only when there is a header to write or a tail to cut.
            with self._locked(exclusive=False):
                clean = self._end > 0 and self._size == self._end
            if not clean:
                with self._locked(exclusive=True):
                    pass
        except BaseException:
            self._close_fds()
            raise

    def __repr__(self) -> str:
        return f"FilesystemStateStore({str(self.path)!r})"

    # -- the StateStore methods ---------------------------------------------------------

    async def append(
        self, thread_id: str, branch_id: str, records: Sequence[Record], *, after: int
    ) -> None:
        """Append ``records`` to a branch, atomically, if its last sequence is still ``after``.

        Raises:
            ThreadConflictError: The branch's last sequence is not ``after``; nothing stored.
            StateStoreError: A record is not a valid event of this branch, or the file cannot
                be written; nothing stored.
        """
        lines = self._encode(thread_id, branch_id, records, after + 1)
        with self._locked(exclusive=True):
            found = self._index.last_sequence(thread_id, branch_id)
            if found != after:
                raise ThreadConflictError(thread_id, branch_id, after, found)
            if lines:
                self._write(lines, records)

    async def read(
        self, thread_id: str, branch_id: str, *, start: int = 1, stop: int | None = None
    ) -> list[Record]:
        """Return the branch's records with ``start <= seq <= stop`` (``None``: to the end)."""
        with self._locked(exclusive=False):
            blobs = self._read_lines(self._index.locations(thread_id, branch_id, start, stop))
        return [orjson.loads(blob) for blob in blobs]

    async def last_sequence(self, thread_id: str, branch_id: str) -> int:
        """Return the sequence number of the branch's last record, or 0 if it has none."""
        with self._locked(exclusive=False):
            return self._index.last_sequence(thread_id, branch_id)

    async def last_checkpoint(
        self, thread_id: str, branch_id: str, *, at_or_before: int | None = None
    ) -> int | None:
        """Return the sequence number of the branch's last ``checkpoint`` record.

        Args:
            thread_id: The thread.
            branch_id: The branch.
            at_or_before: Only consider checkpoints with ``seq <= at_or_before``.
        """
        with self._locked(exclusive=False):
            return self._index.last_checkpoint(thread_id, branch_id, at_or_before)

    async def locate(self, thread_id: str, event_id: str) -> tuple[str, int] | None:
        """Return ``(branch_id, seq)`` of the record with id ``event_id`` in the thread."""
        with self._locked(exclusive=False):
            return self._index.locate(thread_id, event_id)

    async def create_branch(self, branch: BranchRecord, first: Sequence[Record]) -> bool:
        """Create a branch and append its first records, atomically.

        Returns:
            ``False``, storing nothing, when the thread already has a branch with that id.
        """
        lines = self._encode(branch.thread_id, branch.id, first, branch.from_sequence + 1)
        lines.insert(0, orjson.dumps(branch.to_json(), option=_NL))
        with self._locked(exclusive=True):
            if self._index.has_branch(branch.thread_id, branch.id):
                return False
            self._write(lines, first, branch)
            return True

    async def list_branches(self, thread_id: str) -> list[BranchRecord]:
        """Return the thread's forked branches, oldest first."""
        with self._locked(exclusive=False):
            return self._index.list_branches(thread_id)

    async def aclose(self) -> None:
        """Close the file; the store cannot be used afterwards."""
        if self._pid != os.getpid():
            self._lock = threading.Lock()
        with self._lock:
            self._close_fds()

    # -- opening, locking and catching up ------------------------------------------------

    def _open(self) -> None:
        try:
            self._fd = _io.open_rw(self.path)
            self._lock_fd = _io.open_lock_target(self.path, self._fd)
            st = _io.fstat(self._fd)
        except OSError as e:
            self._close_fds()
            raise self._os_error("open", e) from e
        self._ident = (st.st_dev, st.st_ino)
        self._pid = os.getpid()
        self._reset_index()

    def _reset_index(self) -> None:
        self._index = RecordIndex()
        self._end = 0  # bytes of whole records indexed: the file up to here is known good
        self._lines = 0  # lines up to _end, for error messages
        self._size = 0  # the file size seen by the last catch-up

    def _close_fds(self) -> None:
        for fd in {self._fd, self._lock_fd} - {-1}:
            with suppress(OSError):  # only a descriptor that is gone already fails to close
                _io.close(fd)
        self._fd = self._lock_fd = -1

    def _reopen_after_fork(self) -> None:
        # flock locks belong to the open file, which a fork shares: with the parent's
        # descriptor the child would hold the parent's lock and the parent the child's.
        with _fork_lock:
            if self._pid == os.getpid():
                return
            held = self._lock.locked()  # held by a parent thread: the index may be half-built
            self._lock = threading.Lock()
            closed = self._fd == -1
            self._close_fds()
            if not closed:
                index, end, lines, ident = self._index, self._end, self._lines, self._ident
                self._open()
                if not held and ident == self._ident:  # the same file: the index still holds
                    self._index, self._end, self._lines = index, end, lines

    @contextmanager
    def _locked(self, *, exclusive: bool) -> Iterator[None]:
        if self._pid != os.getpid():
            self._reopen_after_fork()
        with self._lock:
            if self._fd == -1:
                raise StateStoreError(
                    f"The store of {self.path} is closed; create a new FilesystemStateStore "
                    f"to use the file again.",
                    path=str(self.path),
                )
            try:
                _io.lock(self._lock_fd, exclusive=exclusive)
            except OSError as e:
                raise self._os_error("lock", e) from e
            try:
                self._sync(exclusive)
                yield
            finally:
                with suppress(OSError):  # only a closed descriptor fails, and closing unlocks
                    _io.unlock(self._lock_fd)

    def _sync(self, exclusive: bool) -> None:
        """Index what other processes appended; as a writer, also repair the file's end."""
        try:
            st = _io.stat(self.path)
            if (st.st_dev, st.st_ino) != self._ident:
                self._follow_replaced_file(exclusive)
                st = _io.fstat(self._fd)
            size = self._size = st.st_size
            if size < self._end:  # cut by some other program: what we indexed may be gone
                self._reset_index()
                self._size = size
            if size > self._end:
                self._catch_up(size)
            if exclusive and (size > self._end or self._end == 0):
                self._repair(size)
        except FileNotFoundError as e:
            raise StateStoreError(
                f"{self.path} was deleted or moved while a store had it open; put the file "
                f"back, or create a new FilesystemStateStore to start a new history.",
                path=str(self.path),
            ) from e
        except OSError as e:
            raise self._os_error("access", e) from e

    def _follow_replaced_file(self, exclusive: bool) -> None:
        # Another program put a new file at the path (a restore from a backup, say). Locks
        # on the old file exclude no one from the new one: lock and index the new file.
        _io.unlock(self._lock_fd)
        self._close_fds()
        self._open()
        _io.lock(self._lock_fd, exclusive=exclusive)

    def _catch_up(self, size: int) -> None:
        pending = b""
        pos = self._end
        try:
            while pos < size:
                chunk = _io.pread(self._fd, min(_CHUNK, size - pos), pos)
                if not chunk:
                    break
                pos += len(chunk)
                data = pending + chunk if pending else chunk
                pending = data[self._index_lines(data) :]
        except StateStoreError:
            self._reset_index()  # the next call reports the same line instead of a muddle
            raise
        if self._end == 0 and pending and not _is_torn_header(pending):
            raise StateStoreError(
                f"{self.path} is not a nodestep history file: it has no header line "
                f"(it starts with {pending[:40]!r}). Give FilesystemStateStore the path of a "
                f"history file, or a new path.",
                path=str(self.path),
                line=1,
                offset=0,
            )

    def _index_lines(self, data: bytes) -> int:
        """Index the whole records of ``data``, which starts at ``_end``; return bytes used."""
        base = self._end
        used = 0
        while True:
            nl = data.find(b"\n", used)
            if nl < 0:
                return used
            record = self._parse(data, used, nl, base)
            if record.get("type") != "batch" or self._lines == 0:  # line 1: the header
                self._index_record(record, base + used, nl + 1 - used, self._lines + 1)
                self._lines += 1
                used = nl + 1
            else:
                start, stop = nl + 1, nl + 1 + self._batch_bytes(record, data, nl + 1, base + used)
                if stop > len(data):  # the batch is not all there: more data, or a torn tail
                    return used
                line = self._lines + 2
                while start < stop:
                    end = data.index(b"\n", start)
                    member = self._parse(data, start, end, base, line)
                    self._index_record(member, base + start, end + 1 - start, line)
                    start, line = end + 1, line + 1
                self._lines = line - 1
                used = stop
            self._end = base + used

    def _parse(self, data: bytes, start: int, end: int, base: int, line: int = 0) -> Record:
        line = line or self._lines + 1
        try:
            record = orjson.loads(data[start:end])
        except orjson.JSONDecodeError as e:
            reason = f"expected one JSON object per line, found invalid JSON ({e})"
            raise self._bad_line(line, base + start, reason) from None
        if not isinstance(record, dict):
            found = type(record).__name__
            reason = f"expected one JSON object per line, found a JSON {found}"
            raise self._bad_line(line, base + start, reason)
        return record

    def _batch_bytes(self, record: Record, data: bytes, start: int, offset: int) -> int:
        """Return the size of the batch's lines, checking it when they are all in ``data``."""
        lines, size = record.get("lines"), record.get("bytes")
        if type(lines) is int and type(size) is int and 0 < lines <= size:
            stop = start + size
            if stop > len(data) or (
                data[stop - 1] == 10 and data.count(b"\n", start, stop) == lines
            ):
                return size
        raise self._bad_line(
            self._lines + 1,
            offset,
            f"the batch record announces {lines!r} lines in {size!r} bytes, but the file does "
            f"not hold that after it",
        )

    def _index_record(self, record: Record, offset: int, length: int, line: int) -> None:
        kind = record.get("type")
        if line == 1:
            self._check_header(record)
        elif kind == "branch":
            problem = _problem(record, _BRANCH_KEYS)
            if problem:
                raise self._bad_line(line, offset, f"in a branch record, {problem}")
            branch = BranchRecord.from_json(record)
            if self._index.has_branch(branch.thread_id, branch.id):
                reason = f"branch {branch.id!r} of thread {branch.thread_id!r} is created twice"
                raise self._bad_line(line, offset, reason)
            self._index.add_branch(branch)
        elif kind in _NOT_EVENTS:
            raise self._bad_line(line, offset, f"a {kind} record cannot be here")
        else:
            problem = _problem(record, _EVENT_KEYS)
            if problem:
                raise self._bad_line(line, offset, f"in an event record, {problem}")
            expected = self._index.expected_seq(record)
            if record["seq"] != expected:
                raise self._bad_line(
                    line,
                    offset,
                    f"event {record['id']!r} of thread {record['thread']!r}, branch "
                    f"{record['branch']!r} has seq {record['seq']}, but the branch's next "
                    f"sequence number is {expected}",
                )
            self._index.add_event(record, (offset, length))

    def _check_header(self, record: Record) -> None:
        fix = "Give FilesystemStateStore the path of a nodestep history file, or a new path."
        if record.get("type") != "header":
            problem = f"is not a nodestep history file: its first line is not a header. {fix}"
        elif record.get("format") != FORMAT:
            problem = f"holds format {record.get('format')!r}, not {FORMAT!r}. {fix}"
        elif type(record.get("version")) is not int or record["version"] > VERSION:
            problem = (
                f"is a history of format version {record.get('version')!r}; this nodestep "
                f"reads versions up to {VERSION}. Upgrade nodestep to open it."
            )
        else:
            return
        raise StateStoreError(f"{self.path} {problem}", path=str(self.path), line=1, offset=0)

    def _repair(self, size: int) -> None:
        """Cut a torn tail and write a missing header; the caller holds the exclusive lock."""
        if size > self._end:
            # Only a writer that died mid-write leaves this: live writers hold the lock.
            _io.truncate(self._fd, self._end)
            self.repaired_bytes += size - self._end
            logger.warning(
                "%s: cut off %d bytes at byte %d, left by a write that did not finish "
                "(its records were never acknowledged)",
                self.path,
                size - self._end,
                self._end,
            )
        if self._end == 0:
            header = {"type": "header", "format": FORMAT, "version": VERSION}
            line = orjson.dumps({**header, "created": time.time()}, option=_NL)
            _io.write_all(self._fd, line)
            if self.fsync:
                _io.fsync(self._fd)
                _io.fsync_dir(self.path.parent)
            self._end = self._size = len(line)
            self._lines = 1

    # -- writing and reading -------------------------------------------------------------

    def _encode(
        self, thread_id: str, branch_id: str, records: Sequence[Record], first_seq: int
    ) -> list[bytes]:
        lines = []
        for i, record in enumerate(records):
            problem = _problem(record, _EVENT_KEYS) or _misplaced(record, thread_id, branch_id)
            if not problem and record["seq"] != first_seq + i:
                problem = f"its seq is {record['seq']}, but it must be {first_seq + i}"
            if not problem:
                try:
                    lines.append(orjson.dumps(record, option=_NL))
                except orjson.JSONEncodeError as e:
                    problem = (
                        f"it is not JSON data ({e}); records hold dicts with string keys, "
                        f"lists, strings, numbers, booleans and None"
                    )
            if problem:
                raise StateStoreError(
                    f"Cannot store record {i} of thread {thread_id!r}, branch {branch_id!r} in "
                    f"{self.path}: {problem}. Nothing was stored.",
                    path=str(self.path),
                )
        return lines

    def _write(
        self, lines: list[bytes], events: Sequence[Record], branch: BranchRecord | None = None
    ) -> None:
        """Append ``lines`` in one write and index them; on failure, leave the file as it was.

        ``lines`` are the branch record's line, if ``branch`` is given, then the events'.
        """
        if len(lines) > 1:
            shape = {"type": "batch", "lines": len(lines), "bytes": sum(map(len, lines))}
            lines = [orjson.dumps(shape, option=_NL), *lines]
        data = b"".join(lines)
        start = self._end
        try:
            _io.write_all(self._fd, data)
            if self.fsync:
                _io.fsync(self._fd)
        except OSError as e:
            self._undo_write(start, e)
        if branch is not None:
            self._index.add_branch(branch)
        skip = len(lines) - len(events)  # the batch and branch lines come first
        offset = start + sum(map(len, lines[:skip]))
        for record, line in zip(events, lines[skip:], strict=True):
            self._index.add_event(record, (offset, len(line)))
            offset += len(line)
        self._end = self._size = start + len(data)
        self._lines += len(lines)

    def _undo_write(self, start: int, error: OSError) -> NoReturn:
        what = f"{error.strerror or error} (errno {error.errno})"
        try:
            _io.truncate(self._fd, start)
        except OSError as e:
            raise StateStoreError(
                f"Cannot write to {self.path}: {what}, and cutting off the part written failed "
                f"too ({e.strerror}). The next write cuts it off, unless the whole append "
                f"reached the file. Free disk space, or lift the file size limit, and retry.",
                path=str(self.path),
            ) from error
        raise StateStoreError(
            f"Cannot write to {self.path}: {what}. Nothing was stored; free disk space, lift "
            f"the file size limit or check the disk, and try again.",
            path=str(self.path),
        ) from error

    def _read_lines(self, locations: list[tuple[int, int]]) -> list[bytes]:
        """Return the lines at ``locations`` without their newlines; one read per run of them."""
        out: list[bytes] = []
        i, n = 0, len(locations)
        while i < n:
            start, length = locations[i]
            end, j = start + length, i + 1
            while j < n and locations[j][0] == end:
                end += locations[j][1]
                j += 1
            try:
                data = _io.pread(self._fd, end - start, start)
            except OSError as e:
                raise self._os_error("read", e) from e
            if len(data) < end - start:
                raise StateStoreError(
                    f"{self.path} is shorter than the records indexed in it ({len(data) + start} "
                    f"bytes, {end} expected): another program cut it. Restore it from a backup.",
                    path=str(self.path),
                )
            for offset, length in locations[i:j]:
                out.append(data[offset - start : offset - start + length - 1])
            i = j
        return out

    # -- errors --------------------------------------------------------------------------

    def _bad_line(self, line: int, offset: int, reason: str) -> StateStoreError:
        return StateStoreError(
            f"{self.path}: line {line} (byte {offset}) is not a valid record: {reason}. "
            + _DAMAGED.format(offset=offset),
            path=str(self.path),
            line=line,
            offset=offset,
        )

    def _os_error(self, action: str, error: OSError) -> StateStoreError:
        return StateStoreError(
            f"Cannot {action} {self.path}: {error.strerror or error} (errno {error.errno}). "
            f"Check that the path is right and this process may read and write it.",
            path=str(self.path),
        )


def _problem(record: Any, keys: _Keys) -> str | None:
    """Say what makes ``record`` not a record with ``keys``, or return None."""
    if not isinstance(record, dict):
        return f"it is a {type(record).__name__}, not a dict"
    for key, kind, name in keys:
        value = record.get(key)
        if not isinstance(value, kind) or isinstance(value, bool):
            found = f"{value!r}" if key in record else "no such key"
            return f"its {key!r} must be {name}, found {found}"
    if keys is _EVENT_KEYS and record["type"] in _NOT_EVENTS:
        return f"its type {record['type']!r} is reserved for the file's own records"
    return None


def _misplaced(record: Record, thread_id: str, branch_id: str) -> str | None:
    if record["thread"] != thread_id or record["branch"] != branch_id:
        return (
            f"it belongs to thread {record['thread']!r}, branch {record['branch']!r}, "
            f"not to thread {thread_id!r}, branch {branch_id!r}"
        )
    return None


def _is_torn_header(tail: bytes) -> bool:
    """Tell whether ``tail``, a file's only bytes, is a header cut while being written."""
    core = tail.rstrip(b"\0")  # a power cut can leave zeros where the write did not land
    return _HEADER_START.startswith(core) or core.startswith(_HEADER_START)
