"""``InMemoryMemoryStore``: items in a dict of this process; the verified fake.

Values are copied in and out (through their JSON text), so a caller that changes a dict
it stored, or one it got back, changes nothing stored, as with the other back ends.
"""

from __future__ import annotations

import json
import threading
from dataclasses import replace
from typing import Any

from nodestep._memory.contract import MemoryStore
from nodestep._memory.items import Row

__all__ = ["InMemoryMemoryStore"]


class InMemoryMemoryStore(MemoryStore):
    """Keep memory items in this process; gone when it ends. Safe across threads.

    Args:
        **options: ``MemoryStore``'s options (``ttl``, ``refresh_ttl``, ``embeddings``,
            ``index_fields``, ``clock``).
    """

    def __init__(self, **options: Any) -> None:
        super().__init__(**options)
        self._lock = threading.Lock()
        self._items: dict[tuple[tuple[str, ...], str], Row] = {}

    def __repr__(self) -> str:
        return "InMemoryMemoryStore()"

    def _read(self, namespace: tuple[str, ...], key: str) -> Row | None:
        with self._lock:
            row = self._items.get((namespace, key))
        return None if row is None else _copy(row)

    def _upsert(self, row: Row) -> None:
        row = _copy(row)
        with self._lock:
            old = self._items.get((row.namespace, row.key))
            if old is not None and old.live(row.updated_at):
                row.created_at = old.created_at
            self._items[(row.namespace, row.key)] = row

    def _remove(self, namespace: tuple[str, ...], key: str) -> bool:
        with self._lock:
            return self._items.pop((namespace, key), None) is not None

    def _rows(self, prefix: tuple[str, ...]) -> list[Row]:
        n = len(prefix)
        with self._lock:
            rows = [r for (ns, _), r in self._items.items() if ns[:n] == prefix]
        return [_copy(r) for r in rows]

    def _touch(self, namespace: tuple[str, ...], key: str, expires_at: float) -> None:
        with self._lock:
            row = self._items.get((namespace, key))
            if row is not None:
                row.expires_at = expires_at

    def _sweep(self, now: float) -> int:
        with self._lock:
            gone = [k for k, r in self._items.items() if not r.live(now)]
            for k in gone:
                del self._items[k]
        return len(gone)


def _copy(row: Row) -> Row:
    return replace(row, value=json.loads(json.dumps(row.value)))
