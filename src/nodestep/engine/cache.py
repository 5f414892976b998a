"""A graph's cache of the latest position of the threads it used, checked against the store.

Loading a thread reads its last checkpoint and folds up to 50 records after it; a graph that
reads or runs the same thread again would redo that every time. The cache keeps each
thread's latest position together with the sequence number it belongs to, and a load uses it
only when the store's last sequence number is still that one, so a record appended by any
other process or store object makes it miss. Entries are kept as JSON bytes: a load always
gets fresh objects, so nothing a caller changes can reach the cache.
"""

from __future__ import annotations

import threading
from collections import OrderedDict
from typing import Any

import orjson

from nodestep.engine.records import apply_record, checkpoint_body
from nodestep.state.schema import StateSchema
from nodestep.store.base import StateStore
from nodestep.superstep.position import Position

__all__ = ["PositionCache"]


class PositionCache:
    """The latest positions of recently used thread branches, least recently used out first."""

    def __init__(self, size: int = 256) -> None:
        self.size = size
        self._entries: OrderedDict[tuple[int, str, str], tuple[StateStore, int, bytes]] = (
            OrderedDict()
        )
        # Several threads may run one graph (each invoke() on its own loop).
        self._lock = threading.Lock()

    def get(
        self, store: StateStore, schema: StateSchema, thread_id: str, branch_id: str, seq: int
    ) -> Position | None:
        """Return the cached position if it is the one after record ``seq``, else ``None``."""
        key = (id(store), thread_id, branch_id)
        with self._lock:
            entry = self._entries.get(key)
            if entry is None or entry[0] is not store or entry[1] != seq:
                return None
            self._entries.move_to_end(key)
        body: dict[str, Any] = orjson.loads(entry[2])
        pos = apply_record(schema, None, body)
        pos.seq = seq
        pos.event_id = body["id"]
        pos.since_checkpoint = body["since"]
        pos.run_id = body.get("run")
        return pos

    def put(
        self, store: StateStore, schema: StateSchema, thread_id: str, branch_id: str, pos: Position
    ) -> None:
        """Remember ``pos`` as the branch's position after record ``pos.seq``."""
        if pos.seq == 0 or pos.event_id is None:
            return
        body = checkpoint_body(schema, pos, checked=False)
        body.update(id=pos.event_id, seq=pos.seq, since=pos.since_checkpoint, run=pos.run_id)
        try:
            data = orjson.dumps(body)
        except TypeError:
            return  # a value orjson cannot write was refused when stored; nothing to cache
        key = (id(store), thread_id, branch_id)
        with self._lock:
            self._entries[key] = (store, pos.seq, data)
            self._entries.move_to_end(key)
            while len(self._entries) > self.size:
                self._entries.popitem(last=False)
