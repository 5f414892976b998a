"""Store a subgraph run's records in the parent's thread, each wrapped in a ``subgraph`` record.

A child run writes through a ``ChildWriter`` as a top-level run writes through its
``HistoryWriter``: the run loop cannot tell them apart. The child's records are numbered
within the child (``id`` and ``seq``, what its replay needs), wrapped in
``SubgraphEvent``s that name the parent task, moved into the parent's position, and
committed by the parent's writer, up to the thread's own ``HistoryWriter``. So one append
stores them with the parent's sequence number and under the parent's lease.

Commits of sibling subgraph tasks and of the top run's loop may come at once (the tasks of
a superstep run concurrently); the top writer's ``gate`` makes each one, from moving the
positions to storing, whole before the next begins, so a checkpoint never describes a
position ahead of the stored records.
"""

from __future__ import annotations

from collections.abc import Sequence

import anyio

from nodestep._engine.writer import CHECKPOINT_EVERY, HistoryWriter
from nodestep._ids import IdFactory
from nodestep._state.schema import StateSchema
from nodestep._superstep import machine
from nodestep._superstep.nested import SubgraphEvent
from nodestep._superstep.position import Position
from nodestep._superstep.records import Checkpoint, HistoryRecord
from nodestep.store import Record

__all__ = ["ChildWriter"]


class ChildWriter(HistoryWriter):
    """Commit the records of the subgraph run of one parent task through the parent's writer.

    Args:
        parent: The parent run's writer (a ``HistoryWriter``, or a ``ChildWriter`` two or
            more levels down).
        task_id: The parent task that runs the subgraph.
        schema: The child's state schema.
        pos: The child run's position.
        new_id: Makes the ids of the child's records.
    """

    def __init__(
        self,
        parent: HistoryWriter,
        task_id: str,
        schema: StateSchema,
        pos: Position,
        new_id: IdFactory,
    ) -> None:
        super().__init__(
            parent.store, schema, parent.thread_id, parent.branch_id, pos, new_id, parent.clock
        )
        self.parent = parent
        self.task_id = task_id
        self.top: HistoryWriter = parent.top if isinstance(parent, ChildWriter) else parent

    async def commit(self, records: Sequence[HistoryRecord]) -> str:
        """Store ``records`` of the child run (``pos`` is already advanced with them).

        Returns:
            The id of the top-level record that holds the last of them, so a stream event
            of the child names an event ``load(at=...)`` and ``fork`` take.

        Raises:
            StateStoreError, ThreadConflictError, ThreadBusyError: as the top writer
                raises them; every writer on the way is then out of step with the store.
        """
        return await self._gated(records, advance=False)

    async def advance_and_commit(self, records: Sequence[HistoryRecord]) -> str:
        """Advance ``pos`` with ``records`` and commit them, under the top writer's gate."""
        return await self._gated(records, advance=True)

    async def _gated(self, records: Sequence[HistoryRecord], *, advance: bool) -> str:
        try:
            async with self.top.gate or anyio.Lock():
                if advance:
                    for record in records:
                        record.advance(self.schema, self.pos)
                return await self._commit(records)
        except BaseException:
            writer: HistoryWriter | None = self
            while writer is not None:
                writer.in_sync = False
                writer = writer.parent if isinstance(writer, ChildWriter) else None
            raise

    async def _commit(self, records: Sequence[HistoryRecord]) -> str:
        pos = self.pos
        after = pos.seq
        bodies = [self._child_body(r, after + i) for i, r in enumerate(records, start=1)]
        since = pos.since_checkpoint
        for record in records:
            since = 0 if isinstance(record, Checkpoint) else since + 1
        if since >= CHECKPOINT_EVERY:
            # The child's own checkpoint starts its kept records again in the parent's
            # position (``_superstep.machine.child_event``), so they stay short however
            # long it runs.
            bodies.append(self._child_body(Checkpoint(pos), after + len(bodies) + 1))
        events = [SubgraphEvent(self.task_id, body) for body in bodies]
        parent = self.parent
        for event in events:
            event.advance(parent.schema, parent.pos)
        last_id = await parent._commit(events)
        for body in bodies:
            machine.stored(pos, body["seq"], body["id"], checkpoint=body["type"] == "checkpoint")
        return last_id

    def _child_body(self, record: HistoryRecord, seq: int) -> Record:
        body = record.to_json(self.schema)
        body["id"] = self.new_id()
        body["seq"] = seq
        return body
