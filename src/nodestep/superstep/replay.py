"""Replay: fold a branch's stored records, from a checkpoint on, into its position.

Each stored record is decoded into its typed kind (``superstep.records``) and advances the
position exactly as it advanced the live run's.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from typing import Any

from pydantic import ValidationError

from nodestep.errors import StateStoreError
from nodestep.state.schema import StateSchema
from nodestep.superstep import machine
from nodestep.superstep.position import Position
from nodestep.superstep.records import (
    Checkpoint,
    HistoryRecord,
    RunCompleted,
    RunFailed,
    RunPaused,
    RunStarted,
    RunStopped,
    StateUpdated,
    SuperstepCompleted,
    TaskFinished,
)

__all__ = ["KINDS", "decode", "replay"]

KINDS: dict[str, type[HistoryRecord]] = {
    cls.kind: cls
    for cls in (
        Checkpoint,
        RunStarted,
        TaskFinished,
        SuperstepCompleted,
        RunPaused,
        RunFailed,
        RunStopped,
        RunCompleted,
        StateUpdated,
    )
}


def decode(schema: StateSchema, body: Mapping[str, Any]) -> HistoryRecord:
    """Return the typed record of a stored one.

    Raises:
        StateStoreError: the record's type is unknown (a newer nodestep wrote it), or the
            record lacks a key or holds a value its kind cannot have.
    """
    kind = body.get("type")
    cls = KINDS.get(kind) if isinstance(kind, str) else None
    if cls is None:
        raise StateStoreError(
            f"Unknown history record type {kind!r} ({_where(body)}); it was written by a "
            f"newer nodestep. Upgrade nodestep to read it."
        )
    try:
        return cls.from_json(schema, body)
    except StateStoreError:
        raise
    except (KeyError, TypeError, ValueError, AttributeError, ValidationError) as error:
        what = f"missing key {error}" if isinstance(error, KeyError) else str(error)
        raise StateStoreError(
            f"The '{kind}' record ({_where(body)}) is damaged: {what.splitlines()[0]}. "
            f"Restore the history from a backup, or fork the thread at an earlier event."
        ) from None


def _where(body: Mapping[str, Any]) -> str:
    return (
        f"record {body.get('seq')} of thread {body.get('thread')!r}, branch {body.get('branch')!r}"
    )


def replay(schema: StateSchema, bodies: Iterable[Mapping[str, Any]]) -> Position | None:
    """Return the position after the stored records ``bodies``, which start at a checkpoint.

    ``None`` when there are no records.

    Raises:
        StateStoreError: the records do not start with a checkpoint, or one is damaged.
    """
    pos: Position | None = None
    for body in bodies:
        record = decode(schema, body)
        if isinstance(record, Checkpoint):
            pos = record.position
        elif pos is None:
            raise StateStoreError(
                f"History of thread {body.get('thread')!r} (branch {body.get('branch')!r}) "
                f"does not start with a checkpoint: record {body.get('seq')} is a "
                f"'{record.kind}' record."
            )
        else:
            try:
                record.advance(schema, pos)
            except KeyError as error:  # a task the records never planned or finished
                raise StateStoreError(
                    f"The '{record.kind}' record ({_where(body)}) names task {error}, which "
                    f"the records before it do not have; the history is damaged."
                ) from None
        machine.stored(pos, body["seq"], body["id"], checkpoint=isinstance(record, Checkpoint))
    return pos
