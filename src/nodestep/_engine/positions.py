"""Read a thread branch's position from its store, and keep the latest ones in a cache.

A load (``load_position``) reads the branch's last checkpoint at or before the record
asked for and folds the records after it (``_superstep.replay``): never more than
``CHECKPOINT_EVERY`` of them (``_engine.writer`` adds the checkpoints), however long the
history is. A record that cannot be decoded raises an error that says where the record is
(``raise_damaged``).

A graph that reads or runs the same thread again would still redo that fold every time. The
cache keeps each thread's latest position together with the sequence number and id of the
record it belongs to and the store's ``generation``, and a load uses it only when the
store's last record is still that one (``StateStore.last_record``; by number alone where
the store gives no id), so a record appended by any other process or store object makes it
miss, and so does a thread deleted and written again to as many records; and only while
the store's ``generation`` is the same object: another history file
renamed over the store's path can hold as many records of the thread, and the file store,
following it, gives a new generation, so the cache reloads instead of serving the old
file's state.

Nothing a caller changes can reach the cache. An entry keeps the values that cannot change
in place as they are (those of immutable types, and frozen values such as a conversation's
``MessageList``: ``FieldSpec.shares``), a copy of each plain dict or list of immutable items
(``FieldSpec.shallow``; each reader gets a copy of that copy), and the rest of the position
as JSON bytes. A run
gets a position decoded afresh from those bytes, holding the shared values: so a turn of a
chat does not decode, nor encode when it ends, the conversation it only appends to, and the
conversation's message index stays the one its last merge left (see ``add_messages``).
``get_state`` gets a ``Latest``: decoded once per entry, it shares the same values and keeps
each other field as JSON bytes, decoded per call.
"""

from __future__ import annotations

import os
import threading
import weakref
from collections import OrderedDict
from collections.abc import Iterable, Iterator
from dataclasses import dataclass
from typing import Any, NoReturn

import orjson
from pydantic import ValidationError

from nodestep._engine.history import StateSnapshot
from nodestep._engine.interrupts import Interrupt
from nodestep._errors import StateStoreError
from nodestep._state.schema import StateSchema, StoredFieldsMismatch
from nodestep._superstep.position import Position, Status
from nodestep._superstep.records import Checkpoint
from nodestep._superstep.replay import replay
from nodestep.store import Record, StateStore

__all__ = [
    "MIGRATION_KEY",
    "Latest",
    "PositionCache",
    "RecordTrail",
    "load_position",
    "raise_damaged",
]

MIGRATION_KEY = "migration"
"""Marks a checkpoint written by ``graph.migrate``; its value names the two state classes."""


async def load_position(
    store: StateStore,
    schema: StateSchema,
    thread_id: str,
    branch_id: str,
    at: int | None = None,
    cache: PositionCache | None = None,
) -> Position | None:
    """Return the branch's position after record ``at`` (or its last), or ``None`` if empty.

    Reads the last checkpoint at or before that record and folds the records after it:
    never more than ``CHECKPOINT_EVERY`` of them, however long the history is. For the
    latest position, ``cache`` answers instead when the store has nothing newer.
    """
    latest = at is None
    if at is None:
        at, last_id = await store.last_record(thread_id, branch_id)
        if at == 0:
            return None
        if cache is not None:
            cached = cache.get(store, schema, thread_id, branch_id, at, last_id)
            if cached is not None:
                return cached
    trail = RecordTrail(await store.read_tail(thread_id, branch_id, at=at))
    try:
        pos = replay(schema, trail)
    except StateStoreError as error:
        await raise_damaged(error, store, schema, thread_id, branch_id, trail.current)
    if pos is None:
        raise StateStoreError(
            f"Thread '{thread_id}' (branch '{branch_id}') has no record {at}; the store's "
            f"index and its records disagree."
        )
    if cache is not None and latest and pos.seq == at:
        cache.put(store, schema, thread_id, branch_id, pos)
    return pos


class RecordTrail:
    """Stored records, iterated once, remembering the one the iteration is at.

    A decode that fails deep down knows the field at fault but not the record; the trail
    does, for the error.

    Attributes:
        current: The record last handed out; ``None`` before the first.
    """

    def __init__(self, bodies: Iterable[Record]) -> None:
        self.bodies = bodies
        self.current: Record | None = None

    def __iter__(self) -> Iterator[Record]:
        for body in self.bodies:
            self.current = body
            yield body


