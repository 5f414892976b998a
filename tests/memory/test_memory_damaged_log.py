"""A damaged line of the file memory store's log is reported with the fix that applies.

The bytes on the disk changed: the message says so, where, and that the file is to be
restored or moved aside, never that the folder is missing or not writable.
"""

from __future__ import annotations

from pathlib import Path

import pytest

from nodestep import StateStoreError
from nodestep.memory import FilesystemMemoryStore

NS = ("users", "u-1")


def test_a_damaged_line_says_the_file_is_damaged_and_how_to_recover(tmp_path: Path) -> None:
    path = tmp_path / "memory.jsonl"
    store = FilesystemMemoryStore(path)
    store.put_sync(NS, "a", {"amount": 100})
    store.put_sync(NS, "b", {"amount": 200})
    store.close()
    data = path.read_bytes()
    path.write_bytes(data.replace(b'"amount":200', b'"amount":900'))
    with pytest.raises(StateStoreError) as caught:
        FilesystemMemoryStore(path).get_sync(NS, "a")
    message = str(caught.value)
    assert message.startswith(f"The memory store {path} is damaged: line 2 at byte ")
    assert "checksum does not match" in message
    assert message.endswith(
        "A line changed on the disk is never taken as data: restore the file from a "
        "backup, or move it aside to start an empty store."
    )
    assert "Check that the folder exists" not in message
    assert (caught.value.line, caught.value.offset) == (2, data.index(b"\n") + 1)
    assert path.read_bytes() == data.replace(b'"amount":200', b'"amount":900')
