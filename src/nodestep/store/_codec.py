"""The record codec: records to lines and lines to records, for every built-in store.

Every built-in store keeps a record as the same bytes: the file store writes them as the
lines of its history file, the memory store keeps them in memory, and the SQL stores in a
column. A line is one JSON object (serialized with orjson) and a ``\\n``; the history file
holds these lines:

* ``{"type":"header","format":"nodestep-history","version":3,"created":...}`` first;
* event records, as the engine builds them (see ``nodestep.store._contract``), except that
  an event of branch ``"main"`` is written without its ``"branch"`` key, and a line without
  one is read as ``"branch": "main"``. Most events are on the main branch, and the key is
  16 of the ~200 bytes a one-field superstep takes;
* branch records, ``BranchRecord.to_json()``;
* ``{"type":"batch","lines":n,"bytes":b}`` before the *n* lines (*b* bytes) written by one
  append of several lines. A crash can leave any prefix of a write on disk; the batch line
  lets the next writer tell a whole append from part of one, so an append is all-or-nothing
  even across ``kill -9`` or a power cut;
* ``{"type":"start",...}`` before a pruned branch's first kept record (format 4).

Checksums (format 3): every line after the header ends in ``, "c":"XXXXXX"}``, the CRC-32
(``zlib.crc32``) of the line's bytes before that ``,``, as 6 characters of base64. A digit
changed inside a value, a renamed key or any other flip then fails the check instead of being
loaded. The space after the ``,`` is what orjson never writes, so the suffix cannot be a
record's own last key, whatever keys records have; the record is parsed without it. A
``superstep_completed`` event, most of a history's records, is written without its
``"type"`` (29 bytes, twice what the checksum costs), like ``"branch"`` above; only lines
with a checksum may leave it out.

Format versions: the store reads versions 1 to 4 and writes version 3. Version 2 changed the
shape of the engine's ``superstep_completed`` records (``nodestep._superstep.records``), which
the engine reads in both shapes; version 3 added the checksums; version 4 is a file rewritten
by a prune (``nodestep.store._file.rewrite``), with ``start`` lines before a branch's first
kept record. A store writing to a file of version 1 or 2 first sets its header's version to
3 (one byte at ``VERSION_OFFSET``), so an older nodestep refuses the file ("upgrade
nodestep") instead of misreading the new lines. The lines written before that have no
checksum and are read as they are; once a line with a checksum is in the file, every later
line must have one, so cutting the checksum off a line is reported too.

This module does no I/O. The file store (``nodestep.store._file``) decides where the lines
go and what they mean for its index.
"""

from __future__ import annotations

import time
import zlib
from binascii import b2a_base64
from collections.abc import Iterator, Sequence
from pathlib import Path
from typing import Any

import orjson

from nodestep._errors import StateStoreError
from nodestep.store._contract import BranchRecord, Record

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
    "decode_events",
    "encode_branch",
    "encode_event",
    "header_line",
    "header_problem",
    "header_start",
    "missing_header",
    "parse_line",
    "split",
    "start_line",
]

FORMAT = "nodestep-history"
VERSION = 3
"""The format version this nodestep writes; it reads every version from 1 up to ``READS``."""
READS = 4
"""Version 4: a pruned file, whose ``start`` lines say where a branch's kept records start."""
FILE_TYPES = frozenset({"header", "branch", "batch", "start"})
"""The record types of the file's own lines; an event may not use them."""

MAIN = "main"
IMPLIED_TYPE = "superstep_completed"
"""The type of an event line with a checksum and no ``"type"``."""
_NL = orjson.OPT_APPEND_NEWLINE

CHECK = b', "c":"'
"""Starts a line's checksum; orjson never writes the space, so no record's key looks so."""
SEAL = len(CHECK) + 6 + 2  # the checksum key, its six characters, and the closing '"}'


def header_start(version: int) -> bytes:
    """Return the bytes of a header of ``version`` as nodestep writes it, up to its timestamp."""
    start = orjson.dumps({"type": "header", "format": FORMAT, "version": version})
    return start[:-1] + b',"created":'


VERSION_OFFSET = header_start(VERSION).index(b'"version":') + len(b'"version":')
"""Where the version's digit is in a header nodestep wrote: the byte an upgrade rewrites."""

# A file holding only a prefix of one of these (or one of these and part of the timestamp)
# was cut while its header was written, and is still ours; version 1 files are written by
# older nodestep releases.
_HEADER_STARTS = tuple(header_start(v) for v in range(1, READS + 1))


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


def header_line(created: float | None = None, version: int = VERSION) -> bytes:
    """Return the header line of a new file (format ``version``), stamped ``created`` (or now)."""
    header = {"type": "header", "format": FORMAT, "version": version}
    return orjson.dumps(
        {**header, "created": time.time() if created is None else created}, option=_NL
    )