async def raise_damaged(
    error: StateStoreError,
    store: StateStore,
    schema: StateSchema,
    thread_id: str,
    branch_id: str,
    body: Record | None,
) -> NoReturn:
    """Raise ``error``, about the stored record ``body``, saying where that record is.

    A file store's error then starts ``"<path>: line <n> (byte <offset>)"`` and has
    ``path``, ``line`` and ``offset`` set, as the error about an unreadable line of the
    file does; without a place (``StateStore.describe_record`` returns ``None``) it names
    the thread and the record. Its cause is ``error``'s cause, such as pydantic's error.
    Error path only: the store may read the file up to the record to count its line.
    """
    if body is not None:
        error = _about_record(error, schema, thread_id, branch_id, body)
    seq = None if body is None else body.get("seq")
    place = None
    if error.path is None and type(seq) is int:
        place = await store.describe_record(thread_id, branch_id, seq)
    if place is None:
        raise error
    raise StateStoreError(
        f"{place}: {error}", path=place.path, line=place.line, offset=place.offset
    ) from error.__cause__


def _about_record(
    error: StateStoreError, schema: StateSchema, thread_id: str, branch_id: str, body: Record
) -> StateStoreError:
    """Return ``error`` saying which thread and record hold a value that no longer fits.

    Such a value, or a stored field the state class no longer has, raises
    ``StateStoreError`` (with pydantic's error or a ``StoredFieldsMismatch`` as its cause)
    deep in the decoding, which knows the field but not the record; the record is known
    here. Other errors name their record already, and are returned as they are.
    """
    cause = error.__cause__
    if not isinstance(cause, ValidationError | StoredFieldsMismatch):
        return error
    where = f"event {body.get('seq')} (id '{body.get('id')}', a '{body.get('type')}' record)"
    migration = body.get(MIGRATION_KEY)
    if isinstance(cause, StoredFieldsMismatch) and isinstance(migration, dict):
        message = (
            f"Thread '{thread_id}' (branch '{branch_id}') was migrated from "
            f"{migration.get('from')} to {migration.get('to')} at its {where}, so "
            f"{schema.cls.__name__} cannot load it: {_quoted(cause.fields)} would be "
            f"dropped. Load it with a graph of {migration.get('to')}; the events before "
            f"the migration still load with the class they were stored with."
        )
    else:
        what = (
            "fields that no longer fit"
            if isinstance(cause, StoredFieldsMismatch)
            else "a value that no longer fits"
        )
        message = (
            f"Thread '{thread_id}' (branch '{branch_id}') cannot be loaded: its {where} "
            f"holds {what} the state class. {error}"
        )
    about = StateStoreError(message)
    about.__cause__ = cause
    return about


def _quoted(names: list[str]) -> str:
    return ", ".join(f"'{n}'" for n in names)


