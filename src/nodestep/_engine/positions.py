"""A graph's cache of the latest position of the threads it used, checked against the store.

Loading a thread reads its last checkpoint and folds up to 50 records after it; a graph that
reads or runs the same thread again would redo that every time. The cache keeps each
thread's latest position together with the sequence number it belongs to and the store's
``generation``, and a load uses it only when the store's last sequence number is still that
one, so a record appended by any other process or store object makes it miss, and only
while the store's ``generation`` is the same object: another history file renamed over the
store's path can hold as many records of the thread, and the file store, following it, gives
a new generation, so the cache reloads instead of serving the old file's state.

Nothing a caller changes can reach the cache. A run gets a position decoded afresh from the
entry's JSON bytes. ``get_state`` gets a ``Latest``: decoded once per entry, it shares the
values of immutable fields and keeps each mutable field as JSON bytes, decoded per call.
"""

from __future__ import annotations

import threading
from collections import OrderedDict
from dataclasses import dataclass
from typing import Any

import orjson

from nodestep._engine.history import StateSnapshot
from nodestep._engine.interrupts import Interrupt
from nodestep._state.schema import StateSchema
from nodestep._superstep.position import Position
from nodestep._superstep.records import Checkpoint
from nodestep.store import StateStore

__all__ = ["Latest", "PositionCache"]


@dataclass(frozen=True, slots=True)
class Latest:
    """What a thread's latest position shows outside a run, ready to hand out copies of.

    Attributes:
        event_id: The id of the last record.
        status: The position's status.
        next: The task ids of the pending superstep.
        shared: Values of immutable fields: the same objects go to every caller.
        copied: Mutable fields as JSON bytes: each caller gets values decoded from them.
        interrupt_json: The pending interrupts as JSON bytes, or ``None`` when there are none.
        failure: ``(error type, message, node)`` of a failed superstep, else ``None``.
    """

    event_id: str
    status: str
    next: tuple[str, ...]
    shared: dict[str, Any]
    copied: dict[str, bytes]
    interrupt_json: bytes | None
    failure: tuple[str, str, str | None] | None = None

    @classmethod
    def of(cls, schema: StateSchema, pos: Position, event_id: str) -> Latest:
        shared: dict[str, Any] = {}
        copied: dict[str, bytes] = {}
        for name, spec in schema.fields.items():
            if spec.immutable:
                shared[name] = pos.values[name]
            else:
                copied[name] = _fit(orjson.dumps(spec.dump(pos.values[name])))
        f = pos.failure
        return cls(
            event_id=event_id,
            status=pos.status,
            next=tuple(t.task_id for t in pos.pending_tasks()),
            shared=shared,
            copied=copied,
            interrupt_json=_fit(orjson.dumps(pos.interrupts)) if pos.interrupts else None,
            failure=None if f is None else (f.error, f.message, f.node),
        )

    def values(self, schema: StateSchema) -> dict[str, Any]:
        """Return a new values dict, in field order, that shares no mutable object."""
        if not self.copied:
            return dict(self.shared)
        values: dict[str, Any] = {}
        for name, spec in schema.fields.items():
            blob = self.copied.get(name)
            values[name] = self.shared[name] if blob is None else spec.from_json(orjson.loads(blob))
        return values

    def interrupts(self) -> dict[str, Interrupt]:
        """Return new ``Interrupt`` objects for the pending interrupts, by key."""
        if self.interrupt_json is None:
            return {}
        data: dict[str, Any] = orjson.loads(self.interrupt_json)
        return {key: Interrupt.from_json(value) for key, value in data.items()}

    def snapshot(
        self, schema: StateSchema, seq: int, thread_id: str, branch_id: str
    ) -> StateSnapshot[Any]:
        """Return a new ``StateSnapshot`` of this position, after record ``seq``."""
        # The calls above, skipped when they have nothing to copy: this runs for every
        # get_state, and a call costs about as much as the copy of a small state.
        values = self.values(schema) if self.copied else dict(self.shared)
        return StateSnapshot(
            schema.instance(values, copy=False),
            seq,
            self.event_id,
            thread_id,
            branch_id,
            self.status,
            self.next,
            {} if self.interrupt_json is None else self.interrupts(),
            *(self.failure or ()),
        )


