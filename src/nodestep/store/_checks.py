"""The checks every built-in store makes on the records it is given or finds in a file.

Every built-in store refuses the same records with the same words, before storing anything:
a store that kept a record another refuses would let a history that works in tests (on the
memory store) fail in production (on the file store). ``check_records`` and ``check_branch``
are the public face of these checks: a store of your own calls ``check_records`` first in
``append`` and ``check_branch`` first in ``create_branch`` to refuse the same records with
the same words, which the conformance suite (``nodestep.testing``) expects. The built-in
stores call ``encode_events`` and ``encode_branch``, which check the records and return
their lines (``_codec``) in one pass.
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from typing import Any

from nodestep._errors import StateStoreError
from nodestep.store import _codec
from nodestep.store._contract import BranchRecord, Record

__all__ = [
    "BRANCH_KEYS",
    "EVENT_KEYS",
    "branch_problem",
    "check_branch",
    "check_pruned",
    "check_records",
    "encode_branch",
    "encode_events",
    "encode_pruned",
    "misplaced",
    "problem",
]

Keys = tuple[tuple[str, type | tuple[type, ...], str], ...]

EVENT_KEYS: Keys = (
    ("id", str, "a string"),
    ("seq", int, "an integer"),
    ("ts", (int, float), "a number"),
    ("thread", str, "a string"),
    ("branch", str, "a string"),
    ("type", str, "a string"),
)
BRANCH_KEYS: Keys = (
    ("thread", str, "a string"),
    ("branch", str, "a string"),
    ("parent", str, "a string"),
    ("from_event", str, "a string"),
    ("from_seq", int, "an integer"),
    ("ts", (int, float), "a number"),
)


def problem(record: Any, keys: Keys) -> str | None:
    """Say what makes ``record`` not a record with ``keys``, or return None."""
    if keys is EVENT_KEYS and _plain_event(record):
        return None
    if not isinstance(record, dict):
        return f"it is a {type(record).__name__}, not a dict"
    for key, kind, name in keys:
        value = record.get(key)
        if not isinstance(value, kind) or isinstance(value, bool):
            found = f"{value!r}" if key in record else "no such key"
            return f"its {key!r} must be {name}, found {found}"
    if not _finite(record["ts"]):
        # JSON has no nan or infinity: orjson writes null, which no reader accepts as a ts.
        return f"its 'ts' must be a finite number, found {record['ts']!r}"
    if keys is EVENT_KEYS and record["type"] in _codec.FILE_TYPES:
        return f"its type {record['type']!r} is reserved for the store's own records"
    return None


def _plain_event(record: Any) -> bool:
    """Tell whether ``record`` is a good event record with values of the exact types.

    Every record read from a file or written by the engine is one: this answers for them
    at a fraction of the cost of the general check, which still judges the rest.
    """
    try:
        return (
            type(record) is dict
            and type(record["id"]) is str
            and type(record["seq"]) is int
            # ts - ts is 0.0 for a finite float only (nan for nan and the infinities).
            and (type(ts := record["ts"]) is int or (type(ts) is float and ts - ts == 0.0))
            and type(record["thread"]) is str
            and type(record["branch"]) is str
            and type(record["type"]) is str
            and record["type"] not in _codec.FILE_TYPES
        )
    except KeyError:
        return False


def _not_json(error: TypeError) -> str:
    """Say why a record orjson refused with ``error`` is not what a store writes."""
    if "Recursion limit" in str(error):  # orjson's words for a 255th level
        return (
            f"it nests too deeply ({error}): JSON holds 254 levels of lists and dicts, the "
            f"record's own few levels included. Keep state values flatter: a deep tree as a "
            f"list of nodes that name their parent's id"
        )
    return (
        f"it is not JSON data ({error}); records hold dicts with string keys, lists, "
        f"strings, numbers (integers within 64 bits), booleans and None"
    )


def _finite(ts: int | float) -> bool:
    # An int has no nan; math.isfinite would raise OverflowError beyond a float's range.
    return isinstance(ts, int) or math.isfinite(ts)


def misplaced(record: Record, thread_id: str, branch_id: str) -> str | None:
    """Say how ``record`` is not an event of the given thread and branch, or return None."""
    if record["thread"] != thread_id or record["branch"] != branch_id:
        return (
            f"it belongs to thread {record['thread']!r}, branch {record['branch']!r}, "
            f"not to thread {thread_id!r}, branch {branch_id!r}"
        )
    return None


def encode_events(
    thread_id: str,
    branch_id: str,
    records: Sequence[Record],
    first_seq: int,
    *,
    path: str | None = None,
) -> list[bytes]:
    """Check ``records`` as the next events of a branch and return their lines.

    The records must be event records of ``thread_id`` and ``branch_id``, numbered
    ``first_seq``, ``first_seq + 1``, ... and hold only JSON data.

    Args:
        thread_id: The thread appended to.
        branch_id: The branch appended to.
        records: The records, in order.
        first_seq: The sequence number the first record must have.
        path: The store's file, named in the error; ``None`` for a store without one.

    Returns:
        One line (``_codec.encode_event``) per record.

    Raises:
        StateStoreError: A record is refused; it says which one and why.
    """
    lines = []
    for i, record in enumerate(records):
        if (  # the engine's records, inline: the general checks below say what is wrong
            _plain_event(record)
            and record["seq"] == first_seq + i
            and record["thread"] == thread_id
            and record["branch"] == branch_id
        ):
            try:
                lines.append(_codec.encode_event(record))
                continue
            except TypeError:  # said below
                pass
        found = problem(record, EVENT_KEYS) or misplaced(record, thread_id, branch_id)
        if not found and record["seq"] != first_seq + i:
            found = f"its seq is {record['seq']}, but it must be {first_seq + i}"
        if not found:
            try:
                lines.append(_codec.encode_event(record))
            except TypeError as e:  # orjson.JSONEncodeError, e.g. an int beyond 64 bits
                found = _not_json(e)
        if found:
            kind = record.get("type") if isinstance(record, dict) else None
            what = f"record {i} (type {kind!r})" if isinstance(kind, str) else f"record {i}"
            where = f" in {path}" if path else ""
            raise StateStoreError(
                f"Cannot store {what} of thread {thread_id!r}, branch {branch_id!r}{where}: "
                f"{found}. Nothing was stored.",
                path=path,
            )
    return lines


def branch_problem(branch: Any) -> str | None:
    """Say what makes ``branch`` not a branch record a store can keep, or return None."""
    if not isinstance(branch, BranchRecord):
        return f"it is a {type(branch).__name__}, not a BranchRecord"
    found = problem(branch.to_json(), BRANCH_KEYS)
    if found:
        return f"in its record (BranchRecord.to_json()), {found}"
    if branch.from_sequence < 1:
        return (
            f"its from_sequence is {branch.from_sequence}, but a branch starts after an event "
            f"of its parent, whose seq is 1 or more"
        )
    return None


def encode_branch(
    branch: BranchRecord, first: Sequence[Record], *, path: str | None = None
) -> list[bytes]:
    """Check a new branch's record and first records; return the branch line, then theirs.

    The branch record must hold an id, a thread, a parent, a ``from_event_id`` (strings), a
    ``from_sequence`` of 1 or more and a finite ``created_at``; ``first`` must be events of
    that branch, numbered from ``from_sequence + 1``, the first of them a checkpoint (a
    branch's records are loaded from a checkpoint). A record any reader would refuse makes
    the whole file unreadable, for every thread, so nothing of it is written.

    Raises:
        StateStoreError: The branch record or a first record is refused; it says why.
    """
    found = branch_problem(branch)
    if found is None:
        lines = encode_events(
            branch.thread_id, branch.id, first, branch.from_sequence + 1, path=path
        )
        if not first or first[0]["type"] != "checkpoint":
            kind = f"a {first[0]['type']!r} record" if first else "no record"
            found = f"its first record must be a checkpoint, found {kind}"
        else:
            try:
                return [_codec.encode_branch(branch), *lines]
            except TypeError as e:  # orjson's error: from_sequence beyond 64 bits
                found = f"its record is not JSON data ({e})"
    what = getattr(branch, "id", None)
    thread = getattr(branch, "thread_id", None)
    where = f" in {path}" if path else ""
    raise StateStoreError(
        f"Cannot create branch {what!r} of thread {thread!r}{where}: {found}. Nothing was stored.",
        path=path,
    )


def encode_pruned(
    thread_id: str,
    branch_id: str,
    records: Sequence[Record],
    branch: BranchRecord | None,
    *,
    path: str | None = None,
) -> list[bytes]:
    """Check the kept records of a pruned branch, as an import stores them; return their lines.

    What ``prune`` leaves of a branch: its records from a checkpoint on, the first one's
    ``seq`` past where the branch starts (1 for ``"main"``, ``branch.from_sequence + 1``
    for a fork, whose ``branch`` record is checked too). The records must be events of the
    branch, numbered on from the first.

    Raises:
        StateStoreError: A record, or the branch record, is refused; it says why.
    """
    found = None if branch is None else branch_problem(branch)
    opening = 1 if branch is None else branch.from_sequence + 1
    if found is None and branch is not None and branch.id != branch_id:
        found = f"its branch record names branch {branch.id!r}"
    first = records[0] if records and isinstance(records[0], dict) else {}
    seq = first.get("seq")
    if found is None and first.get("type") != "checkpoint":
        found = f"its first record kept must be a checkpoint, found {first.get('type')!r}"
    elif found is None and (type(seq) is not int or seq <= opening):
        found = (
            f"its first record kept has seq {seq!r}; a pruned branch's starts after "
            f"{opening}, where the branch starts (else it is not pruned: store it whole)"
        )
    if found is not None:
        where = f" in {path}" if path else ""
        raise StateStoreError(
            f"Cannot store the pruned branch {branch_id!r} of thread {thread_id!r}{where}: "
            f"{found}. Nothing was stored.",
            path=path,
        )
    assert type(seq) is int  # checked above
    return encode_events(thread_id, branch_id, records, seq, path=path)


def check_pruned(
    thread_id: str,
    branch_id: str,
    records: Sequence[Record],
    branch: BranchRecord | None = None,
) -> None:
    """Check a pruned branch's kept records, before ``store_pruned`` stores any of them.

    The first must be a ``checkpoint`` whose ``seq`` is past the branch's opening (1 for
    ``"main"``; ``from_sequence + 1`` for a fork, whose ``branch`` record is checked as
    ``check_branch`` checks it), and the records must pass ``check_records`` from it.

    Args:
        thread_id: The thread.
        branch_id: The pruned branch.
        records: Its kept records, from the first.
        branch: The fork's branch record; ``None`` for ``"main"``.

    Raises:
        StateStoreError: A record or the branch record is refused; it says which and why.
    """
    encode_pruned(thread_id, branch_id, records, branch)


def check_records(
    thread_id: str, branch_id: str, records: Sequence[Record], first_seq: int
) -> None:
    """Check ``records`` as the next events of a branch, before storing any of them.

    Each must be a dict with ``id`` (a string), ``seq`` (``first_seq``, ``first_seq + 1``,
    ...), ``ts`` (a number), ``thread`` and ``branch`` (these ones), ``type`` (a string that
    is not one of the file store's own line types) and only JSON data: dicts with string
    keys, lists, strings, integers within 64 bits, floats, booleans and ``None``. The
    ``ts`` must be finite: JSON has no nan or infinity, and a record whose ``ts`` is
    written as ``null`` would make the file store's whole file unreadable.

    Args:
        thread_id: The thread appended to.
        branch_id: The branch appended to.
        records: The records, in order.
        first_seq: The sequence number the first record must have: ``after + 1`` for an
            append, ``branch.from_sequence + 1`` for a new branch.

    Raises:
        StateStoreError: A record is refused; it says which one, of which type, and why.
    """
    encode_events(thread_id, branch_id, records, first_seq)


def check_branch(branch: BranchRecord, first: Sequence[Record]) -> None:
    """Check a new branch's record and its first records, before storing any of them.

    The branch record must have string ``id``, ``thread_id``, ``parent_id`` (another
    branch) and ``from_event_id``, a ``from_sequence`` of 1 or more and a finite
    ``created_at``. ``first`` must pass ``check_records`` as the branch's records from
    ``from_sequence + 1``, and start with a ``checkpoint``: a branch is loaded from one.

    Args:
        branch: The branch to create.
        first: Its first records.

    Raises:
        StateStoreError: The branch record or a first record is refused; it says which and
            why.
    """
    encode_branch(branch, first)
