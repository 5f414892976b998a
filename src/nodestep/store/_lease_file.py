"""The file store's leases: kept in ``<path>.leases``, next to the history file.

See ``nodestep.store._leases`` for what a lease is and why an append needs no call for it.
"""

from __future__ import annotations

import os
import time
from pathlib import Path
from typing import Any

import orjson

from nodestep._errors import StateStoreError
from nodestep.store._leases import Lease, LeaseTable
from nodestep.store._locking import Locked

__all__ = ["FileLeasing"]


class FileLeasing:
    """The lease methods of ``FilesystemStateStore``: leases in ``<path>.leases``.

    Also its ``find_request``, answered from the index of the history file.

    The file holds one JSON object with the current leases. It is read and replaced (a new
    file renamed over it) only under the history file's exclusive lock, so processes never
    change it at once, and a reader never sees half of it. A process killed while it holds
    a lease leaves it in the file, until it expires. The file is never flushed to the disk,
    also not with ``fsync=True``: a lease only matters while its holder lives, and after a
    power loss no holder does (a lease found then belongs to a process that is gone, and
    expires). Flushing it cost two fsyncs per run.
    """

    path: Path
    fsync: bool

    def _check_writable(self, action: str, thread_id: str) -> None:
        raise NotImplementedError

    @property
    def lease_path(self) -> Path:
        """The file that holds the leases of this history file's threads."""
        return self.path.with_name(self.path.name + ".leases")

    async def acquire_lease(
        self, thread_id: str, branch_id: str, holder: str, *, ttl: float
    ) -> Lease:
        """Take the branch for ``holder`` for ``ttl`` seconds; see ``StateStore``.

        Raises:
            ThreadBusyError: another holder's lease is current; nothing changed.
        """
        self._check_writable("take a lease on", thread_id)
        async with Locked(self, exclusive=True):  # type: ignore[arg-type]
            table = self._read_leases()
            now = time.time()
            lease = table.acquire(thread_id, branch_id, holder, ttl, now)
            self._write_leases(table, now)
            return lease

    async def renew_lease(self, lease: Lease) -> Lease:
        """Extend ``lease`` by its ttl; see ``StateStore``.

        Raises:
            ThreadBusyError: the lease was lost (``lost``).
        """
        async with Locked(self, exclusive=True):  # type: ignore[arg-type]
            table = self._read_leases()
            now = time.time()
            renewed = table.renew(lease, now)
            self._write_leases(table, now)
            return renewed

    async def release_lease(self, lease: Lease) -> None:
        """Give the branch back, if ``lease`` still holds it; see ``StateStore``."""
        async with Locked(self, exclusive=True):  # type: ignore[arg-type]
            table = self._read_leases()
            if table.release(lease):
                self._write_leases(table, time.time())

    async def find_request(self, thread_id: str, branch_id: str, key: str) -> int | None:
        """Return the ``seq`` of the branch's ``run_started`` record with request key ``key``.

        From the index, which indexing the file's records keeps: no read of the history.
        """
        async with Locked(self, exclusive=False):  # type: ignore[arg-type]
            # The store's IndexedLog, which this module cannot import: it imports the base.
            log: Any = vars(self)["_log"]
            found: int | None = log.records.find_request(thread_id, branch_id, key)
            return found

    def _read_leases(self) -> LeaseTable:
        """Return the current leases; the caller holds the history file's exclusive lock.

        The table this store wrote or read last is kept, with the token its file starts
        with: when the file still starts with that token, no one changed it since, and the
        kept table is the file's. Each write sets a new random token. A read of 24 bytes
        instead of the whole table: a table of a hundred leases took 400 µs to parse.
        """
        path = self._lease_file()
        cached = vars(self).get("_lease_cache")
        try:
            fd = os.open(path, os.O_RDONLY)
        except FileNotFoundError:
            return LeaseTable()
        except OSError as e:
            raise self._lease_error("read", e) from e
        try:
            if cached is not None and os.pread(fd, _TOKEN_END, 0) == cached[0]:
                table: LeaseTable = cached[1]
                return table
            data = _read_all(fd)
        except OSError as e:
            raise self._lease_error("read", e) from e
        finally:
            os.close(fd)
        # The table is the first line: a longer table written before may follow it, left
        # by a writer that was killed between its write and the cut that removes the rest.
        table = _parse_table(data.split(b"\n", 1)[0], self.path, path)
        vars(self)["_lease_cache"] = (data[:_TOKEN_END], table)
        return table

    def _write_leases(self, table: LeaseTable, now: float) -> None:
        """Write ``table`` over the lease file, in place; the caller holds the exclusive lock.

        In place rather than a new file renamed over it: a rename cost 175 µs here, twice
        a run. A reader holds the same lock, so it never sees half a write.
        """
        table.prune(now)
        path = self._lease_file()
        token = b'{"gen":"' + os.urandom(8).hex().encode() + b'"'
        leases = b"[" + b",".join(table.encoded.values()) + b"]"
        data = token + b',"leases":' + leases + b"}\n"
        vars(self)["_lease_cache"] = None  # until the write is whole
        try:
            fd = os.open(path, os.O_WRONLY | os.O_CREAT, 0o644)
            try:
                view, offset = memoryview(data), 0
                while offset < len(data):
                    offset += os.pwrite(fd, view[offset:], offset)
                os.ftruncate(fd, len(data))
            finally:
                os.close(fd)
        except OSError as e:
            raise self._lease_error("write", e) from e
        vars(self)["_lease_cache"] = (token, table)

    def _lease_file(self) -> str:
        # The path as a string, made once: pathlib cost 15 µs a lease call here.
        found: str | None = vars(self).get("_lease_file_name")
        if found is None:
            found = vars(self)["_lease_file_name"] = str(self.lease_path)
        return found

    def _lease_error(self, action: str, error: OSError) -> StateStoreError:
        path = self.lease_path
        fix = (
            "check that this process may read and write that file"
            if action == "read"
            else "free disk space or check that this process may write that directory"
        )
        return StateStoreError(
            f"Cannot {action} the leases of {self.path} in {path}: {error.strerror or error} "
            f"(errno {error.errno}). Nothing of the history was changed; {fix}, and try again.",
            path=str(path),
        )


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
    table = LeaseTable()
    try:
        for item in orjson.loads(line)["leases"]:
            lease = Lease.from_json(item)
            table._set((lease.thread_id, lease.branch_id), lease)
    except (orjson.JSONDecodeError, KeyError, TypeError, ValueError) as e:
        raise StateStoreError(
            f"{path}, which holds which run writes each thread of {history}, is "
            f"damaged ({e}). Delete it once no run of those threads is alive; nothing "
            f"of the history is in it.",
            path=str(path),
        ) from e
    return table