@dataclass(frozen=True, slots=True)
class Latest:
    """What a thread's latest position shows outside a run, ready to hand out copies of.

    Attributes:
        event_id: The id of the last record.
        status: The position's status.
        next: The task ids of the pending superstep.
        shared: Values that cannot change in place (``FieldSpec.shares``): the same objects
            go to every caller.
        copied: Mutable fields as JSON bytes: each caller gets values decoded from them.
        interrupt_json: The open interrupts (``Position.open_interrupts``) as JSON bytes, or
            ``None`` when there are none.
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
            value = pos.values[name]
            if spec.shares(value):
                shared[name] = value
            else:
                copied[name] = _fit(orjson.dumps(spec.dump(value)))
        f = pos.failure
        found = pos.open_interrupts()  # those resume= may answer, as snapshot_of shows
        return cls(
            event_id=event_id,
            status=pos.status,
            next=tuple(t.task_id for t in pos.pending_tasks()),
            shared=shared,
            copied=copied,
            interrupt_json=_fit(orjson.dumps(found)) if found else None,
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
        # tuple.__new__ with every field: the named tuple's own __new__ is one more call.
        return _new_tuple(
            StateSnapshot,
            (
                schema.instance(values, copy=False),
                seq,
                self.event_id,
                thread_id,
                branch_id,
                self.status,
                self.next,
                {} if self.interrupt_json is None else self.interrupts(),
                *(self.failure or _NO_FAILURE),
            ),
        )


_Idle = tuple[Status, int, int, int, str | None]
"""What an idle position holds besides its values (``_idle``): its status, step, turn,
records since its checkpoint and run id."""


class _Entry:
    """A cached position: ``shared`` values as they are, ``containers`` copied on the way in
    and out, the rest as JSON bytes (``data``): a checkpoint's body, or for an ``idle``
    position only its values (the rest in ``idle``)."""

    __slots__ = (
        "containers", "data", "event_id", "generation", "idle", "latest", "seq", "shared",
        "store",
    )  # fmt: skip

    def __init__(
        self,
        store: StateStore,
        generation: object,
        seq: int,
        event_id: str,
        data: bytes,
        shared: dict[str, Any],
        containers: dict[str, Any],
        idle: _Idle | None = None,
    ) -> None:
        self.store = store
        self.generation = generation
        self.seq = seq
        self.event_id = event_id
        self.data = data
        self.shared = shared
        self.containers = containers
        self.idle = idle
        self.latest: Latest | None = None


def _idle(pos: Position) -> _Idle | None:
    """Return what a position holds besides its values when that is all scalars: nothing
    pending, failed or held (a run that completed, W10's agent after every turn); else
    ``None``, and the cache keeps a checkpoint's body.

    Why: the checkpoint's JSON form and its reading back are written for every kind of
    position, about a third of what the cache cost a turn of W10's agent.
    """
    if (
        pos.tasks
        or pos.done
        or pos.interrupts
        or pos.answers
        or pos.caches
        or pos.failure is not None
        or pos.joins
        or pos.deferred
        or pos.node_states
        or pos.children
    ):
        return None
    return pos.status, pos.step, pos.turn, pos.since_checkpoint, pos.run_id


def _kept(
    schema: StateSchema, values: dict[str, Any]
) -> tuple[dict[str, Any], dict[str, Any], dict[str, Any]]:
    """Return a cache entry's parts of ``values``: shared ones, containers and the rest.

    A plain dict or list of immutable items (``FieldSpec.shallow``) holds nothing that can
    change in place but itself: a copy of the container, made here and again for each
    reader, keeps it apart from every caller at a fraction of the cost of its JSON form.
    The rest is kept as JSON.
    """
    fields = schema.fields
    shared: dict[str, Any] = {}
    containers: dict[str, Any] = {}
    rest: dict[str, Any] = {}
    for name, value in values.items():
        spec = fields[name]
        kind = type(value)
        # The rest sorted out in the same pass, not by a second walk of the values.
        if spec.shares(value):
            shared[name] = value
        elif kind is spec.shallow:
            containers[name] = kind(value)
        else:
            rest[name] = value
    return shared, containers, rest


class PositionCache:
    """The latest positions of recently written thread branches; the oldest write goes first."""

    def __init__(self, size: int = 256) -> None:
        self.size = size
        self._entries: OrderedDict[tuple[int, str, str], _Entry] = OrderedDict()
        # Several threads may run one graph (each invoke() on its own loop).
        self._lock = threading.Lock()
        _CACHES.add(self)

    def _entry(
        self,
        store: StateStore,
        thread_id: str,
        branch_id: str,
        seq: int | None,
        event_id: str | None,
    ) -> _Entry | None:
        # One dict lookup, atomic on its own: a reader takes no lock. Reads do not move the
        # entry to the end, so eviction follows writes; a read after eviction reloads.
        # ``seq`` None: whatever record the entry is of (``newest``).
        entry = self._entries.get((id(store), thread_id, branch_id))
        if (
            entry is None
            or entry.store is not store
            or (seq is not None and entry.seq != seq)
            or (event_id is not None and entry.event_id != event_id)
            or entry.generation is not store.generation
        ):
            return None
        return entry

    def get(
        self,
        store: StateStore,
        schema: StateSchema,
        thread_id: str,
        branch_id: str,
        seq: int,
        event_id: str | None = None,
    ) -> Position | None:
        """Return the cached position if it is the one after record ``seq``, else ``None``.

        ``event_id``: that record's id, when the store gave it (``StateStore.last_record``):
        a thread deleted and written again can reach ``seq`` with other records.
        The position is the caller's own: decoded afresh, it shares nothing with the cache.
        """
        entry = self._entry(store, thread_id, branch_id, seq, event_id)
        return None if entry is None else _decode(schema, entry)

    def newest(
        self, store: StateStore, schema: StateSchema, thread_id: str, branch_id: str
    ) -> Position | None:
        """Return the branch's cached position, not checked against the store, or ``None``.

        For a run that takes its lease with its first records (``_engine.loop``): their
        append is checked against the position's last record, by sequence number and (in a
        store that gives it, ``StateStore.last_record``) by id, which stand for the
        position only in a store whose history is never replaced (``generation`` None). A
        store whose history can be replaced gets ``None``: its entry must be checked
        against the history a read follows. Decoded afresh, as ``get``'s.
        """
        if store.generation is not None:
            return None
        entry = self._entry(store, thread_id, branch_id, None, None)
        return None if entry is None else _decode(schema, entry)

    def latest(
        self,
        store: StateStore,
        schema: StateSchema,
        thread_id: str,
        branch_id: str,
        seq: int,
        event_id: str | None = None,
    ) -> Latest | None:
        """Return the cached ``Latest`` if it is the one after record ``seq`` (of id
        ``event_id``, when given), else ``None``."""
        entry = self._entry(store, thread_id, branch_id, seq, event_id)
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
        shared, containers, rest = _kept(schema, pos.values)
        idle = _idle(pos)
        body: dict[str, Any]
        if idle is not None:
            body = schema.values_dumped(rest)
        else:
            # The values written given apart, not a copy of the position made with them
            # (dataclasses.replace: a read and an argument per field of it, on every run's
            # end).
            body = Checkpoint(pos, checked=False, values=rest).to_json(schema)
            body.update(id=pos.event_id, seq=pos.seq, since=pos.since_checkpoint, run=pos.run_id)
        try:
            data = _fit(orjson.dumps(body))
        except TypeError:
            return  # a value orjson cannot write was refused when stored; nothing to cache
        key = (id(store), thread_id, branch_id)
        with self._lock:
            entry = _Entry(store, generation, pos.seq, pos.event_id, data, shared, containers, idle)
            self._entries[key] = entry
            self._entries.move_to_end(key)
            while len(self._entries) > self.size:
                self._entries.popitem(last=False)


_CACHES: weakref.WeakSet[PositionCache] = weakref.WeakSet()
"""Every position cache alive, for their locks to be made new in a forked child."""
_new_tuple = tuple.__new__
_NO_FAILURE = (None, None, None)  # a snapshot's error_type, error_message, failed_node


def _new_locks_after_fork() -> None:
    # A lock another thread held at fork time stays held in the child forever; the entries
    # stay good (each is checked against its store's generation before use).
    for cache in list(_CACHES):
        cache._lock = threading.Lock()


os.register_at_fork(after_in_child=_new_locks_after_fork)


def _fit(data: bytes) -> bytes:
    """Return ``data`` in a bytes object of its own size, for a cache that keeps it.

    orjson returns its output in the buffer it wrote it to, at least 4 KiB whatever the
    length: a cache of 256 small states would hold a megabyte of slack (about 4 KB a thread).
    """
    return bytes(memoryview(data))


def _decode(schema: StateSchema, entry: _Entry) -> Position:
    body: dict[str, Any] = orjson.loads(entry.data)
    # The shared fields and containers were left out of the JSON: given as they are.
    given = entry.shared
    if entry.containers:
        given = {**given, **{n: type(c)(c) for n, c in entry.containers.items()}}
    idle = entry.idle
    if idle is not None:  # the values alone: the position Checkpoint.from_json would give
        status, step, turn, since, run_id = idle
        values = schema.values_from_json(body, given)
        pos = Position(values, status, step, seq=entry.seq, event_id=entry.event_id, turn=turn)
        pos.since_checkpoint = since
        pos.run_id = run_id
        return pos
    pos = Checkpoint.from_json(schema, body, given).position
    pos.seq = entry.seq
    pos.event_id = body["id"]
    pos.since_checkpoint = body["since"]
    pos.run_id = body.get("run")
    return pos
