"""A branch's lineage: the records that made its state, across forks, read from a store alone.

A forked branch opens with a checkpoint of its parent's position at the fork event; the
writes that made that position are on the parent branch (and its parents). Provenance and
diffs follow that chain back, so a value written before a fork is named by the event that
wrote it, not by the fork's copy. The chain stops at the first checkpoint that has nothing
readable before it: a thread's opening checkpoint, a migration, a fork whose parent's
records were pruned, or the first record a prune kept.

Everything here reads stored JSON records only: no state class and no graph, so the
command line can answer with nothing but a store.
"""

from __future__ import annotations

from dataclasses import dataclass

from nodestep._engine.history_ops import check_event_id, check_ids, unknown_thread
from nodestep._engine.positions import MIGRATION_KEY
from nodestep._errors import StateStoreError, UnknownThreadError
from nodestep.store import BranchRecord, Record, StateStore

__all__ = [
    "Lineage",
    "Point",
    "base_kind",
    "branch_records",
    "parent_readable",
    "read_lineage",
    "resolve_point",
]


@dataclass(frozen=True, slots=True)
class Point:
    """One event of a thread: its id, branch and sequence number."""

    event_id: str
    branch_id: str
    sequence: int


@dataclass(frozen=True, slots=True)
class Lineage:
    """The records from a base checkpoint to a point, oldest first, across forks.

    Attributes:
        point: The last event.
        records: The records; the first is the base checkpoint. A fork's opening checkpoint
            is left out when its parent's records are read instead.
        base: What the base checkpoint is: ``"defaults"``, ``"migration"``, ``"fork"`` or
            ``"checkpoint"`` (the first record a prune kept).
    """

    point: Point
    records: list[Record]
    base: str


def base_kind(record: Record, branches: dict[str, BranchRecord]) -> str:
    """Return what a base checkpoint stands for (see ``Lineage.base``)."""
    if MIGRATION_KEY in record:
        return "migration"
    fork = branches.get(record["branch"])
    if fork is not None and record["seq"] == fork.from_sequence + 1:
        return "fork"
    if record["branch"] == "main" and record["seq"] == 1:
        return "defaults"
    return "checkpoint"


async def resolve_point(
    store: StateStore,
    thread_id: str,
    ref: str | None,
    branch_id: str | None,
    branches: dict[str, BranchRecord],
    what: str,
) -> Point:
    """Return the point ``ref`` names: an event id, or a branch id (its head).

    With ``ref=None`` the point is the head of ``branch_id`` (``"main"`` when ``None``).

    Raises:
        GraphConfigError: an id is not a non-empty string.
        UnknownThreadError: the thread, branch or event does not exist, or the event is on
            another branch than ``branch_id``.
    """
    if ref is None or ref == branch_id or ref in branches or ref == "main":
        branch = branch_id if ref is None else ref
        branch = branch or "main"
        check_ids(thread_id, branch)
        seq = await store.last_sequence(thread_id, branch)
        last = await store.read(thread_id, branch, start=seq, stop=seq) if seq else []
        if not last:
            raise unknown_thread(thread_id, branch)
        return Point(last[0]["id"], branch, seq)
    found = await store.locate(thread_id, check_event_id(ref, what))
    if found is None:
        known = ", ".join(repr(b) for b in ["main", *branches])
        raise UnknownThreadError(
            f"Thread '{thread_id}' has no branch or event '{ref}' ({what}). Pass a branch id "
            f"(the thread has {known}) or an event id from history(thread_id).events.",
            thread_id=thread_id,
            branch_id=branch_id,
        )
    event_branch, seq = found
    if branch_id is not None and event_branch != branch_id:
        raise UnknownThreadError(
            f"Event '{ref}' of thread '{thread_id}' is on branch '{event_branch}', not on "
            f"'{branch_id}'. Leave branch_id out, or pass branch_id='{event_branch}'.",
            thread_id=thread_id,
            branch_id=branch_id,
        )
    return Point(ref, event_branch, seq)


async def read_lineage(
    store: StateStore, thread_id: str, point: Point, branches: dict[str, BranchRecord]
) -> Lineage:
    """Return the records that made the state at ``point``, from its base checkpoint.

    Raises:
        StateStoreError: a branch's records do not start with a checkpoint.
    """
    records = await _chain(store, thread_id, point.branch_id, point.sequence, branches)
    return Lineage(point, records, base_kind(records[0], branches))


async def _chain(
    store: StateStore,
    thread_id: str,
    branch_id: str,
    stop: int,
    branches: dict[str, BranchRecord],
) -> list[Record]:
    records = await branch_records(store, thread_id, branch_id, stop)
    fork = branches.get(branch_id)
    first = records[0]
    if fork is None or first["seq"] != fork.from_sequence + 1 or MIGRATION_KEY in first:
        return records
    parent = await parent_readable(store, thread_id, fork.parent_id, fork.from_sequence)
    if not parent:  # the parent's records before the fork were pruned: the fork is the base
        return records
    before = await _chain(store, thread_id, fork.parent_id, fork.from_sequence, branches)
    return before + records[1:]


async def parent_readable(store: StateStore, thread_id: str, branch_id: str, stop: int) -> bool:
    """Tell whether a branch still holds its record ``stop`` (a prune may have dropped it)."""
    return bool(await store.read(thread_id, branch_id, start=stop, stop=stop))


async def branch_records(
    store: StateStore, thread_id: str, branch_id: str, stop: int
) -> list[Record]:
    """Read the branch up to ``stop`` from its last migration, or from its first record.

    Records before a migration hold another state class's values; the migration's
    checkpoint wrote every value anew, so the lineage starts there.
    """
    records = await store.read(thread_id, branch_id, stop=stop)
    if not records:
        raise unknown_thread(thread_id, branch_id)
    start = 0
    for index, record in enumerate(records):
        if MIGRATION_KEY in record:
            start = index
    records = records[start:]
    if records[0]["type"] != "checkpoint":
        raise StateStoreError(
            f"History of thread '{thread_id}' (branch '{branch_id}') does not start with a "
            f"checkpoint: record {records[0].get('seq')} is a '{records[0]['type']}' record."
        )
    return records
