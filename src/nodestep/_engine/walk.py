"""Walk a branch's history: every event with the state after it, in one fold.

``load(at=...)`` answers for one event by replaying from the checkpoint before it; asking
that for each event of a long branch would replay the same records over and over. The
walk reads the branch once and folds its records from its first checkpoint, through the
same ``advance`` as the live run and ``replay``, taking a snapshot after each one: the cost
grows with the branch's length once, not with its square.
"""

from __future__ import annotations

from typing import Any

from nodestep._engine.compiled import ThreadServices
from nodestep._engine.history import HistoryEvent, HistoryStep, StateHistory
from nodestep._engine.history_ops import check_ids, snapshot_of, unknown_thread
from nodestep._engine.migrate import last_migration
from nodestep._engine.positions import RecordTrail, raise_damaged
from nodestep._errors import StateStoreError
from nodestep._state.schema import StateSchema
from nodestep._superstep import machine
from nodestep._superstep.attempts import BreakerChanged, TaskRetried
from nodestep._superstep.position import Position
from nodestep._superstep.records import (
    Checkpoint,
    HistoryRecord,
    RunFailed,
    RunPaused,
    StateUpdated,
    SuperstepCompleted,
    TaskFinished,
)
from nodestep._superstep.replay import DAMAGE, advance, damaged, decode
from nodestep.store import StateStore

__all__ = ["state_history"]


async def state_history(
    graph: ThreadServices, store: StateStore, thread_id: str, branch_id: str
) -> StateHistory[Any]:
    """Return the branch's events, each with the state after it.

    Raises:
        GraphConfigError: ``thread_id`` or ``branch_id`` is no usable id (``check_ids``).
        UnknownThreadError: the branch has no history.
        StateStoreError: the records do not start with a checkpoint, or one is damaged;
            a file store's error names the record's file, line and byte offset.
    """
    check_ids(thread_id, branch_id)
    bodies = await store.read(thread_id, branch_id)
    if not bodies:
        raise unknown_thread(thread_id, branch_id)
    bodies = bodies[last_migration(bodies) :]  # earlier records are another class's
    trail = RecordTrail(bodies)
    schema = graph.schema
    try:
        steps = _walk(schema, trail, thread_id, branch_id)
    except StateStoreError as error:
        await raise_damaged(error, store, schema, thread_id, branch_id, trail.current)
    return StateHistory(thread_id, branch_id, tuple(steps))


def _walk(
    schema: StateSchema, bodies: RecordTrail, thread_id: str, branch_id: str
) -> list[HistoryStep[Any]]:
    steps: list[HistoryStep[Any]] = []
    pos: Position | None = None
    for body in bodies:
        record = decode(schema, body)
        if isinstance(record, Checkpoint):
            if pos is not None:  # it repeats the folded position: no step of its own
                machine.stored(pos, body["seq"], body["id"], checkpoint=True)
                continue
            pos = record.position
            nodes: tuple[str, ...] = ()
        elif pos is None:
            raise StateStoreError(
                f"History of thread '{thread_id}' (branch '{branch_id}') does not start with "
                f"a checkpoint: record {body.get('seq')} is a '{record.kind}' record."
            )
        else:
            try:
                nodes = _nodes(record, pos)
            except DAMAGE as error:  # a node name that is no string
                raise damaged(record.kind, body, error) from error
            advance(schema, record, pos, body)
        machine.stored(pos, body["seq"], body["id"], checkpoint=isinstance(record, Checkpoint))
        try:
            snapshot = snapshot_of(schema, pos, thread_id, branch_id)
        except DAMAGE as error:  # a stored interrupt, decoded only here
            raise damaged(record.kind, body, error, "a pending interrupt") from error
        steps.append(HistoryStep(HistoryEvent.from_record(body), snapshot, nodes))
    return steps


def _nodes(record: HistoryRecord, pos: Position) -> tuple[str, ...]:
    """Return the nodes ``record`` is about, read before it moves ``pos`` on."""
    if isinstance(record, SuperstepCompleted):
        names = [t.node for t in pos.tasks]
    elif isinstance(record, TaskFinished):
        names = [record.result.node]
    elif isinstance(record, RunFailed):
        node = record.failure.node
        names = [] if node is None else [node]
    elif isinstance(record, RunPaused):
        names = [str(i.get("node")) for i in record.interrupts.values()]
    elif isinstance(record, TaskRetried | BreakerChanged):
        names = [record.node]
    elif isinstance(record, StateUpdated) and record.node is not None:
        names = [record.node]  # update_state(as_node=...)
    else:
        return ()
    return tuple(dict.fromkeys(names))
