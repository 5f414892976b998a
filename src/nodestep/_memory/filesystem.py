"""``FilesystemMemoryStore``: memory items as files in a folder, one file per item.

The layout mirrors the namespaces: ``("users", "u-1")``'s item ``"prefs"`` is the file
``users/u-1/prefs.item`` under the store's folder (each label and key percent-encoded, so
any text is a safe file name). A write goes to a temporary file beside it, then replaces
it with ``os.replace``, which is atomic: a reader, or a process killed mid-write, finds the
old file or the new one, never a torn one. Writes of all processes take the folder's lock
(``flock`` on ``.lock``) so that a write that keeps an item's ``created_at`` reads what it
replaces without another writer in between; reads take no lock.
"""

from __future__ import annotations

import contextlib
import fcntl
import json
import os
import uuid
from collections.abc import Iterator
from pathlib import Path
from typing import Any
from urllib.parse import quote

from nodestep._errors import GraphConfigError, StateStoreError
from nodestep._memory.contract import MemoryStore
from nodestep._memory.items import Row

__all__ = ["FilesystemMemoryStore"]

_SUFFIX = ".item"
_MAX_NAME = 250  # bytes; most file systems allow 255 in one name


class FilesystemMemoryStore(MemoryStore):
    """Keep memory items as files under a folder, shared by a machine's processes.

    Args:
        path: The folder; created if missing.
        fsync: Flush each write to the disk before it returns, so it survives a power cut
            (a crash of the process never loses a write that returned, with or without).
        **options: ``MemoryStore``'s options (``ttl``, ``refresh_ttl``, ``embeddings``,
            ``index_fields``, ``clock``).

    Raises:
        StateStoreError: The folder cannot be made.
    """

    def __init__(self, path: str | os.PathLike[str], *, fsync: bool = False, **options: Any):
        super().__init__(**options)
        self.path = Path(os.path.abspath(path))
        self.fsync = fsync
        try:
            self.path.mkdir(parents=True, exist_ok=True)
        except OSError as e:
            raise self._error("make", self.path, e) from e

    def __repr__(self) -> str:
        return f"FilesystemMemoryStore({str(self.path)!r})"

    def _error(self, action: str, path: Path, error: Exception) -> StateStoreError:
        return StateStoreError(
            f"Cannot {action} {path} of the memory store {self.path}: {error}. Check that "
            f"the folder exists and nodestep may read and write it.",
            path=str(path),
        )

    def _folder(self, namespace: tuple[str, ...]) -> Path:
        return self.path.joinpath(*(_name(label, "label") for label in namespace))

    def _file(self, namespace: tuple[str, ...], key: str) -> Path:
        return self._folder(namespace) / (_name(key, "key", len(_SUFFIX)) + _SUFFIX)

    @contextlib.contextmanager
    def _locked(self) -> Iterator[None]:
        lock = self.path / ".lock"
        try:
            fd = os.open(lock, os.O_RDWR | os.O_CREAT, 0o644)
        except OSError as e:
            raise self._error("open the lock", lock, e) from e
        try:
            fcntl.flock(fd, fcntl.LOCK_EX)
            yield
        finally:
            os.close(fd)  # closing the only descriptor releases the lock

    def _load(self, file: Path) -> Row | None:
        try:
            data = json.loads(file.read_bytes())
        except FileNotFoundError:
            return None
        except (OSError, ValueError) as e:
            raise self._error("read", file, e) from e
        try:
            return Row(
                tuple(data["namespace"]), data["key"], data["value"], data["created_at"],
                data["updated_at"], data["ttl"], data["expires_at"], data["vectors"],
            )  # fmt: skip
        except (KeyError, TypeError) as e:
            raise self._error("read", file, ValueError(f"not an item: {e!r}")) from e

    def _save(self, file: Path, row: Row) -> None:
        data = {
            "namespace": list(row.namespace), "key": row.key, "value": row.value,
            "created_at": row.created_at, "updated_at": row.updated_at, "ttl": row.ttl,
            "expires_at": row.expires_at, "vectors": row.vectors,
        }  # fmt: skip
        text = json.dumps(data, sort_keys=True).encode()
        temp = file.with_name(f".{uuid.uuid4().hex}.tmp")
        try:
            file.parent.mkdir(parents=True, exist_ok=True)
            with open(temp, "wb") as out:
                out.write(text)
                if self.fsync:
                    out.flush()
                    os.fsync(out.fileno())
            os.replace(temp, file)
            if self.fsync:
                _sync_folder(file.parent)
        except OSError as e:
            with contextlib.suppress(OSError):
                temp.unlink()
            raise self._error("write", file, e) from e

    def _read(self, namespace: tuple[str, ...], key: str) -> Row | None:
        return self._load(self._file(namespace, key))

    def _upsert(self, row: Row) -> None:
        file = self._file(row.namespace, row.key)
        with self._locked():
            old = self._load(file)
            if old is not None and old.live(row.updated_at):
                row.created_at = old.created_at
            self._save(file, row)

    def _remove(self, namespace: tuple[str, ...], key: str) -> bool:
        file = self._file(namespace, key)
        with self._locked():
            try:
                file.unlink()
            except FileNotFoundError:
                return False
            except OSError as e:
                raise self._error("delete", file, e) from e
        return True

    def _files(self, prefix: tuple[str, ...]) -> Iterator[Path]:
        for folder, _, names in os.walk(self._folder(prefix)):
            for name in names:
                if name.endswith(_SUFFIX):
                    yield Path(folder, name)

    def _rows(self, prefix: tuple[str, ...]) -> list[Row]:
        rows = (self._load(file) for file in self._files(prefix))
        return [row for row in rows if row is not None]

    def _touch(self, namespace: tuple[str, ...], key: str, expires_at: float) -> None:
        file = self._file(namespace, key)
        with self._locked():
            row = self._load(file)
            if row is not None:
                row.expires_at = expires_at
                self._save(file, row)

    def _sweep(self, now: float) -> int:
        gone = 0
        with self._locked():
            for file in list(self._files(())):
                row = self._load(file)
                if row is not None and not row.live(now):
                    file.unlink()
                    gone += 1
        return gone


def _name(text: str, what: str, reserve: int = 0) -> str:
    """Return ``text`` as a file name: percent-encoded, so '/' and the like are safe."""
    name = quote(text, safe="")
    if len(name.encode()) + reserve > _MAX_NAME:
        raise GraphConfigError(
            f"The memory {what} {text[:40]!r}... is {len(name)} bytes as a file name, longer "
            f"than a file store allows ({_MAX_NAME - reserve}); use a shorter {what}, or an "
            f"SQLite or PostgreSQL memory store."
        )
    return name


def _sync_folder(folder: Path) -> None:
    fd = os.open(folder, os.O_RDONLY)
    try:
        os.fsync(fd)
    finally:
        os.close(fd)
