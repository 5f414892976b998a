"""The records of an open history file: indexing what is there, repairing its end, appending.

``FilesystemStateStore`` owns the descriptor, the file and thread locks, and what happens
around forks and replaced files; it calls ``IndexedLog`` with the file lock held and hands
it the descriptor. Raw file operations go through ``io``, so tests can inject faults. The
errors about the file as a whole are here too (``os_error`` and the others): what went
wrong, and the fix; errors about one line are ``_codec.LineError.for_file``'s.
"""

from __future__ import annotations

import errno
import logging
import os
import sys
from collections.abc import Sequence
from contextlib import suppress
from pathlib import Path
from typing import NoReturn

from nodestep._errors import StateStoreError
from nodestep.store import _codec
from nodestep.store._codec import decode_events
from nodestep.store._contract import BranchRecord, Record
from nodestep.store._file import io, persisted
from nodestep.store._index import RecordIndex

__all__ = ["FsyncFailed", "IndexedLog", "logger", "os_error", "signature"]

logger = logging.getLogger("nodestep.store.filesystem")
"""The file store's logger; the name users know it by, from when it was one module."""

_CHUNK = 1 << 22  # catch-up reads at most 4 MiB at a time, whatever the file's length


def signature(st: os.stat_result) -> tuple[int, int, int]:
    """What changes when a file grows or is cut, and when it is unlinked or renamed over."""
    return (st.st_size, st.st_nlink, st.st_ctime_ns)


class FsyncFailed(Exception):
    """The flush after an append failed; the append was cut off the file again."""

    def __init__(self, error: OSError) -> None:
        super().__init__(error)
        self.error = error


