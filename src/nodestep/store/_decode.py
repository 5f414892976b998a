"""Decode the event lines of one read of a history file, many at a time.

``_jsonl.decode_event`` decodes one line and says exactly what is wrong with a bad one; a
history read decodes every line of a thread, where the calls per line were a third of its
cost. These loops take the common lines themselves and hand any other line to it.
"""

from __future__ import annotations

import zlib
from binascii import b2a_base64
from collections.abc import Sequence

import orjson

from nodestep.store._jsonl import (
    CHECK,
    FILE_TYPES,
    IMPLIED_TYPE,
    MAIN,
    SEAL,
    LineError,
    decode_event,
)
from nodestep.store.base import Record

__all__ = ["decode_events"]


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
