"""Move threads between stores: ``export_thread``, ``import_thread`` and ``copy_thread``.

An export is a list of plain JSON records, the thread's whole history as stores keep it:
the main branch's events, then each forked branch's record (``BranchRecord.to_json()``,
type ``"branch"``) followed by that branch's events, branches in the order they were made.
Records keep their ids, sequence numbers, timestamps and branches, so a thread imported
into another store (of any kind) has the same history, event for event: its states,
``get_state_history``, forks and time travel give what they gave in the first store.

The last record of an export is its checksum (type ``"export_checksum"``): the number of
records before it, the CRC-32 of each and the SHA-256 of them all, each record taken as
the line ``orjson.dumps(record, option=OPT_SORT_KEYS)`` plus ``"\n"`` (the form does not
depend on the order of keys, so an export saved and loaded as JSON checks the same).
``import_thread`` checks it first: a record changed, added, lost or moved is refused,
naming its position, before anything is stored. An export without a checksum, as
nodestep 0.1 wrote them, is imported with the other checks only.

An export of a pruned thread holds what the prune kept: a pruned branch starts at a
checkpoint past the branch's opening (``seq`` greater than 1 on ``main``), and a fork may
be made from an event its parent no longer holds. ``import_thread`` stores such a branch
with ``StateStore.store_pruned``, which keeps it as that store's own ``prune`` does, so it
reads, runs and forks as in the first store.
"""

from __future__ import annotations

import hashlib
import zlib
from collections.abc import Sequence
from typing import Any

import orjson

from nodestep._errors import StateStoreError, UnknownThreadError
from nodestep.store._checks import encode_branch, encode_events, encode_pruned
from nodestep.store._contract import BranchRecord, Record, StateStore

__all__ = ["copy_thread", "export_thread", "import_thread"]

MAIN = "main"
_CHUNK = 500  # records an import appends at once: a few hundred kilobytes

CHECKSUM = "export_checksum"
"""The type of an export's last record, its checksum (see the module docstring)."""

EVENT_TYPES = frozenset(
    {
        "checkpoint",
        "run_started",
        "task_finished",
        "superstep_completed",
        "run_paused",
        "run_failed",
        "run_stopped",
        "run_completed",
        "state_updated",
        "task_retried",
        "breaker_changed",
        "subgraph",
    }
)
"""The event types nodestep writes (``docs/history.md``); an import refuses any other."""


async def export_thread(store: StateStore, thread_id: str) -> list[Record]:
    """Return every record of a thread, to give to ``import_thread``.

    Raises:
        UnknownThreadError: ``store`` has no record of the thread.
    """
    records = await store.read(thread_id, MAIN)
    for branch in await store.list_branches(thread_id):
        records.append(branch.to_json())
        records.extend(await store.read(thread_id, branch.id))
    if not records:
        raise UnknownThreadError(
            f"Cannot export thread {thread_id!r}: the store has no record of it. Check the "
            f"thread id, and that this is the store its runs wrote to.",
            thread_id=thread_id,
        )
    crcs, total = _sums(records, thread_id)
    records.append({"type": CHECKSUM, "records": len(crcs), "sha256": total, "crc32": crcs})
    return records


def _line(record: Any, thread_id: str, position: int) -> bytes:
    try:
        return orjson.dumps(record, option=orjson.OPT_SORT_KEYS) + b"\n"
    except TypeError as e:
        raise _refused(thread_id, position, f"it is not JSON data ({e})", "") from e


def _sums(records: Sequence[Any], thread_id: str) -> tuple[list[int], str]:
    """Return each record's CRC-32 and the SHA-256 of them all, as the checksum holds."""
    total = hashlib.sha256()
    crcs = []
    for i, record in enumerate(records):
        line = _line(record, thread_id, i + 1)
        total.update(line)
        crcs.append(zlib.crc32(line))
    return crcs, total.hexdigest()


def _refused(thread_id: str, position: int, what: str, fix: str) -> StateStoreError:
    """The error for the export's record at ``position`` (1-based: its line in a file)."""
    return StateStoreError(
        f"Cannot import thread {thread_id!r}: record {position} of the export (line "
        f"{position} as JSON Lines) {what}; nothing was stored.{fix}"
    )