def encode_event(record: Record) -> bytes:
    """Return the line of an event record, with its checksum.

    A ``"branch"`` of ``"main"`` and a ``"type"`` of ``"superstep_completed"`` are left out:
    a line without them is read with them.

    Raises:
        TypeError: ``record`` holds something that is not JSON data (orjson's error).
    """
    body = orjson.dumps(record)
    # The engine's records start with their type and end with their branch, so both come
    # off the bytes, which is cheaper than a copy of the dict without them.
    if body.endswith(_MAIN_TAIL):
        end = _MAIN_CUT
    elif record.get("branch") == MAIN:
        record = dict(record)  # the caller's dict keeps its key
        del record["branch"]
        body, end = orjson.dumps(record), -1
    else:
        end = -1
    head = b"{" + body[_IMPLIED_CUT:end] if body.startswith(_IMPLIED_HEAD) else body[:end]
    # _seal, inline: every record written comes here
    check = b2a_base64(zlib.crc32(head).to_bytes(4, "big"), newline=False)
    return b"".join((head, CHECK, check[:6], _CLOSE))


_MAIN_TAIL = b',"branch":"main"}'
"""How a record ends whose last key is ``"branch": "main"`` (the ``,`` makes it top-level)."""
_IMPLIED_HEAD = b'{"type":"superstep_completed",'
"""How a ``superstep_completed`` record starts whose first key is its type."""
_MAIN_CUT = -len(_MAIN_TAIL)
_IMPLIED_CUT = len(_IMPLIED_HEAD)
_CLOSE = b'"}\n'
"""What follows a line's checksum."""


def encode_branch(branch: BranchRecord) -> bytes:
    """Return the line of a branch record, with its checksum."""
    return _seal(orjson.dumps(branch.to_json())[:-1])


def start_line(thread: str, branch: str, seq: int, sealed: bool) -> bytes:
    """Return the line saying that a pruned branch's kept records start at ``seq``."""
    head = orjson.dumps({"type": "start", "thread": thread, "branch": branch, "seq": seq})[:-1]
    return _seal(head) if sealed else head + b"}\n"


def batch_line(lines: list[bytes]) -> bytes:
    """Return the batch line announcing ``lines``, written in one append after it."""
    shape = {"type": "batch", "lines": len(lines), "bytes": sum(map(len, lines))}
    return _seal(orjson.dumps(shape)[:-1])


def _seal(head: bytes) -> bytes:
    """Return the line of the JSON object ``head`` (without its ``}``), its checksum added.

    ``head`` holds at least one key: every record has some.
    """
    return b"".join((head, CHECK, _checksum(head), _CLOSE))


def _checksum(head: bytes) -> bytes:
    """The CRC-32 of ``head`` as 6 base64 characters (no JSON string needs them escaped)."""
    return b2a_base64(zlib.crc32(head).to_bytes(4, "big"), newline=False)[:6]


# -- reading ------------------------------------------------------------------------------


def parse_line(data: bytes, start: int, end: int) -> tuple[Record, bool]:
    """Return the record of the line ``data[start:end]`` (without its newline).

    An event line without ``"branch"`` gets ``"branch": "main"``, and one with a checksum
    and without ``"type"`` gets ``"type": "superstep_completed"``; other keys are left for
    the caller to check.

    Returns:
        The record, and whether the line has a checksum (which was found right).

    Raises:
        LineError: The line is not one JSON object, or its checksum is wrong.
    """
    sealed = end - start > SEAL and data.startswith(CHECK, end - SEAL)
    if sealed:
        head = data[start : end - SEAL]
        found = data[end - SEAL + len(CHECK) : end]
        if found != (expected := _checksum(head)) + b'"}':
            what = (
                f"its checksum does not match its bytes (expected {expected!r}, found "
                f"{found[:6]!r})"
                if found.endswith(b'"}')
                else f"its checksum is not followed by the end of the line (found {found!r})"
            )
            raise LineError(f"{what}: a byte of it was changed since it was written")
        text = head + b"}"
    else:
        text = data[start:end]
    try:
        record = orjson.loads(text)
    except orjson.JSONDecodeError as e:
        raise LineError(f"expected one JSON object per line, found invalid JSON ({e})") from None
    if not isinstance(record, dict):
        found_type = type(record).__name__
        raise LineError(f"expected one JSON object per line, found a JSON {found_type}")
    kind = record.get("type")
    if not (type(kind) is str and kind in FILE_TYPES):  # a damaged type may be a list
        if "branch" not in record:
            record["branch"] = MAIN
        if sealed and "type" not in record:
            record["type"] = IMPLIED_TYPE
    return record, sealed


