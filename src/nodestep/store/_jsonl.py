"""The history file's line format: JSON Lines, one record a line, appended and never changed.

The lines, each one JSON object (serialized with orjson) and a ``\\n``:

* ``{"type":"header","format":"nodestep-history","version":2,"created":...}`` first;
* event records, as the engine builds them (see ``nodestep.store.base``), except that an
  event of branch ``"main"`` is written without its ``"branch"`` key, and a line without
  one is read as ``"branch": "main"``. Most events are on the main branch, and the key is
  16 of the ~200 bytes a one-field superstep takes;
* branch records, ``BranchRecord.to_json()``;
* ``{"type":"batch","lines":n,"bytes":b}`` before the *n* lines (*b* bytes) written by one
  append of several lines. A crash can leave any prefix of a write on disk; the batch line
  lets the next writer tell a whole append from part of one, so an append is all-or-nothing
  even across ``kill -9`` or a power cut.

Format versions: the store reads files of versions 1 and 2 and writes version 2. The lines
are the same in both; version 2 changed the shape of the engine's ``superstep_completed``
records (see ``nodestep.superstep.records``), which the engine reads in both shapes. A store
that writes to a version 1 file first sets its header's version to 2 (one byte at
``VERSION_OFFSET``), so that an older nodestep, which reads only version 1, refuses the file
with its "upgrade nodestep" message instead of misreading the new records.

This module turns records into lines and lines into records; it does no I/O. The store in
``nodestep.store.filesystem`` decides where the lines go and what they mean for its index.
"""

from __future__ import annotations

import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import orjson

from nodestep.errors import StateStoreError
from nodestep.store.base import BranchRecord, Record

__all__ = [
    "FILE_TYPES",
    "FORMAT",
    "VERSION",
    "VERSION_OFFSET",
    "HeaderError",
    "LineError",
    "batch_line",
    "batch_size",
    "decode_event",
    "encode_branch",
    "encode_event",
    "header_line",
    "header_problem",
    "header_start",
    "missing_header",
    "parse_line",
    "split",
]

FORMAT = "nodestep-history"
VERSION = 2
"""The format version this nodestep writes; it reads every version from 1 up to this one."""
FILE_TYPES = frozenset({"header", "branch", "batch"})
"""The record types of the file's own lines; an event may not use them."""

MAIN = "main"
_NL = orjson.OPT_APPEND_NEWLINE


def header_start(version: int) -> bytes:
    """Return the bytes of a header of ``version`` as nodestep writes it, up to its timestamp."""
    start = orjson.dumps({"type": "header", "format": FORMAT, "version": version})
    return start[:-1] + b',"created":'


VERSION_OFFSET = header_start(VERSION).index(b'"version":') + len(b'"version":')
"""Where the version's digit is in a header nodestep wrote: the byte an upgrade rewrites."""

# A file holding only a prefix of one of these (or one of these and part of the timestamp)
# was cut while its header was written, and is still ours; version 1 files are written by
# older nodestep releases.
_HEADER_STARTS = tuple(header_start(v) for v in range(1, VERSION + 1))


class LineError(ValueError):
    """A line is not what the format allows there; ``str(error)`` says what it is instead.

    Attributes:
        line: The line's number in the file (set by ``split``; 0 from ``parse_line``).
        start: Where the line starts in the data given to ``split``.
    """

    def __init__(self, reason: str, line: int = 0, start: int = 0) -> None:
        super().__init__(reason)
        self.line = line
        self.start = start

    def for_file(self, path: Path, base: int) -> StateStoreError:
        """Return the store's error for this line of ``path``, given from byte ``base`` on."""
        offset = base + self.start
        return StateStoreError(
            f"{path}: line {self.line} (byte {offset}) is not a valid record: {self}. The file "
            f"is damaged there: restore it from a backup, or cut the file before that line "
            f"(at byte {offset}) to keep the history up to it.",
            path=str(path),
            line=self.line,
            offset=offset,
        )


class HeaderError(LineError):
    """The file does not start with a header this version reads: it is no history of ours."""

    def for_file(self, path: Path, base: int) -> StateStoreError:
        """Return the store's error for the file ``path``; it is about line 1 at byte 0."""
        return StateStoreError(f"{path} {self}", path=str(path), line=1, offset=0)


# -- writing ------------------------------------------------------------------------------


def header_line(created: float | None = None) -> bytes:
    """Return the header line of a new file (format ``VERSION``), stamped ``created``.

    ``created`` defaults to now.
    """
    header = {"type": "header", "format": FORMAT, "version": VERSION}
    return orjson.dumps(
        {**header, "created": time.time() if created is None else created}, option=_NL
    )


def encode_event(record: Record) -> bytes:
    """Return the line of an event record, without its ``"branch"`` when that is ``"main"``.

    Raises:
        TypeError: ``record`` holds something that is not JSON data (orjson's error).
    """
    if record.get("branch") == MAIN:
        record = dict(record)  # the caller's dict keeps its key
        del record["branch"]
    return orjson.dumps(record, option=_NL)


def encode_branch(branch: BranchRecord) -> bytes:
    """Return the line of a branch record."""
    return orjson.dumps(branch.to_json(), option=_NL)


