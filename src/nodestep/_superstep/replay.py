"""Replay: fold a branch's stored records, from a checkpoint on, into its position.

Each stored record is decoded into its typed kind (``_superstep.records``) and advances the
position exactly as it advanced the live run's.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from typing import Any

from pydantic import ValidationError

from nodestep._errors import StateStoreError
from nodestep._state.schema import StateSchema
from nodestep._superstep import machine
from nodestep._superstep.attempts import BreakerChanged, TaskRetried
from nodestep._superstep.nested import SubgraphEvent
from nodestep._superstep.position import Position
from nodestep._superstep.records import (
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

__all__ = ["DAMAGE", "KINDS", "advance", "damaged", "decode", "replay"]

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
        TaskRetried,
        BreakerChanged,
        SubgraphEvent,
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
    except DAMAGE as error:
        raise damaged(cls.kind, body, error) from error


DAMAGE = (KeyError, TypeError, ValueError, AttributeError, IndexError, ValidationError)
"""What decoding or folding a stored record raises when a key or a value in it is wrong."""


def damaged(
    kind: str, body: Mapping[str, Any], error: Exception, part: str = ""
) -> StateStoreError:
    """Return the error for the stored ``kind`` record ``body``, which raised ``error``.

    ``part`` names the part of the record at fault, e.g. ``"a pending interrupt"``.
    """
    if isinstance(error, KeyError):
        needs = part or f"a '{kind}' record"
        what = f"{part or 'it'} has no key {error}, which {needs} needs"
    else:
        what = f"a value has the wrong type or form ({str(error).splitlines()[0]})"
        what = f"in {part}, {what}" if part else what
    return StateStoreError(
        f"The '{kind}' record ({_where(body)}) is damaged: {what}. Restore the history "
        f"from a backup, or fork the thread at an earlier event."
    )


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
            advance(schema, record, pos, body)
        machine.stored(pos, body["seq"], body["id"], checkpoint=isinstance(record, Checkpoint))
    return pos


def advance(
    schema: StateSchema, record: HistoryRecord, pos: Position, body: Mapping[str, Any]
) -> None:
    """Move ``pos`` on by the stored ``record`` (decoded from ``body``), as the live run did.

    Raises:
        StateStoreError: the record names a task the records before it do not have, or
            holds a value of the wrong type (its cause is the error that showed it).
    """
    try:
        record.advance(schema, pos)
    except StateStoreError:
        raise
    except KeyError as error:  # a task the records never planned or finished
        raise StateStoreError(
            f"The '{record.kind}' record ({_where(body)}) names task {error}, which "
            f"the records before it do not have; the history is damaged. Restore the "
            f"history from a backup, or fork the thread at an earlier event."
        ) from error
    except DAMAGE as error:
        raise damaged(record.kind, body, error) from error
