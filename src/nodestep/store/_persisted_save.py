"""Writing the file store's persisted index (``_persisted`` describes it and reads it)."""

from __future__ import annotations

import os
import secrets
import zlib
from collections import defaultdict
from contextlib import suppress
from pathlib import Path
from typing import Any

import orjson

from nodestep._errors import StateStoreError
from nodestep.store import _io
from nodestep.store._index import RecordIndex
from nodestep.store._persisted import (
    FORMAT,
    HEAD,
    SLOT,
    VERSION,
    Covered,
    LazyRecordIndex,
    bucket_of,
    logger,
    prints,
    sidecar,
)

__all__ = ["save"]


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
    for event_id, (thread, branch, seq) in index.ids.items():
        parts[thread]["i"].append([event_id, branch, seq])
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
        st = _io.fstat(fd)
        now = _io.stat(path)
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
            _io.pwrite(out, line.ljust(HEAD - 1) + b"\n", 0)
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
    pending = index.pending() if isinstance(index, LazyRecordIndex) else {}
    count = max(1, len(infos) // 16)
    buckets: list[dict[str, list[Any]]] = [{} for _ in range(count)]
    pos, chunk = HEAD, []
    for thread, info in infos.items():
        lazy = isinstance(index, LazyRecordIndex) and thread in pending
        blob = index.section(thread) if lazy else orjson.dumps(parts[thread])  # type: ignore[attr-defined]
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
    _io.pwrite(out, data, HEAD)
    return [pos, count]
