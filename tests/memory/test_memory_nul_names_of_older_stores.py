"""Items an older nodestep stored under a key or label holding NUL can be read and deleted.

Before keys and labels with a NUL character were refused, the SQLite and file stores kept
them (PostgreSQL text never could). A search finds such an item; ``get`` and ``delete``
take its key too, so that it can be moved to a key without the NUL. Writing one is still
refused. Each store file here is written the old way, byte by byte.
"""

from __future__ import annotations

import json
import sqlite3
import zlib
from pathlib import Path

import pytest

from nodestep import GraphConfigError
from nodestep.memory import FilesystemMemoryStore, MemoryStore, SQLiteMemoryStore

OLD_NS = ("users", "a\x00n")
OLD_KEY = "pre\x00fs"


def _old_sqlite(path: Path) -> MemoryStore:
    SQLiteMemoryStore(path).close()  # the table, as every version makes it
    with sqlite3.connect(path) as conn:
        conn.execute(
            "INSERT INTO nodestep_memory (ns, key, value, created, updated) VALUES (?, ?, ?, ?, ?)",
            (".".join(OLD_NS), OLD_KEY, '{"lang": "fr"}', 1.0, 1.0),
        )
    conn.close()
    return SQLiteMemoryStore(path)


def _old_file(path: Path) -> MemoryStore:
    entry = {
        "op": "put", "ns": list(OLD_NS), "key": OLD_KEY, "value": {"lang": "fr"},
        "created_at": 1.0, "updated_at": 1.0, "ttl": None, "expires_at": None, "vectors": None,
    }  # fmt: skip
    data = json.dumps(entry).encode()
    assert b"\\u0000" in data  # the case: JSON's escape of NUL, in the key and the label
    path.write_bytes(b"%08x %s\n" % (zlib.crc32(data), data))
    return FilesystemMemoryStore(path)


@pytest.fixture(params=["sqlite", "file"])
def old_store(request: pytest.FixtureRequest, tmp_path: Path) -> MemoryStore:
    opened = {"sqlite": _old_sqlite, "file": _old_file}[request.param]
    return opened(tmp_path / "memory")


def test_an_item_found_by_search_can_be_read_moved_and_deleted(old_store: MemoryStore) -> None:
    [found] = old_store.search_sync(("users",))
    assert (found.namespace, found.key, found.value) == (OLD_NS, OLD_KEY, {"lang": "fr"})
    item = old_store.get_sync(found.namespace, found.key)
    assert item is not None and item.value == {"lang": "fr"}
    assert old_store.list_namespaces_sync(prefix=("users", "a\x00n")) == [OLD_NS]
    old_store.put_sync(("users", "ann"), "prefs", item.value)  # the move
    assert old_store.delete_sync(found.namespace, found.key) is True
    assert old_store.get_sync(OLD_NS, OLD_KEY) is None
    assert [i.key for i in old_store.search_sync(("users",))] == ["prefs"]
    old_store.close()


def test_writing_under_such_a_key_is_still_refused(old_store: MemoryStore) -> None:
    with pytest.raises(GraphConfigError, match=r"key 'pre\\x00fs' holds the NUL character"):
        old_store.put_sync(("users", "ann"), OLD_KEY, {"lang": "de"})
    with pytest.raises(GraphConfigError, match=r"label 'a\\x00n', which holds the NUL"):
        old_store.put_sync(OLD_NS, "prefs", {"lang": "de"})
    item = old_store.get_sync(OLD_NS, OLD_KEY)
    assert item is not None and item.value == {"lang": "fr"}
    old_store.close()
