"""The file store's errors about its file as a whole: what went wrong, and the fix.

Errors about one line of the file are ``_jsonl.LineError.for_file``'s.
"""

from __future__ import annotations

import errno
from pathlib import Path

from nodestep._errors import StateStoreError

__all__ = [
    "TAIL_LEFT",
    "no_header_yet",
    "os_error",
    "read_only",
    "shorter_than_indexed",
    "stopped_after_fsync",
]

TAIL_LEFT = (
    "%s: the last %d bytes are not a whole append (a write in progress, or one that did not "
    "finish); a read-only store leaves them and reads the history before them"
)
"""The warning of a read-only store that finds a torn tail: the path, and its size."""

# A file or a file system this process may not write.
_CANNOT_WRITE = frozenset({errno.EACCES, errno.EPERM, errno.EROFS})


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


def read_only(path: Path, action: str, thread_id: str) -> StateStoreError:
    """Return the error for a write (``action``, e.g. ``"append to"``) to a read-only store."""
    return StateStoreError(
        f"Cannot {action} thread {thread_id!r}: the store of {path} was opened with "
        f"read_only=True, and only reads. Nothing was stored; open the file with "
        f"FilesystemStateStore(path) to write to it.",
        path=str(path),
    )


def no_header_yet(path: Path, size: int) -> StateStoreError:
    """Return the error for a read-only store of a file without a whole header line."""
    return StateStoreError(
        f"{path} has no whole header line yet ({size} bytes): a writer is creating it, or "
        f"died doing so, and a read-only store does not write one. Open it without "
        f"read_only=True, or wait for the writer.",
        path=str(path),
        line=1,
        offset=0,
    )


def shorter_than_indexed(path: Path, error: EOFError) -> StateStoreError:
    """Return the error for a file cut below what was indexed of it."""
    return StateStoreError(
        f"{path} is shorter than the records indexed in it ({error}): another program cut "
        f"it. Restore it from a backup.",
        path=str(path),
    )


def stopped_after_fsync(path: Path, error: OSError) -> str:
    """Return why a store stopped after a failed flush; every later call raises it."""
    what = f"{error.strerror or error} (errno {error.errno})"
    return (
        f"The store of {path} stopped after fsync failed ({what}); the appends that waited "
        f"for that flush were not stored (each of them raised this error, and what they "
        f"wrote was cut off again where no other process wrote after it). Check the disk, "
        f"then create a new FilesystemStateStore for the file: it reads the file again."
    )