def split(
    data: bytes, line: int, sealed: bool = False
) -> Iterator[tuple[Record, int, int, int, bool, bool]]:
    """Yield the lines of the whole appends at the start of ``data``, parsed one by one.

    Each item is ``(record, start, end, line, last, checked)``: the record of
    ``data[start:end]`` (``end`` is past the newline), its line number, whether it is the
    last line of its append, so that everything up to ``end`` is whole, and whether it has
    a checksum. A batch line is not yielded: its lines are. The items stop before an append
    that ``data`` does not hold all of.

    Args:
        data: Bytes of the file from the start of a line.
        line: The number of ``data``'s first line; line 1 is the header, never a batch.
        sealed: A line before ``data`` has a checksum, so every line of ``data`` must too.

    Raises:
        HeaderError: Line 1 is not a header of this format and version.
        LineError: A line is malformed; its ``line`` and ``start`` say which.
    """
    used = 0
    while (nl := data.find(b"\n", used)) >= 0:
        if line == 1:
            record = _parse_at(data, used, nl, line, False)[0]
            if problem := header_problem(record):
                raise HeaderError(problem, line, used)
            yield record, used, nl + 1, line, True, False
            used, line = nl + 1, line + 1
            continue
        record, checked = _parse_at(data, used, nl, line, sealed)
        sealed = sealed or checked
        if record.get("type") != "batch":
            yield record, used, nl + 1, line, True, checked
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
            record, checked = _parse_at(data, start, end - 1, line, sealed)
            yield record, start, end, line, end == stop, checked
            start, line = end, line + 1
        used = stop


def _parse_at(data: bytes, start: int, end: int, line: int, sealed: bool) -> tuple[Record, bool]:
    try:
        record, checked = parse_line(data, start, end)
        if sealed and not checked:
            raise LineError(_UNSEALED)
    except LineError as e:
        raise LineError(str(e), line, start) from None
    return record, checked


_UNSEALED = (
    'expected a checksum at its end (\', "c":"..."}\'), as the lines before it have, '
    "found none: the line was changed since it was written"
)


def decode_event(line: bytes, sealed: bool = True) -> Record:
    """Return the event record of a line that was indexed as one.

    Args:
        line: The line, with or without its newline.
        sealed: The line must have a checksum (it was indexed with one).

    Raises:
        LineError: The line changed since it was indexed (its ``line`` is 0: the caller
            knows where it is).
    """
    end = len(line) - 1 if line.endswith(b"\n") else len(line)
    record, checked = parse_line(line, 0, end)
    if sealed and not checked:
        raise LineError(_UNSEALED)
    return record


def decode_events(
    lines: Sequence[bytes], sealed: Sequence[bool], verify: bool = True
) -> list[Record]:
    """Return the event records of lines that were indexed as events.

    The same as ``decode_event`` on each line, written as one loop: a history read decodes
    every line of a thread, and the calls per line were a third of its cost. A line that
    does not pass goes through ``decode_event``, which says what is wrong with it.

    Args:
        lines: The lines, each with its newline.
        sealed: For each line, whether it must have a checksum.
        verify: Check each checksum again; ``False`` when the caller knows the lines are
            the bytes whose checksums were checked when they were indexed.

    Raises:
        LineError: A line changed since it was indexed; its ``line`` is its index in
            ``lines``.
    """
    if not verify and all(sealed):
        return _trusted_events(lines)
    out: list[Record] = []
    append, loads, crc, b64 = out.append, orjson.loads, zlib.crc32, b2a_base64
    check, seal, mark = CHECK, SEAL + 1, len(CHECK)
    for index, line in enumerate(lines):
        cut = len(line) - seal
        record, implied = None, False
        try:
            if sealed[index] or line.startswith(check, cut):
                head = line[:cut]
                if line[cut : cut + mark] == check and (
                    not verify or line[cut + mark : -3] == b64(crc(head).to_bytes(4, "big"))[:6]
                ):
                    record, implied = loads(head + b"}"), True
            else:
                record = loads(line)
        except orjson.JSONDecodeError:
            record = None
        if type(record) is not dict or _file_type(record.get("type")):
            try:
                record, implied = decode_event(line, sealed[index]), False
            except LineError as e:
                e.line = index
                raise
        # The keys a line leaves out, added in the order parse_line adds them.
        if "branch" not in record:
            record["branch"] = MAIN
        if implied and "type" not in record:
            record["type"] = IMPLIED_TYPE
        append(record)
    return out


def _trusted_events(lines: Sequence[bytes]) -> list[Record]:
    """``decode_events`` of lines known to be the checked lines they were when indexed.

    Each line ends with its checksum and newline, so the record is the line without them.
    """
    out: list[Record] = []
    append, loads, seal = out.append, orjson.loads, SEAL + 1
    for line in lines:
        record = loads(line[: len(line) - seal] + b"}")
        if "branch" not in record:
            record["branch"] = MAIN
        if "type" not in record:
            record["type"] = IMPLIED_TYPE
        append(record)
    return out


def _file_type(kind: object) -> bool:
    """Tell whether a line's ``type`` is one of the file's own (a damaged one may be a list)."""
    return type(kind) is str and kind in FILE_TYPES


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
    if version > READS:
        return (
            f"is a history of format version {version!r}; this nodestep reads versions up "
            f"to {READS}. Upgrade nodestep to open it."
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