class _Entry:
    __slots__ = ("data", "generation", "latest", "seq", "store")

    def __init__(self, store: StateStore, generation: object, seq: int, data: bytes) -> None:
        self.store = store
        self.generation = generation
        self.seq = seq
        self.data = data
        self.latest: Latest | None = None


class PositionCache:
    """The latest positions of recently written thread branches; the oldest write goes first."""

    def __init__(self, size: int = 256) -> None:
        self.size = size
        self._entries: OrderedDict[tuple[int, str, str], _Entry] = OrderedDict()
        # Several threads may run one graph (each invoke() on its own loop).
        self._lock = threading.Lock()

    def _entry(self, store: StateStore, thread_id: str, branch_id: str, seq: int) -> _Entry | None:
        # One dict lookup, atomic on its own: a reader takes no lock. Reads do not move the
        # entry to the end, so eviction follows writes; a read after eviction reloads.
        entry = self._entries.get((id(store), thread_id, branch_id))
        if (
            entry is None
            or entry.store is not store
            or entry.seq != seq
            or entry.generation is not store.generation
        ):
            return None
        return entry

    def get(
        self, store: StateStore, schema: StateSchema, thread_id: str, branch_id: str, seq: int
    ) -> Position | None:
        """Return the cached position if it is the one after record ``seq``, else ``None``.

        The position is the caller's own: decoded afresh, it shares nothing with the cache.
        """
        entry = self._entry(store, thread_id, branch_id, seq)
        return None if entry is None else _decode(schema, entry)

    def latest(
        self, store: StateStore, schema: StateSchema, thread_id: str, branch_id: str, seq: int
    ) -> Latest | None:
        """Return the cached ``Latest`` if it is the one after record ``seq``, else ``None``."""
        entry = self._entry(store, thread_id, branch_id, seq)
        if entry is None:
            return None
        latest = entry.latest
        if latest is None:
            # Two threads may both decode it here; either result is the same and complete.
            pos = _decode(schema, entry)
            latest = entry.latest = Latest.of(schema, pos, str(pos.event_id))
        return latest

    def put(
        self, store: StateStore, schema: StateSchema, thread_id: str, branch_id: str, pos: Position
    ) -> None:
        """Remember ``pos`` as the branch's position after record ``pos.seq``.

        The caller has just read or written ``pos`` through ``store``: a store follows a
        replaced history before it reads or writes, so its ``generation`` now is the one of
        the history ``pos`` came from (another replacement in these microseconds aside).
        """
        if pos.seq == 0 or pos.event_id is None:
            return
        generation = store.generation
        body = Checkpoint(pos, checked=False).to_json(schema)
        body.update(id=pos.event_id, seq=pos.seq, since=pos.since_checkpoint, run=pos.run_id)
        try:
            data = _fit(orjson.dumps(body))
        except TypeError:
            return  # a value orjson cannot write was refused when stored; nothing to cache
        key = (id(store), thread_id, branch_id)
        with self._lock:
            self._entries[key] = _Entry(store, generation, pos.seq, data)
            self._entries.move_to_end(key)
            while len(self._entries) > self.size:
                self._entries.popitem(last=False)


def _fit(data: bytes) -> bytes:
    """Return ``data`` in a bytes object of its own size, for a cache that keeps it.

    orjson returns its output in the buffer it wrote it to, at least 4 KiB whatever the
    length: a cache of 256 small states would hold a megabyte of slack (about 4 KB a thread).
    """
    return bytes(memoryview(data))


def _decode(schema: StateSchema, entry: _Entry) -> Position:
    body: dict[str, Any] = orjson.loads(entry.data)
    pos = Checkpoint.from_json(schema, body).position
    pos.seq = entry.seq
    pos.event_id = body["id"]
    pos.since_checkpoint = body["since"]
    pos.run_id = body.get("run")
    return pos
