"""Append a thread's records to its store, numbering them and adding checkpoints."""

from __future__ import annotations

import asyncio

from nodestep._ids import Clock, IdFactory
from nodestep.engine.cache import PositionCache
from nodestep.engine.records import apply_record, checkpoint_body
from nodestep.errors import StateStoreError
from nodestep.state.schema import StateSchema
from nodestep.store.base import Record, StateStore
from nodestep.superstep.position import Position

__all__ = ["CHECKPOINT_EVERY", "HistoryWriter", "load_position"]

CHECKPOINT_EVERY = 50
"""A full checkpoint follows every 50 stored records, so a load replays at most 50."""


class HistoryWriter:
    """Number, stamp and append the records of one thread branch, in order.

    The writer remembers the last sequence number it saw; each append asks the store to
    refuse it if the branch moved on since (another process wrote to the thread), which
    raises ``ThreadConflictError`` instead of interleaving two runs' records.
    """

    def __init__(
        self,
        store: StateStore,
        schema: StateSchema,
        thread_id: str,
        branch_id: str,
        pos: Position,
        new_id: IdFactory,
        clock: Clock,
    ) -> None:
        self.store = store
        self.schema = schema
        self.thread_id = thread_id
        self.branch_id = branch_id
        self.pos = pos
        self.new_id = new_id
        self.clock = clock
        self._lock = asyncio.Lock()
        # False once an append failed: the position may then be ahead of the store.
        self.in_sync = True

    def _stamp(self, record: Record, seq: int, now: float) -> None:
        record["id"] = self.new_id()
        record["seq"] = seq
        record["ts"] = now
        record["thread"] = self.thread_id
        record["branch"] = self.branch_id

    async def commit(self, records: list[Record]) -> str:
        """Append ``records`` (their type-specific keys), plus a checkpoint when one is due.

        The caller has already moved ``pos`` to where the records leave the thread, so a
        checkpoint added here describes the position after them.

        Returns:
            The id of the last record that is not a checkpoint.
        """
        async with self._lock:
            pos = self.pos
            after = pos.seq
            seq = after
            now = round(self.clock(), 6)
            for record in records:
                seq += 1
                self._stamp(record, seq, now)
            last_id: str = records[-1]["id"]
            since = pos.since_checkpoint
            for record in records:
                since = 0 if record["type"] == "checkpoint" else since + 1
            if since >= CHECKPOINT_EVERY:
                checkpoint = checkpoint_body(self.schema, pos)
                seq += 1
                self._stamp(checkpoint, seq, now)
                records = [*records, checkpoint]
                since = 0
            try:
                await self.store.append(self.thread_id, self.branch_id, records, after=after)
            except BaseException:
                self.in_sync = False
                raise
            pos.seq = seq
            pos.event_id = records[-1]["id"]
            pos.since_checkpoint = since
            return last_id


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
        at = await store.last_sequence(thread_id, branch_id)
        if at == 0:
            return None
        if cache is not None:
            cached = cache.get(store, schema, thread_id, branch_id, at)
            if cached is not None:
                return cached
    records = await store.read_tail(thread_id, branch_id, at=at)
    pos: Position | None = None
    for record in records:
        pos = apply_record(schema, pos, record)
    if pos is None:
        raise StateStoreError(
            f"Thread '{thread_id}' (branch '{branch_id}') has no record {at}; the store's "
            f"index and its records disagree."
        )
    if cache is not None and latest and pos.seq == at:
        cache.put(store, schema, thread_id, branch_id, pos)
    return pos