class IndexedLog:
    """Where every record of a history file is, and how far that knowledge reaches.

    Attributes:
        records: The index of the records.
        end: Bytes of whole appends indexed; the file up to here is known good.
        lines: Lines up to ``end``, for error messages.
        size: The file size seen by the last catch-up.
        seen: The file's ``signature`` when the index last covered all of it; ``None``:
            unknown, so a reader must take the file lock.
        version: The format version in the file's header; 0 before the header is read.
        checked_from: The offset of the first line with a checksum: every line from there
            on has one (``None``: no line has one yet, as in files of format 1 and 2).
        changed_in_place: The file changed without growing since it was indexed (another
            program wrote into it): reads check every line's checksum again from then on.
            Until then a line read back is the line whose checksum was checked when it was
            indexed, and checking it again on every read would cost a history read a
            quarter of its time (``docs/performance.md``).
    """

    def __init__(self, path: Path, *, fsync: bool, persist: bool = False) -> None:
        self.path = path
        self.fsync = fsync
        self.persist = persist  # write the persisted index (``persisted``) when due
        self.reset()

    def reset(self) -> None:
        """Forget everything indexed: the next catch-up reads the file from its start."""
        old = getattr(self, "records", None)
        if isinstance(old, persisted.LazyRecordIndex):
            old.close()
        self.records: RecordIndex = RecordIndex()
        self.saved = 0  # bytes of the file the persisted index covers
        self.end = 0
        self.lines = 0
        self.size = 0
        self.seen: tuple[int, int, int] | None = None
        self.version = 0
        self.checked_from: int | None = None
        self.changed_in_place = False

    def follow(self, fd: int, st: os.stat_result) -> None:
        """Index what was appended to the file ``fd``, whose status is ``st``, since last time.

        Raises:
            StateStoreError: A line is not a valid record, or the file has no header.
            OSError: The file cannot be read.
        """
        size = self.size = st.st_size
        if size < self.end or getattr(self.records, "damaged", False):  # cut by some other
            self.reset()  # program (what was indexed may be gone), or the index is damaged
            self.size = size
        if self.end == 0 and size > 0:
            self._open_index(fd, st)
        elif size == self.end and self.seen is not None and signature(st) != self.seen:
            self.changed_in_place = True  # not grown, yet changed: written into, or touched
        if size > self.end:
            self._catch_up(fd, size)
            self.save_index(fd)
        self.seen = signature(st) if size == self.end else None

    def _open_index(self, fd: int, st: os.stat_result) -> None:
        """Start from the persisted index of the file, if it has one that matches it."""
        found = persisted.load(self.path, fd, st)
        if found is not None:
            self.records, covered = found
            found[0].on_damage = self._forget_seen
            self.end = self.saved = covered.end
            self.lines, self.version, self.checked_from = covered[1:]
            self.changed_in_place = True  # lines another process checked: check on read

    def _forget_seen(self) -> None:
        self.seen = None  # the lock-free path must not answer from a damaged index

    def save_index(self, fd: int) -> None:
        """Write the persisted index when ``SAVE_AFTER`` bytes were indexed since it was."""
        if self.persist and self.end - self.saved >= persisted.SAVE_AFTER:
            covered = persisted.Covered(self.end, self.lines, self.version, self.checked_from)
            persisted.save(self.path, fd, self.records, covered)
            self.saved = self.end

    def _catch_up(self, fd: int, size: int) -> None:
        pending = b""
        pos = self.end
        try:
            while pos < size:
                chunk = io.pread(fd, min(_CHUNK, size - pos), pos)
                if not chunk:
                    break
                pos += len(chunk)
                data = pending + chunk if pending else chunk
                pending = data[self._index_lines(data) :]
        except StateStoreError:
            self.reset()  # the next call reports the same line instead of a muddle
            raise
        if self.end == 0 and pending and (error := _codec.missing_header(pending)):
            raise error.for_file(self.path, 0)

    def _index_lines(self, data: bytes) -> int:
        """Index the whole appends of ``data``, which starts at ``end``; return bytes used."""
        base, used = self.end, 0
        sealed = self.checked_from is not None
        try:
            for record, start, end, line, last, checked in _codec.split(
                data, self.lines + 1, sealed
            ):
                location = (base + start, end - start)
                if line == 1:  # the header, checked by split
                    self.version = record["version"]
                elif problem := self.records.add_stored(record, location):
                    raise _codec.LineError(problem, line, start)  # reported as below
                if checked and not sealed:
                    sealed, self.checked_from = True, base + start
                if last:  # an append is known good only when all its lines are indexed
                    used, self.end, self.lines = end, base + end, line
        except _codec.LineError as e:
            raise e.for_file(self.path, base) from None
        return used

    def leave_tail(self) -> None:
        """Say what a read-only store does not repair: a torn tail, or a missing header.

        Raises:
            StateStoreError: The file has no whole header line.
        """
        if self.end == 0:
            raise _no_header_yet(self.path, self.size)
        logger.warning(_TAIL_LEFT, self.path, self.size - self.end)

    def repair(self, fd: int, size: int) -> int:
        """Cut a torn tail and write a missing header; return the bytes cut.

        The caller holds the exclusive lock, so no live writer is mid-write: only one that
        died leaves a tail past ``end``.

        Raises:
            OSError: The file cannot be cut, written or flushed.
        """
        cut = 0
        if size > self.end:
            io.truncate(fd, self.end)
            cut = size - self.end
        if self.end == 0:
            line = _codec.header_line()
            io.write_all(fd, line)
            if self.fsync:
                io.fsync(fd)
                io.fsync_dir(self.path.parent)
            self.end = self.size = len(line)
            self.lines = 1
            self.version = _codec.VERSION
        self.seen = None  # this store's own change, as after an append
        return cut

    def append(
        self,
        fd: int,
        lines: list[bytes],
        events: Sequence[Record],
        branch: BranchRecord | None = None,
    ) -> tuple[int, int]:
        """Append ``lines`` in one write and index them; on failure, leave the file as it was.

        ``lines`` are the branch record's line, if ``branch`` is given, then the events'.
        The write is not flushed here: with ``fsync`` the store flushes it, shared with other
        appends (``group_commit``). Returns the offsets where the write starts and ends.

        A file of an older format version gets a header of this one first (see
        ``upgrade_header``).

        Raises:
            StateStoreError: The write failed, or the header could not be upgraded; nothing
                was stored.
            FsyncFailed: The flush of an upgraded header failed; nothing was stored.
        """
        if self.version < _codec.VERSION:
            self.upgrade_header(fd)
        start = self.end
        if len(lines) == 1:  # a step's one record: no batch line, no join
            data = lines[0]
        else:
            lines = [_codec.batch_line(lines), *lines]
            data = b"".join(lines)
        try:
            io.write_all(fd, data)
        except OSError as e:
            self._undo_write(fd, start, e)
        records = self.records
        if branch is not None:
            records.add_branch(branch)
        first = len(lines) - len(events)  # the batch and branch lines come first
        offset = start + sum(map(len, lines[:first])) if first else start
        locations = []
        for line in lines[first:]:
            locations.append((offset, len(line)))
            offset += len(line)
        records.add_events(events, locations)
        self.end = self.size = start + len(data)
        if self.checked_from is None:
            self.checked_from = start  # every line this nodestep writes has a checksum
        self.lines += len(lines)
        # Its signature is not known until the next fstat; without this, the next catch-up
        # would take this store's own write for a write into the file by someone else.
        self.seen = None
        return start, self.end

    def read(self, fd: int, spans: list[tuple[int, int]]) -> list[Record]:
        """Return the records at ``spans`` of the file ``fd``; the caller holds the locks.

        Each line is checked again, against its checksum: the file may have been changed on
        the disk since it was indexed.

        Raises:
            StateStoreError: The file cannot be read, or a line is no longer the record
                indexed there.
        """
        try:
            lines = io.pread_spans(fd, spans)
        except OSError as e:
            raise os_error(self.path, "read", e, read_only=True) from e
        except EOFError as e:
            raise _shorter_than_indexed(self.path, e) from None
        checked_from = sys.maxsize if self.checked_from is None else self.checked_from
        try:
            return decode_events(
                lines, [offset >= checked_from for offset, _ in spans], self.changed_in_place
            )
        except _codec.LineError as e:
            raise self._changed(fd, e, spans[e.line][0]) from None

    def _changed(self, fd: int, error: _codec.LineError, offset: int) -> StateStoreError:
        try:
            line = self.line_at(fd, offset)
        except OSError as e:
            raise os_error(self.path, "read", e, read_only=True) from e
        reason = f"{error}; it changed on the disk after this store indexed it"
        return _codec.LineError(reason, line).for_file(self.path, offset)

    def line_at(self, fd: int, offset: int) -> int:
        """Return the number of the line that starts at byte ``offset``, for an error message.

        Reads the file up to ``offset``: for errors only.

        Raises:
            OSError: The file cannot be read.
        """
        newlines, pos = 0, 0
        while pos < offset:
            chunk = io.pread(fd, min(_CHUNK, offset - pos), pos)
            if not chunk:
                break
            newlines += chunk.count(b"\n")
            pos += len(chunk)
        return newlines + 1

    def upgrade_header(self, fd: int) -> None:
        """Set the version in the header of the file ``fd`` to this one's, in place.

        The lines this nodestep writes have format 3 shapes (checksums, records of format 2),
        which an older release would misread; with the new version in the header, such a
        release refuses the file with its "upgrade nodestep" message instead. The version is
        one digit at a fixed offset of a header nodestep wrote, so the upgrade rewrites that
        one byte, which a crash leaves either old or new: both give a valid file, since this
        nodestep reads the older lines, which have no checksum, in a version 3 file too.
        Nothing else is written before it, and with ``fsync`` it is on the disk before the
        first new record. The
        caller holds the exclusive lock. A header another store upgraded since this one read
        it is left as it is.

        Raises:
            StateStoreError: The header is not one nodestep wrote, or cannot be rewritten.
            FsyncFailed: The flush of the new header failed.
        """
        offset = _codec.VERSION_OFFSET
        old, upgraded = _codec.header_start(self.version), _codec.header_start(_codec.VERSION)
        try:
            found = io.pread(fd, len(old), 0)
            if found != upgraded:  # else another store upgraded it since this one read it
                if found != old:
                    raise StateStoreError(
                        f"{self.path}: cannot set its format version to {_codec.VERSION} "
                        f"before writing to it: its header does not start as nodestep writes "
                        f"one (expected {old!r} at byte 0, found {found!r}). Nothing was "
                        f"stored; let nodestep {_codec.VERSION} write a new file, or fix the "
                        f"header by hand.",
                        path=str(self.path),
                        line=1,
                        offset=0,
                    )
                self._write_in_place(fd, upgraded[offset : offset + 1], offset)
        except OSError as e:
            raise StateStoreError(
                f"Cannot set the format version in the header of {self.path} to "
                f"{_codec.VERSION}: {e.strerror or e} (errno {e.errno}). Nothing was stored; "
                f"check that this process may write the file, and try again.",
                path=str(self.path),
            ) from e
        self.version = _codec.VERSION

    def _write_in_place(self, fd: int, data: bytes, offset: int) -> None:
        """Write ``data`` at ``offset`` of the file ``fd``; with ``fsync``, flush it.

        Raises:
            OSError: The write failed.
            StateStoreError: Another file was put at the path since ``fd`` was opened.
            FsyncFailed: The flush failed.
        """
        # The store's own descriptor appends: a second one writes in place. It must be the
        # same file, not one renamed over the path since (the lock is on this one).
        writer = io.open_in_place(self.path)
        try:
            mine, its = io.fstat(fd), io.fstat(writer)
            if (mine.st_dev, mine.st_ino) != (its.st_dev, its.st_ino):
                raise StateStoreError(
                    f"{self.path} was replaced by another file while this store wrote to it; "
                    f"nothing was stored. Try again: the next call reads the new file.",
                    path=str(self.path),
                )
            io.pwrite(writer, data, offset)
            if self.fsync:
                try:
                    io.fsync(writer)
                except OSError as e:
                    raise FsyncFailed(e) from e
        finally:
            with suppress(OSError):  # closing a descriptor only written through
                io.close(writer)

    def _undo_write(self, fd: int, start: int, error: OSError) -> NoReturn:
        what = f"{error.strerror or error} (errno {error.errno})"
        try:
            io.truncate(fd, start)
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


