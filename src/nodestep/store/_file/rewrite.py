"""Rewriting a history file without some of its records: how ``delete_thread`` and ``prune`` drop.

The kept lines are copied, byte for byte and in their order, to a new file next to the
history (``<name>.rewrite-<pid>-<random>.tmp``), which is flushed and then renamed over the
history, and the directory flushed. A rename is atomic: a crash at any moment leaves the old
file or the new one at the path, never a mix, and never less than one of them. The caller
holds the exclusive lock, so no other writer appends meanwhile; other stores with the old
file open notice the new one at the path (another inode) on their next call, and read it,
as they do after a restore from a backup.

Why a rewrite and not tombstones (a "deleted" record appended, the lines left in place):
deleting a thread is mostly about the data being gone (a user's conversation, privacy) or
the disk space back, and a tombstone gives neither; every later open would also have to
read past the dead lines. A rewrite costs a pass over the file, which a delete or a prune,
rare and run in the background, can afford; ``prune(older_than=...)`` of every thread is
one pass whatever the number of threads.

A temporary file left by a rewrite that was killed is removed by the next rewrite: under
the exclusive lock no other rewrite of the file can be running (an index being written by
another process meanwhile loses its temporary file, and is written again later). The old
file's persisted index (``persisted``) is removed: it would not match the new file.
"""

from __future__ import annotations

import os
import secrets
from collections.abc import Callable
from contextlib import suppress
from pathlib import Path

from nodestep.store import _codec
from nodestep.store._contract import Record
from nodestep.store._file import io, persisted

__all__ = ["Keep", "rewrite"]

Keep = Callable[[Record], bool]
"""Says whether a record (an event or a branch record) stays in the file."""

_CHUNK = 1 << 22  # read 4 MiB at a time, whatever the file's length
_SUFFIX = ".tmp"


def rewrite(
    path: Path,
    fd: int,
    end: int,
    keep: Keep,
    starts: dict[tuple[str, str], int] | None = None,
    extra: list[bytes] | None = None,
) -> None:
    """Replace the file at ``path`` by its lines up to ``end`` that ``keep`` keeps.

    The header is always kept. ``fd`` is the history's descriptor; the caller holds the
    exclusive lock and has indexed the file up to ``end``, which is its size.

    Args:
        path: The history file.
        fd: Its descriptor.
        end: Its size, all of it indexed.
        keep: Says which records stay.
        starts: Branches a prune cuts, each with the ``seq`` of its first record kept: a
            ``start`` line goes before that record, and the header says version 4 (an
            older nodestep, which would take the branch for damaged, refuses the file).
        extra: Lines to add after the kept ones: an imported pruned branch
            (``store_pruned``), with its own ``start`` line; its key in ``starts`` makes
            the header say version 4.

    Raises:
        OSError: The new file could not be written, flushed or renamed; the old one is
            then still at the path, and the new one removed.
        StateStoreError: A line of the file is not a valid record (as ``split`` reports).
    """
    _remove_stale(path)
    tmp = path.with_name(f"{path.name}.rewrite-{os.getpid()}-{secrets.token_hex(4)}{_SUFFIX}")
    out = os.open(tmp, os.O_WRONLY | os.O_CREAT | os.O_EXCL | getattr(os, "O_BINARY", 0), 0o644)
    try:
        try:
            _copy(path, fd, end, out, keep, starts or {})
            if extra:
                io.write_all(out, b"".join(extra))
            io.fsync(out)  # always: the rename must never reach the disk before the data
        finally:
            io.close(out)
        io.rename(tmp, path)
    except BaseException:
        with suppress(OSError):
            os.unlink(tmp)
        raise
    with suppress(OSError):  # the old file's index: it would not match the new file anyway
        os.unlink(persisted.sidecar(path))
    io.fsync_dir(path.parent)


def _copy(
    path: Path, fd: int, end: int, out: int, keep: Keep, starts: dict[tuple[str, str], int]
) -> None:
    pending, pos, line, sealed = b"", 0, 1, False
    while pos < end:
        chunk = io.pread(fd, min(_CHUNK, end - pos), pos)
        if not chunk:
            break
        base = pos - len(pending)
        pos += len(chunk)
        data = pending + chunk if pending else chunk
        used, kept = 0, []
        try:
            for record, start, stop, number, last, checked in _codec.split(data, line, sealed):
                sealed = sealed or checked
                kept += _kept(record, data[start:stop], number, checked, keep, starts)
                if last:
                    used, line = stop, number + 1
        except _codec.LineError as e:
            raise e.for_file(path, base) from None
        io.write_all(out, b"".join(kept))
        pending = data[used:]


def _kept(
    record: Record,
    line: bytes,
    number: int,
    checked: bool,
    keep: Keep,
    starts: dict[tuple[str, str], int],
) -> list[bytes]:
    """Return what the new file holds for ``line``, the file's line ``number``."""
    if number == 1:  # the header; version 4 once a start line may follow
        if starts and record["version"] < _codec.READS:
            return [_codec.header_line(record.get("created"), _codec.READS)]
        return [line]
    if not keep(record):
        return []
    if record["type"] in _codec.FILE_TYPES:
        return [line]
    key = (record["thread"], record["branch"])
    if starts.get(key) == record["seq"]:  # a start line as sealed as the line it precedes
        return [_codec.start_line(*key, record["seq"], checked), line]
    return [line]


def _remove_stale(path: Path) -> None:
    leftovers = [f"{path.name}.rewrite-*{_SUFFIX}", f"{persisted.sidecar(path).name}.*.tmp"]
    for stale in (found for pattern in leftovers for found in path.parent.glob(pattern)):
        with suppress(OSError):  # gone already, or not ours to remove: the rewrite goes on
            stale.unlink()