def _verified(records: Sequence[Record]) -> Sequence[Record]:
    """Check an export's checksum record, if it has one; return the records before it.

    Raises:
        StateStoreError: A record does not match the checksum; it says which.
    """
    last = records[-1] if records else None
    if not isinstance(last, dict) or last.get("type") != CHECKSUM:
        return records  # nodestep 0.1 wrote no checksum: see the module docstring
    body = records[:-1]
    first = body[0] if body and isinstance(body[0], dict) else {}
    thread_id = str(first.get("thread", "?"))
    crcs, count, total = last.get("crc32"), last.get("records"), last.get("sha256")
    redo = " Export the thread again from its store, or restore the file from a copy."
    if not isinstance(crcs, list) or count != len(crcs) or not isinstance(total, str):
        raise _refused(thread_id, len(records), "is a damaged checksum record", redo)
    if len(body) != count:
        what = f"is the checksum, which counts {count} records before it, not {len(body)}"
        raise _refused(thread_id, len(records), what, f" Records were added or lost.{redo}")
    found, found_total = _sums(body, thread_id)
    for i, (want, got) in enumerate(zip(crcs, found, strict=True)):
        if want != got:
            what = f"does not match its checksum (CRC-32 {got:08x}, the export says {want:08x})"
            raise _refused(thread_id, i + 1, what, f" It was changed since the export.{redo}")
    if found_total != total:
        what = "is the checksum, and the SHA-256 of the records before it differs"
        raise _refused(thread_id, len(records), what, f" A record was changed.{redo}")
    return body


def _split(records: Sequence[Record]) -> tuple[str, list[tuple[BranchRecord | None, list[Record]]]]:
    """Group an export by branch, checking every record before anything is stored."""
    if not records or not isinstance(records[0], dict) or "thread" not in records[0]:
        raise StateStoreError(
            "Cannot import: an export starts with the thread's first event (a dict with a "
            "'thread' key); give import_thread what export_thread returned."
        )
    thread_id = str(records[0]["thread"])
    groups: list[tuple[BranchRecord | None, list[Record]]] = [(None, [])]
    seen = _Seen(thread_id)
    for i, record in enumerate(records):
        if isinstance(record, dict) and record.get("type") == "branch":
            try:
                branch = BranchRecord.from_json(record)
            except (KeyError, TypeError) as e:
                what = f"is a branch record without its {e} key"
                raise _refused(thread_id, i + 1, what, "") from e
            seen.branch(branch, i + 1)
            groups.append((branch, []))
        else:
            seen.event(record, i + 1)
            groups[-1][1].append(record)
    for made, events in groups:
        if _pruned(made, events):
            encode_pruned(thread_id, MAIN if made is None else made.id, events, made)
        elif made is None:
            encode_events(thread_id, MAIN, events, 1)
        else:
            encode_branch(made, events)  # its thread, first checkpoint and numbering
    return thread_id, groups


def _pruned(branch: BranchRecord | None, events: Sequence[Record]) -> bool:
    """Whether ``events``, a branch's in an export, start past its opening: a pruned branch.

    Only one that starts at a checkpoint counts; any other gap is refused as the records'
    numbering, by the checks of a branch stored whole.
    """
    first = events[0] if events and isinstance(events[0], dict) else {}
    seq = first.get("seq")
    opening = 1 if branch is None else branch.from_sequence + 1
    return first.get("type") == "checkpoint" and type(seq) is int and seq > opening


class _Seen:
    """What an import has read of an export so far: the event ids, and the branches."""

    def __init__(self, thread_id: str) -> None:
        self.thread_id = thread_id
        # Each id's places (branch, seq): a thread that two writers counting ids alike
        # wrote (two graphs with sequential_ids()) holds an id twice, as its store does.
        self.ids: dict[str, list[tuple[str, Any]]] = {}
        self.branches = {MAIN}
        self.first: dict[str, int] = {}  # branch -> seq of its first record in the export

    def event(self, record: Any, position: int) -> None:
        """Refuse an event of an unknown type; note its id's place."""
        if not isinstance(record, dict):
            return  # encode_events names what it is
        kind = record.get("type")
        if kind not in EVENT_TYPES:
            raise _refused(
                self.thread_id,
                position,
                f"has the unknown type {kind!r}",
                f" An export holds events of the types {', '.join(sorted(EVENT_TYPES))} and "
                f"'branch' records; export the thread again with export_thread, or import it "
                f"with the nodestep version that wrote it.",
            )
        event_id = record.get("id")
        if isinstance(event_id, str):
            where = (str(record.get("branch")), record.get("seq", 0))
            self.ids.setdefault(event_id, []).append(where)
        seq = record.get("seq")
        if type(seq) is int:
            self.first.setdefault(str(record.get("branch")), seq)

    def branch(self, branch: BranchRecord, position: int) -> None:
        """Refuse a branch forked from a branch or event not earlier in the export.

        An event a prune dropped from the parent (its ``seq`` before the parent's first
        in the export) is not held, and need not be: the fork loads from its own records.
        """
        fix = (
            " A branch record follows the records of the branch it forks, with the id and "
            "seq of the event it forks from; export the thread again with export_thread."
        )
        if branch.parent_id not in self.branches:
            what = f"forks branch {branch.id!r} from branch {branch.parent_id!r}, not before it"
            raise _refused(self.thread_id, position, what, fix)
        at = self.ids.get(branch.from_event_id)
        kept_from = self.first.get(branch.parent_id)
        dropped = at is None and kept_from is not None and branch.from_sequence < kept_from
        if not dropped and (at is None or (branch.parent_id, branch.from_sequence) not in at):
            what = (
                f"forks branch {branch.id!r} from event {branch.from_event_id!r} (seq "
                f"{branch.from_sequence} of branch {branch.parent_id!r}), which the export "
                f"does not hold"
            )
            raise _refused(self.thread_id, position, what, fix)
        self.branches.add(branch.id)


