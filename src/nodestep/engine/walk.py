"""Walk a branch's history: every event with the state after it, in one fold.

``load(at=...)`` answers for one event by replaying from the checkpoint before it; asking
that for each event of a long branch would replay the same records over and over. The
walk reads the branch once and folds its records from its first checkpoint, through the
same ``advance`` as the live run and ``replay``, taking a snapshot after each one: the cost
grows with the branch's length once, not with its square.
"""

from __future__ import annotations

from typing import Any

from nodestep.engine.compiled import ThreadServices
from nodestep.engine.history_ops import snapshot_of, unknown_thread
from nodestep.engine.migrate import last_migration
from nodestep.errors import StateStoreError
from nodestep.state.schema import StateSchema
from nodestep.store.base import Record, StateStore
from nodestep.store.history import HistoryEvent, HistoryStep, StateHistory
from nodestep.superstep import machine
from nodestep.superstep.position import Position
from nodestep.superstep.records import (
    Checkpoint,
    HistoryRecord,
    RunFailed,
    RunPaused,
    SuperstepCompleted,
    TaskFinished,
)
from nodestep.superstep.replay import decode

__all__ = ["state_history"]


async def state_history(
    graph: ThreadServices, store: StateStore, thread_id: str, branch_id: str
) -> StateHistory[Any]:
    """Return the branch's events, each with the state after it.

    Raises:
        UnknownThreadError: the branch has no history.
        StateStoreError: the records do not start with a checkpoint, or one is damaged.
    """
    bodies = await store.read(thread_id, branch_id)
    if not bodies:
        raise unknown_thread(thread_id, branch_id)
    bodies = bodies[last_migration(bodies) :]  # earlier records are another class's
    schema = graph.schema
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
            nodes = _nodes(record, pos)
            _advance(schema, record, pos, body)
        machine.stored(pos, body["seq"], body["id"], checkpoint=isinstance(record, Checkpoint))
        snapshot = snapshot_of(schema, pos, thread_id, branch_id)
        steps.append(HistoryStep(HistoryEvent.from_record(body), snapshot, nodes))
    return StateHistory(thread_id, branch_id, tuple(steps))


def _advance(schema: StateSchema, record: HistoryRecord, pos: Position, body: Record) -> None:
    try:
        record.advance(schema, pos)
    except KeyError as error:  # a task the records never planned or finished
        raise StateStoreError(
            f"The '{record.kind}' record (record {body.get('seq')} of thread "
            f"{body.get('thread')!r}, branch {body.get('branch')!r}) names task {error}, "
            f"which the records before it do not have; the history is damaged."
        ) from None


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
    else:
        return ()
    return tuple(dict.fromkeys(names))
