"""Move threads between stores: ``export_thread``, ``import_thread`` and ``copy_thread``.

An export is a list of plain JSON records, the thread's whole history as stores keep it:
the main branch's events, then each forked branch's record (``BranchRecord.to_json()``,
type ``"branch"``) followed by that branch's events, branches in the order they were made.
Records keep their ids, sequence numbers, timestamps and branches, so a thread imported
into another store (of any kind) has the same history, event for event: its states,
``get_state_history``, forks and time travel give what they gave in the first store.
"""

from __future__ import annotations

from collections.abc import Sequence

from nodestep._errors import StateStoreError, UnknownThreadError
from nodestep.store._checks import encode_branch, encode_events
from nodestep.store._contract import BranchRecord, Record, StateStore

__all__ = ["copy_thread", "export_thread", "import_thread"]

MAIN = "main"
_CHUNK = 500  # records an import appends at once: a few hundred kilobytes


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
    return records


def _split(records: Sequence[Record]) -> tuple[str, list[tuple[BranchRecord | None, list[Record]]]]:
    """Group an export by branch, checking every record before anything is stored."""
    if not records or not isinstance(records[0], dict) or "thread" not in records[0]:
        raise StateStoreError(
            "Cannot import: an export starts with the thread's first event (a dict with a "
            "'thread' key); give import_thread what export_thread returned."
        )
    thread_id = str(records[0]["thread"])
    groups: list[tuple[BranchRecord | None, list[Record]]] = [(None, [])]
    for i, record in enumerate(records):
        if isinstance(record, dict) and record.get("type") == "branch":
            try:
                branch = BranchRecord.from_json(record)
            except (KeyError, TypeError) as e:
                raise StateStoreError(
                    f"Cannot import thread {thread_id!r}: record {i} is a branch record "
                    f"without its {e} key; nothing was stored."
                ) from e
            groups.append((branch, []))
        else:
            groups[-1][1].append(record)
    for made, events in groups:
        if made is None:
            encode_events(thread_id, MAIN, events, 1)
        else:
            encode_branch(made, events)  # its thread, first checkpoint and numbering
    return thread_id, groups


async def import_thread(store: StateStore, records: Sequence[Record]) -> str:
    """Store an export (``export_thread``'s list) as a new thread of ``store``.

    Every record is checked before the first is stored; a thread the store already has
    records of is refused, so an import never mixes two histories.

    Returns:
        The thread's id.

    Raises:
        StateStoreError: A record is not what an export holds (it says which and why), or
            the store already has the thread; nothing was stored.
    """
    thread_id, groups = _split(records)
    if await store.last_sequence(thread_id, MAIN) or await store.list_branches(thread_id):
        raise StateStoreError(
            f"Cannot import thread {thread_id!r}: the store already has records of it, and an "
            f"import does not merge histories. Import into another store, or delete the "
            f"thread there first; nothing was stored."
        )
    for branch, events in groups:
        if branch is None:
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


async def copy_thread(source: StateStore, target: StateStore, thread_id: str) -> None:
    """Copy a thread's whole history from ``source`` into ``target``, which must lack it.

    Raises:
        UnknownThreadError: ``source`` has no record of the thread.
        StateStoreError: ``target`` already has records of the thread; nothing was stored.
    """
    await import_thread(target, await export_thread(source, thread_id))