async def import_thread(store: StateStore, records: Sequence[Record]) -> str:
    """Store an export (``export_thread``'s list) as a new thread of ``store``.

    Every record is checked before the first is stored: the export's checksum (see the
    module docstring), then each record: an event of a known type, numbered on from its
    branch's last; a branch record after the records of the branch it forks, naming an
    event of it. An id that two events share (a thread two graphs with ``sequential_ids()``
    wrote) is stored as the first store kept it: each store's ``locate`` takes the same
    copy of it. A thread the store already has records of is refused, so an import never
    mixes two histories.

    Returns:
        The thread's id.

    Raises:
        StateStoreError: A record is not what an export holds, or does not match the
            export's checksum (it says which, by its position, and why), or the store
            already has the thread; nothing was stored.
    """
    thread_id, groups = _split(_verified(records))
    if await store.last_sequence(thread_id, MAIN) or await store.list_branches(thread_id):
        raise StateStoreError(
            f"Cannot import thread {thread_id!r}: the store already has records of it, and an "
            f"import does not merge histories. Import into another store, or delete the "
            f"thread there first; nothing was stored."
        )
    for branch, events in groups:
        if _pruned(branch, events):
            branch_id = MAIN if branch is None else branch.id
            after, rest = events[0]["seq"], events[1:]
            await _store_pruned(store, thread_id, branch_id, events[:1], branch)
        elif branch is None:
            branch_id, after, rest = MAIN, 0, events
        else:
            branch_id, after, rest = branch.id, events[0]["seq"], events[1:]
            if not await store.create_branch(branch, events[:1]):
                raise StateStoreError(
                    f"Cannot import thread {thread_id!r}: its export has branch {branch.id!r} "
                    f"twice; the records before it were stored."
                )
        for start in range(0, len(rest), _CHUNK):
            chunk = rest[start : start + _CHUNK]
            await store.append(thread_id, branch_id, chunk, after=after)
            after = chunk[-1]["seq"]
    return thread_id


async def _store_pruned(
    store: StateStore,
    thread_id: str,
    branch_id: str,
    first: Sequence[Record],
    branch: BranchRecord | None,
) -> None:
    """Store a pruned branch's first kept record (``StateStore.store_pruned``).

    Raises:
        StateStoreError: The store cannot keep a pruned branch; it says which and why.
    """
    try:
        await store.store_pruned(thread_id, branch_id, first, branch)
    except NotImplementedError as e:
        raise StateStoreError(
            f"Cannot import thread {thread_id!r}: its branch {branch_id!r} was pruned (its "
            f"first record kept is a checkpoint at seq {first[0]['seq']}), and "
            f"{type(store).__name__} cannot keep a pruned branch: it does not implement "
            f"store_pruned(). Import into a store that does (InMemoryStateStore, "
            f"FilesystemStateStore, SQLiteStateStore, PostgresStateStore), or implement it. "
            f"The records of the branches before it were stored."
        ) from e


async def copy_thread(source: StateStore, target: StateStore, thread_id: str) -> None:
    """Copy a thread's whole history from ``source`` into ``target``, which must lack it.

    Raises:
        UnknownThreadError: ``source`` has no record of the thread.
        StateStoreError: ``target`` already has records of the thread; nothing was stored.
    """
    await import_thread(target, await export_thread(source, thread_id))
