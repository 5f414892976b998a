"""The file store's leases: kept in ``<path>.leases``, next to the history file.

See ``nodestep.store._leases`` for what a lease is and why an append needs no call for it.
"""

from __future__ import annotations

import os
import time
from pathlib import Path

import orjson

from nodestep._errors import StateStoreError
from nodestep.store._leases import Lease, LeaseTable

__all__ = ["LeaseFile"]


class LeaseFile:
    """The current leases of a history file's threads, in ``<path>.leases``.

    The file holds one JSON object with the current leases. It is read and changed only
    under the history file's exclusive lock, which the caller of every method holds, so
    processes never change it at once, and a reader never sees half of it. A process
    killed while it holds a lease leaves it in the file, until it expires. The file is
    never flushed to the disk, also not with ``fsync=True``: a lease only matters while its
    holder lives, and after a power loss no holder does (a lease found then belongs to a
    process that is gone, and expires). Flushing it cost two fsyncs per run.

    Args:
        history: The history file whose leases these are.

    Attributes:
        path: The lease file.
    """

    def __init__(self, history: Path) -> None:
        self.history = history
        self.path = history.with_name(history.name + ".leases")
        self._name = str(self.path)  # made once: pathlib cost 15 µs a lease call here
        # The table this store wrote or read last, with the token its file started with.
        self._cache: tuple[bytes, LeaseTable] | None = None
        # The file's size when this store last wrote or read all of it (-1: not known).
        self._size = -1

    def acquire(self, thread_id: str, branch_id: str, holder: str, ttl: float) -> Lease:
        """Take the branch for ``holder`` for ``ttl`` seconds, unless another lease holds it.

        Raises:
            ThreadBusyError: another holder's lease is current; nothing changed.
            StateStoreError: the lease file cannot be read or written, or is damaged.
        """
        table = self._read()
        now = time.time()
        lease = table.acquire(thread_id, branch_id, holder, ttl, now)
        self._write(table, now)
        return lease

    def renew(self, lease: Lease) -> Lease:
        """Extend ``lease`` by its ttl from now; return the renewed lease.

        Raises:
            ThreadBusyError: the lease was lost (``lost``).
            StateStoreError: the lease file cannot be read or written, or is damaged.
        """
        table = self._read()
        now = time.time()
        renewed = table.renew(lease, now)
        self._write(table, now)
        return renewed

    def release(self, lease: Lease) -> None:
        """Drop ``lease`` if it still holds its branch; else change nothing.

        Raises:
            StateStoreError: the lease file cannot be read or written, or is damaged.
        """
        table = self._read()
        if table.release(lease):
            self._write(table, time.time())

    def _read(self) -> LeaseTable:
        """Return the current leases.

        The table this store wrote or read last is kept, with the token its file starts
        with: when the file still starts with that token, no one changed it since, and the
        kept table is the file's. Each write sets a new random token. A read of 24 bytes
        instead of the whole table: a table of a hundred leases took 400 µs to parse.
        """
        cached = self._cache
        try:
            fd = os.open(self._name, os.O_RDONLY)
        except FileNotFoundError:
            return LeaseTable(encoded=True)
        except OSError as e:
            raise self._error("read", e) from e
        try:
            if cached is not None and os.pread(fd, _TOKEN_END, 0) == cached[0]:
                return cached[1]
            data = _read_all(fd)
            self._size = len(data)
        except OSError as e:
            raise self._error("read", e) from e
        finally:
            os.close(fd)
        # The table is the first line: a longer table written before may follow it, left
        # by a writer that was killed between its write and the cut that removes the rest.
        table = _parse_table(data.split(b"\n", 1)[0], self.history, self._name)
        self._cache = (data[:_TOKEN_END], table)
        return table

    def _write(self, table: LeaseTable, now: float) -> None:
        """Write ``table`` over the lease file, in place.

        In place rather than a new file renamed over it: a rename cost 175 µs here, twice
        a run. A reader holds the same lock, so it never sees half a write. The bytes of a
        longer table written before may stay after the new one's line, which readers skip:
        the file is cut only once they are more than ``_SLACK`` bytes, since a cut changes
        the file's size on the disk, which took longer than the write itself.
        """
        table.prune(now)
        token = b'{"gen":"' + os.urandom(8).hex().encode() + b'"'
        leases = b"[" + b",".join(table.encoded.values()) + b"]"
        data = token + b',"leases":' + leases + b"}\n"
        self._cache = None  # until the write is whole
        size, self._size = self._size, -1
        try:
            fd = os.open(self._name, os.O_WRONLY | os.O_CREAT, 0o644)
            try:
                view, offset = memoryview(data), 0
                while offset < len(data):
                    offset += os.pwrite(fd, view[offset:], offset)
                if size < 0 or size - len(data) > _SLACK:  # -1: not known
                    os.ftruncate(fd, len(data))
                    size = len(data)
            finally:
                os.close(fd)
        except OSError as e:
            raise self._error("write", e) from e
        self._cache = (token, table)
        self._size = max(size, len(data))

    def _error(self, action: str, error: OSError) -> StateStoreError:
        fix = (
            "check that this process may read and write that file"
            if action == "read"
            else "free disk space or check that this process may write that directory"
        )
        return StateStoreError(
            f"Cannot {action} the leases of {self.history} in {self.path}: "
            f"{error.strerror or error} (errno {error.errno}). Nothing of the history was "
            f"changed; {fix}, and try again.",
            path=str(self.path),
        )


_SLACK = 4096
"""Bytes of an older, longer table left after the lease file's line before it is cut."""

_TOKEN_END = len(b'{"gen":"') + 16 + 1
"""The bytes of the lease file that name its last write: ``{"gen":"<16 hex>"``."""


def _read_all(fd: int) -> bytes:
    size = os.fstat(fd).st_size
    chunks, offset = [], 0
    while offset < size:
        chunk = os.pread(fd, size - offset, offset)
        if not chunk:
            break
        chunks.append(chunk)
        offset += len(chunk)
    return b"".join(chunks)


def _parse_table(line: bytes, history: Path, path: str) -> LeaseTable:
    table = LeaseTable(encoded=True)
    try:
        for item in orjson.loads(line)["leases"]:
            table.put(Lease.from_json(item))
    except (orjson.JSONDecodeError, KeyError, TypeError, ValueError) as e:
        raise StateStoreError(
            f"{path}, which holds which run writes each thread of {history}, is "
            f"damaged ({e}). Delete it once no run of those threads is alive; nothing "
            f"of the history is in it.",
            path=str(path),
        ) from e
    return table