def batch_line(lines: list[bytes]) -> bytes:
    """Return the batch line announcing ``lines``, written in one append after it."""
    shape = {"type": "batch", "lines": len(lines), "bytes": sum(map(len, lines))}
    return orjson.dumps(shape, option=_NL)


# -- reading ------------------------------------------------------------------------------


def parse_line(data: bytes, start: int, end: int) -> Record:
    """Return the record of the line ``data[start:end]`` (without its newline).

    An event line without ``"branch"`` gets ``"branch": "main"``; other keys are left for the
    caller to check.

    Raises:
        LineError: The line is not one JSON object.
    """
    try:
        record = orjson.loads(data[start:end])
    except orjson.JSONDecodeError as e:
        raise LineError(f"expected one JSON object per line, found invalid JSON ({e})") from None
    if not isinstance(record, dict):
        found = type(record).__name__
        raise LineError(f"expected one JSON object per line, found a JSON {found}")
    if "branch" not in record and record.get("type") not in FILE_TYPES:
        record["branch"] = MAIN
    return record


def split(data: bytes, line: int) -> Iterator[tuple[Record, int, int, int, bool]]:
    """Yield the lines of the whole appends at the start of ``data``, parsed one by one.

    Each item is ``(record, start, end, line, last)``: the record of ``data[start:end]``
    (``end`` is past the newline), its line number, and whether it is the last line of its
    append, so that everything up to ``end`` is whole. A batch line is not yielded: its lines
    are. The items stop before an append that ``data`` does not hold all of.

    Args:
        data: Bytes of the file from the start of a line.
        line: The number of ``data``'s first line; line 1 is the header, never a batch.

    Raises:
        HeaderError: Line 1 is not a header of this format and version.
        LineError: A line is malformed; its ``line`` and ``start`` say which.
    """
    used = 0
    while (nl := data.find(b"\n", used)) >= 0:
        record = _parse_at(data, used, nl, line)
        if line == 1 and (problem := header_problem(record)):
            raise HeaderError(problem, line, used)
        if record.get("type") != "batch" or line == 1:
            yield record, used, nl + 1, line, True
            used, line = nl + 1, line + 1
            continue
        try:
            start, stop = nl + 1, nl + 1 + batch_size(record, data, nl + 1)
        except LineError as e:
            raise LineError(str(e), line, used) from None
        if stop > len(data):  # the batch is not all there: more data, or a torn tail
            return
        line += 1
        while start < stop:
            end = data.index(b"\n", start) + 1
            yield _parse_at(data, start, end - 1, line), start, end, line, end == stop
            start, line = end, line + 1
        used = stop


def _parse_at(data: bytes, start: int, end: int, line: int) -> Record:
    try:
        return parse_line(data, start, end)
    except LineError as e:
        raise LineError(str(e), line, start) from None


def decode_event(line: bytes) -> Record:
    """Return the event record of a line that was indexed as one (so it is known good)."""
    record: Record = orjson.loads(line)
    if "branch" not in record:
        record["branch"] = MAIN
    return record


def batch_size(record: Record, data: bytes, start: int) -> int:
    """Return the size in bytes of the lines the batch ``record`` announces.

    The lines start at ``data[start]``. When ``data`` holds them all, check that it is that
    many whole lines; when it does not, the caller reads more or finds a torn tail.

    Raises:
        LineError: The batch record is malformed, or the lines after it do not match it.
    """
    lines, size = record.get("lines"), record.get("bytes")
    if type(lines) is int and type(size) is int and 0 < lines <= size:
        stop = start + size
        if stop > len(data) or (data[stop - 1] == 10 and data.count(b"\n", start, stop) == lines):
            return size
    raise LineError(
        f"the batch record announces {lines!r} lines in {size!r} bytes, but the file does "
        f"not hold that after it"
    )


def header_problem(record: Record) -> str | None:
    """Say why ``record``, a file's first line, is not a header this version reads."""
    fix = "Give FilesystemStateStore the path of a nodestep history file, or a new path."
    if record.get("type") != "header":
        return f"is not a nodestep history file: its first line is not a header. {fix}"
    if record.get("format") != FORMAT:
        return f"holds format {record.get('format')!r}, not {FORMAT!r}. {fix}"
    version: Any = record.get("version")
    if type(version) is not int or version < 1:  # bool is not int here: True is refused
        return (
            f"has a header of format version {version!r}, which is not a positive integer: "
            f"the file is damaged or was not written by nodestep. Restore it from a backup."
        )
    if version > VERSION:
        return (
            f"is a history of format version {version!r}; this nodestep reads versions up "
            f"to {VERSION}. Upgrade nodestep to open it."
        )
    return None


def missing_header(tail: bytes) -> HeaderError | None:
    """Return the error for a file whose only bytes, no whole line, are ``tail``.

    Returns:
        ``None`` when ``tail`` is a header cut while being written: the file is ours, and
        the next writer writes the header again.
    """
    core = tail.rstrip(b"\0")  # a power cut can leave zeros where the write did not land
    if any(start.startswith(core) or core.startswith(start) for start in _HEADER_STARTS):
        return None
    return HeaderError(
        f"is not a nodestep history file: it has no header line (it starts with "
        f"{tail[:40]!r}). Give FilesystemStateStore the path of a history file, or a new path.",
        1,
    )