# -- errors about the file as a whole ------------------------------------------------------

# A file or a file system this process may not write.
_CANNOT_WRITE = frozenset({errno.EACCES, errno.EPERM, errno.EROFS})

_TAIL_LEFT = (
    "%s: the last %d bytes are not a whole append (a write in progress, or one that did not "
    "finish); a read-only store leaves them and reads the history before them"
)
"""The warning of a read-only store that finds a torn tail: the path, and its size."""


def os_error(path: Path, action: str, error: OSError, *, read_only: bool) -> StateStoreError:
    """Return the error for an ``OSError`` while trying to ``action`` the file ``path``.

    A file this process may not write gets the hint to open it with ``read_only=True``.
    """
    if read_only and isinstance(error, FileNotFoundError):
        fix = "A read-only store opens only an existing history; check the path."
    elif read_only:
        fix = "Check that the path is right and this process may read it."
    elif error.errno in _CANNOT_WRITE:
        fix = (
            "This process may not write it: to read the history only, open it with "
            "FilesystemStateStore(path, read_only=True)."
        )
    else:
        fix = "Check that the path is right and this process may read and write it."
    return StateStoreError(
        f"Cannot {action} {path}: {error.strerror or error} (errno {error.errno}). {fix}",
        path=str(path),
    )


def _no_header_yet(path: Path, size: int) -> StateStoreError:
    """Return the error for a read-only store of a file without a whole header line."""
    return StateStoreError(
        f"{path} has no whole header line yet ({size} bytes): a writer is creating it, or "
        f"died doing so, and a read-only store does not write one. Open it without "
        f"read_only=True, or wait for the writer.",
        path=str(path),
        line=1,
        offset=0,
    )


def _shorter_than_indexed(path: Path, error: EOFError) -> StateStoreError:
    """Return the error for a file cut below what was indexed of it."""
    return StateStoreError(
        f"{path} is shorter than the records indexed in it ({error}): another program cut "
        f"it. Restore it from a backup.",
        path=str(path),
    )
