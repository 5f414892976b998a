"""Read and change a thread's stored history outside a run: time travel, edits and forks."""

from __future__ import annotations

from typing import Any

from nodestep._engine.compiled import ThreadServices
from nodestep._engine.history import History, HistoryEvent, StateSnapshot
from nodestep._engine.interrupts import Interrupt
from nodestep._engine.positions import Latest, load_position, raise_damaged
from nodestep._engine.writer import HistoryWriter, stamp
from nodestep._errors import (
    GraphConfigError,
    InvalidUpdateError,
    StateStoreError,
    UnknownThreadError,
)
from nodestep._state.channels import FieldWrite
from nodestep._state.schema import StateSchema
from nodestep._superstep import machine
from nodestep._superstep.position import Position
from nodestep._superstep.records import Checkpoint, HistoryRecord, StateUpdated
from nodestep._superstep.replay import DAMAGE, damaged
from nodestep.store import BranchRecord, StateStore

__all__ = [
    "ID_TEXT",
    "MAX_ID_BYTES",
    "branches",
    "cached_latest",
    "check_branch_id",
    "check_event_id",
    "check_ids",
    "check_storable",
    "check_thread_id",
    "exists",
    "fork",
    "get_state",
    "history",
    "load",
    "odd_character",
    "refuse_odd_id",
    "shown_id",
    "snapshot_of",
    "unknown_thread",
    "update_state",
]


def check_ids(thread_id: Any, branch_id: Any = "main") -> None:
    """Refuse a thread or branch id that is not a non-empty string, as every call does.

    Runs (``check_thread_id`` and ``check_branch_id``) and thread methods share these
    checks, so a thread one of them could create is one the others can use. A call checks
    them before its store sees them: a store given another type or odd text fails in its
    own way (PostgreSQL compares no text to a number).

    Raises:
        GraphConfigError: ``thread_id`` or ``branch_id`` is not a non-empty string, or
            holds a character no store can keep, or is longer than ``MAX_ID_BYTES``
            (``odd_character``).
    """
    # The common ids in one expression, without a call: ASCII text (whose length is its
    # size in bytes) on the main branch. Why: get_state of a cached thread takes a few
    # µs, and the two checks' calls took 0.3 of them.
    if (
        type(thread_id) is str
        and 0 < len(thread_id) <= MAX_ID_BYTES
        and thread_id.isascii()
        and _NUL not in thread_id
        and branch_id == "main"
    ):
        return
    check_thread_id(thread_id)
    check_branch_id(branch_id)


def check_thread_id(thread_id: Any) -> None:
    """Refuse a ``thread_id`` that is not a non-empty string (see ``check_ids``)."""
    if not isinstance(thread_id, str) or not thread_id:
        raise GraphConfigError(
            f"thread_id must be a non-empty string, got {thread_id!r}. Name the thread, e.g. "
            f"thread_id='user-42'."
        )
    refuse_odd_id(
        thread_id, "thread_id", "Name the thread with other text, e.g. thread_id='user-42'."
    )


def check_branch_id(branch_id: Any) -> None:
    """Refuse a ``branch_id`` that is not a non-empty string (see ``check_ids``)."""
    if not isinstance(branch_id, str) or not branch_id:
        raise GraphConfigError(
            f"branch_id must be a non-empty string, got {branch_id!r}. Leave it out for the "
            f"main branch, or pass the id of a fork."
        )
    refuse_odd_id(
        branch_id, "branch_id", "Leave it out for the main branch, or pass the id of a fork."
    )


_NUL = "\x00"

MAX_ID_BYTES = 512
"""The most bytes (in UTF-8) a thread id, branch id or request key may have.

PostgreSQL indexes the thread, branch and request key of every event together, and an
index entry holds at most 2,704 bytes: a longer id fails there, though the other stores
keep it. Three ids of 512 bytes fit with room to spare, so every store keeps every id.
"""

ID_TEXT = (
    f"An id may hold up to {MAX_ID_BYTES} bytes (in UTF-8) of any text but NUL characters "
    f"and lone surrogates (half of a UTF-16 pair, such as a cut emoji): that much every "
    f"store can keep."
)


def odd_character(text: str) -> str | None:
    """Say what of an id no store can keep: a character and where, or its length.

    ``None`` if every store can keep it. PostgreSQL keeps no NUL character in text, and
    UTF-8 (every store's encoding) cannot encode a lone surrogate; PostgreSQL indexes no
    id longer than ``MAX_ID_BYTES`` with the others. So such an id would work on one store
    and fail on another. Why it costs nothing a call: ``in`` is a ``memchr``, and
    ``isascii`` reads the flag CPython keeps on every str; only non-ASCII text is encoded,
    once.
    """
    if _NUL in text:
        return f"a NUL character ('\\x00') at index {text.index(_NUL)}"
    if text.isascii():
        size = len(text)
    else:
        try:
            size = len(text.encode())
        except UnicodeEncodeError as bad:
            return f"the lone surrogate {text[bad.start]!r} at index {bad.start}"
    if size > MAX_ID_BYTES:
        return f"{size} bytes in UTF-8, more than the {MAX_ID_BYTES} an id may have"
    return None


def refuse_odd_id(text: str, label: str, fix: str) -> None:
    """Refuse an id no store can keep (``odd_character``).

    Raises:
        GraphConfigError: naming the id by ``label`` (``"thread_id"``), what of it no store
            keeps, the rule, and ``fix``.
    """
    found = odd_character(text)
    if found is not None:
        raise GraphConfigError(f"{label} {shown_id(text)} holds {found}. {ID_TEXT} {fix}")


def shown_id(text: str) -> str:
    """Return ``repr(text)``, cut after 60 characters: an id too long to keep is too long
    to print whole in a message."""
    if len(text) <= 60:
        return repr(text)
    return f"{text[:60]!r}... ({len(text)} characters)"


def check_event_id(value: Any, what: str) -> str:
    """Return ``value`` if it is an event id (a non-empty string); else refuse it.

    Text that no id can hold (``odd_character``) is refused too: no event has it, and a
    store would fail on it in its own way before saying so.

    Raises:
        GraphConfigError: ``value`` is not a non-empty string, or holds a NUL character
            or a lone surrogate, or is longer than ``MAX_ID_BYTES``; ``what`` names the
            argument.
    """
    found = None
    if isinstance(value, str) and value:
        found = odd_character(value)
        if found is None:
            return value
    held = "" if found is None else f": it holds {found}, which no event id has"
    got = shown_id(value) if isinstance(value, str) else repr(value)
    raise GraphConfigError(
        f"{what} takes the id of a history event (a non-empty string), got {got}{held}. "
        f"Take event ids from history(thread_id).events or from a result's checkpoint_id."
    )


def unknown_thread(thread_id: str, branch_id: str) -> UnknownThreadError:
    """Return the error for a thread (or branch) with no history.

    An id that no thread can have is refused as such instead: the check costs nothing on
    the paths that find a thread, which call this only when they found none.

    Raises:
        GraphConfigError: ``thread_id`` or ``branch_id`` is not a non-empty string.
    """
    check_ids(thread_id, branch_id)
    if branch_id == "main":
        fix = (
            f"Check the thread_id, or start the thread with invoke(input, thread_id='{thread_id}')."
        )
    else:  # a run on main would not make the branch: only a fork does
        fix = (
            f"Check the thread_id and branch_id (branches('{thread_id}') lists the thread's "
            f"branches), or create the branch with fork('{thread_id}', from_=event_id, "
            f"name='{branch_id}')."
        )
    where = "" if branch_id == "main" else f" on branch '{branch_id}'"
    return UnknownThreadError(
        f"Thread '{thread_id}' has no history{where}. {fix}",
        thread_id=thread_id,
        branch_id=branch_id,
    )


async def exists(store: StateStore, thread_id: str, branch_id: str) -> bool:
    check_ids(thread_id, branch_id)
    return await store.last_sequence(thread_id, branch_id) > 0


async def history(store: StateStore, thread_id: str, branch_id: str) -> History:
    check_ids(thread_id, branch_id)
    records = await store.read(thread_id, branch_id)
    return History(thread_id, branch_id, [HistoryEvent.from_record(r) for r in records])


async def position_at(
    graph: ThreadServices,
    store: StateStore,
    thread_id: str,
    branch_id: str | None,
    at: str | None,
    what: str = "at=",
) -> tuple[Position, str]:
    """Return the thread's position at event ``at`` and that event's branch, or its latest.

    Args:
        graph: The graph's services.
        store: The store.
        thread_id: The thread.
        branch_id: The branch ``at`` must be on; ``None`` takes the event wherever it is
            (and the main branch when ``at`` is ``None``).
        at: An event id, or ``None`` for the branch's latest position.
        what: The argument that gave ``at``, for the error of one that is not an event id.

    Raises:
        GraphConfigError: ``at`` is not an event id.
        UnknownThreadError: the thread, branch or event does not exist, or the event is on
            another branch than ``branch_id``.
    """
    check_ids(thread_id, branch_id or "main")
    if at is None:
        branch = branch_id or "main"
        pos = await load_position(store, graph.schema, thread_id, branch, cache=graph.positions)
        if pos is None:
            raise unknown_thread(thread_id, branch)
        return pos, branch
    found = await store.locate(thread_id, check_event_id(at, what))
    if found is None:
        fix = await _event_id_fix(store, thread_id, at)
        raise UnknownThreadError(
            f"Thread '{thread_id}' has no event '{at}'. {fix}",
            thread_id=thread_id,
            branch_id=branch_id or "main",
        )
    event_branch, seq = found
    if branch_id is not None and event_branch != branch_id:
        raise UnknownThreadError(
            f"Event '{at}' of thread '{thread_id}' is on branch '{event_branch}', not on "
            f"branch '{branch_id}'. Pass branch_id='{event_branch}' to read or fork it there.",
            thread_id=thread_id,
            branch_id=branch_id,
        )
    pos = await load_position(store, graph.schema, thread_id, event_branch, at=seq)
    if pos is None:  # pragma: no cover - locate found it, so the branch has records
        raise unknown_thread(thread_id, event_branch)
    return pos, event_branch


async def _event_id_fix(store: StateStore, thread_id: str, at: str) -> str:
    """Return the fix for ``at=``/``from_=`` given an id that names no event of the thread.

    A subgraph run's records have ids of their own, numbered within that run
    (``subgraph_state`` gives them); the event that holds such a record is the one to pass.
    Only a call that fails reads the branches to find it.
    """
    if await store.last_sequence(thread_id, "main") > 0:
        # Every branch: the holding event may be on the branch a fork was made from.
        for name in ["main", *(b.id for b in await store.list_branches(thread_id))]:
            for body in await store.read(thread_id, name):
                path: list[str] = []
                record: Any = body
                while isinstance(record, dict) and record.get("type") == "subgraph":
                    path.append(str(record.get("task")))
                    record = record.get("record")
                    if isinstance(record, dict) and record.get("id") == at:
                        return (
                            f"It is the id of a record of the subgraph run at '{'/'.join(path)}', "
                            f"numbered within that run (as subgraph_state gives it); pass the "
                            f"id of the thread's event that holds it, '{body['id']}' (branch "
                            f"'{name}')."
                        )
    return "Take event ids from history(thread_id).events or from a result's checkpoint_id."


async def load(
    graph: ThreadServices,
    store: StateStore,
    thread_id: str,
    branch_id: str | None,
    at: str | None,
) -> dict[str, Any]:
    pos, _ = await position_at(graph, store, thread_id, branch_id, at)
    return dict(pos.values)


async def get_state(
    graph: ThreadServices,
    store: StateStore,
    thread_id: str,
    branch_id: str | None,
    at: str | None,
) -> StateSnapshot[Any]:
    pos, branch = await position_at(graph, store, thread_id, branch_id, at)
    try:
        return snapshot_of(graph.schema, pos, thread_id, branch)
    except DAMAGE as error:  # a stored interrupt, decoded only here
        bodies = await store.read_tail(thread_id, branch, at=pos.seq)
        held = [b for b in bodies if "interrupts" in b]  # the last of them set them
        body = held[-1] if held else bodies[-1]
        problem = damaged(body["type"], body, error, "a pending interrupt")
        problem.__cause__ = error
        await raise_damaged(problem, store, graph.schema, thread_id, branch, body)


def snapshot_of(
    schema: StateSchema, pos: Position, thread_id: str, branch_id: str
) -> StateSnapshot[Any]:
    """Return the ``StateSnapshot`` of ``pos``; the snapshot shares no mutable value.

    Its ``interrupts`` are those ``resume=`` may answer (``Position.open_interrupts``): at
    a resume's ``run_started``, and after it until the superstep completes, the stored
    answers have answered them, and ``invoke(None)`` goes on with those answers.
    """
    failure = pos.failure
    return StateSnapshot(
        value=schema.instance(pos.values),
        sequence=pos.seq,
        event_id=pos.event_id,
        thread_id=thread_id,
        branch_id=branch_id,
        status=pos.status,
        next=tuple(t.task_id for t in pos.pending_tasks()),
        interrupts={k: Interrupt.from_json(v) for k, v in pos.open_interrupts().items()},
        error_type=None if failure is None else failure.error,
        error_message=None if failure is None else failure.message,
        failed_node=None if failure is None else failure.node,
    )


async def update_state(
    graph: ThreadServices,
    store: StateStore,
    thread_id: str,
    values: Any,
    *,
    branch_id: str,
    create: bool,
) -> str:
    """Apply ``values`` as ``update_state`` does; return the new event's id."""
    check_ids(thread_id, branch_id)
    schema = graph.schema
    pos, records = await edit_start(graph, store, thread_id, branch_id, create)
    writes = schema.validate_update(values, "update_state")
    check_storable(schema, writes, thread_id)
    _check_edit(schema, pos, writes, thread_id)
    return await edit_commit(graph, store, thread_id, branch_id, pos, records, StateUpdated(writes))


async def edit_start(
    graph: ThreadServices, store: StateStore, thread_id: str, branch_id: str, create: bool
) -> tuple[Position, list[HistoryRecord]]:
    """Return the position an edit of the branch starts from, and the records it writes
    first: a new thread's checkpoint when ``create`` lets an edit start the thread.

    Raises:
        UnknownThreadError: the branch has no history, and the edit may not start it.
    """
    pos = await load_position(store, graph.schema, thread_id, branch_id, cache=graph.positions)
    if pos is not None:
        return pos, []
    if not create or branch_id != "main":
        raise unknown_thread(thread_id, branch_id)
    defaults = graph.schema.defaults()
    return machine.new_thread(defaults), [Checkpoint(machine.new_thread(defaults))]


async def edit_commit(
    graph: ThreadServices,
    store: StateStore,
    thread_id: str,
    branch_id: str,
    pos: Position,
    records: list[HistoryRecord],
    record: HistoryRecord,
) -> str:
    """Advance ``pos`` with an edit's ``record``, store it after ``records``, keep the
    position in the graph's cache; return the new event's id."""
    schema = graph.schema
    record.advance(schema, pos)
    writer = HistoryWriter(store, schema, thread_id, branch_id, pos, graph.new_id, graph.clock)
    event_id = await writer.commit([*records, record])
    graph.positions.put(store, schema, thread_id, branch_id, pos)
    return event_id


def check_storable(schema: StateSchema, writes: list[FieldWrite], thread_id: str) -> None:
    """Refuse an ``update_state`` whose values have no JSON form, saying it is that call.

    The record is written later, by the store's code: its error would name the field,
    not the call that gave the value.

    Raises:
        StateStoreError: a value cannot be stored as JSON.
    """
    try:
        schema.writes_to_json(writes)
    except StateStoreError as error:
        raise StateStoreError(
            f"update_state on thread '{thread_id}' got a value it cannot store: {error}"
        ) from None


def _check_edit(schema: StateSchema, pos: Position, writes: list[FieldWrite], thread: str) -> None:
    """Refuse an edit of a field that a finished task of the pending superstep wrote.

    The superstep's merge will apply that task's write over the edited values. A write
    that replaces (a field without a merging reducer, or a ``Replace(...)``) would drop
    the edit without a word, and an edit that replaces would drop the task's write, so
    either is refused; an edit that merges with merging writes is applied.
    """
    if not pos.done:
        return
    for key, _value, replace in writes:
        merging = schema.channels[key].merging
        found = [(r.node, w[2]) for r in pos.done.values() for w in r.writes if w[0] == key]
        if not found:
            continue
        replacers = sorted({n for n, replaced in found if replaced or not merging})
        if merging and not replace and not replacers:
            continue
        writers = sorted({n for n, _ in found})
        shown = ", ".join(f"'{w}'" for w in writers)
        fix = f"Edit other fields, or give '{key}' a merging reducer."
        if not merging:
            why = "it has no merging reducer"
        elif replace:
            why = "a Replace(...) edit does not merge with that write"
        else:
            why = (
                f"{', '.join(repr(n) for n in replacers)} wrote it with Replace(...), which "
                f"the merge of that superstep applies over any edit"
            )
            fix = f"Edit '{key}' after the superstep completed, or edit other fields."
        raise InvalidUpdateError(
            f"Field '{key}' of thread '{thread}' was already written by {shown} in "
            f"the unfinished superstep {pos.step}, and {why}, so update_state cannot "
            f"change it. {fix}",
            field=key,
            writers=[*writers, "update_state"],
            step=pos.step,
        )


async def fork(
    graph: ThreadServices,
    store: StateStore,
    thread_id: str,
    from_: str,
    name: str | None,
    branch_id: str | None = None,
) -> BranchRecord:
    """Start a branch of ``thread_id`` at event ``from_``; return its record.

    ``branch_id`` names the branch that holds ``from_``; ``None`` takes it from the event.

    Raises:
        UnknownThreadError: the thread, the branch or the event does not exist, or the
            event is on another branch than ``branch_id``.
        GraphConfigError: ``from_`` is not an event id, or ``name`` is not a usable branch
            id, or is taken.
    """
    if name is not None:
        _check_branch_name(name)
    check_event_id(from_, "fork(from_=...)")
    if branch_id is not None:
        check_ids(thread_id, branch_id)
        if await store.last_sequence(thread_id, branch_id) == 0:
            raise unknown_thread(thread_id, branch_id)
    pos, parent = await position_at(graph, store, thread_id, branch_id, from_)
    seq = pos.seq
    new_branch = name or graph.hex_id()[-12:]  # the varying end, also of sequential ids
    now = graph.clock()
    record = BranchRecord(new_branch, thread_id, parent, from_, seq, now)
    body = Checkpoint(pos).to_json(graph.schema)
    checkpoint = stamp(body, graph.new_id(), seq + 1, now, thread_id, new_branch)
    if not await store.create_branch(record, [checkpoint]):
        raise GraphConfigError(
            f"Thread '{thread_id}' already has a branch '{new_branch}'; choose another name."
        )
    return record


def _check_branch_name(name: Any) -> None:
    """Refuse a fork's ``name=`` that no branch could have.

    Raises:
        GraphConfigError: ``name`` is not a non-blank string, is ``"main"``, or holds a
            character no store can keep, or is longer than ``MAX_ID_BYTES``
            (``odd_character``).
    """
    if not isinstance(name, str) or not name.strip() or name == "main":
        raise GraphConfigError(
            f"A branch name must be a non-blank string other than 'main', got {name!r}."
        )
    found = odd_character(name)
    if found is not None:
        raise GraphConfigError(
            f"A branch name must be a non-blank string other than 'main', got {shown_id(name)}: "
            f"it holds {found}. {ID_TEXT}"
        )


async def branches(
    store: StateStore, thread_id: str, branch_id: str | None = None
) -> list[BranchRecord]:
    """Return the thread's forked branches, or those forked from ``branch_id``; oldest first.

    Raises:
        UnknownThreadError: the thread, or the branch ``branch_id``, has no history.
    """
    check_ids(thread_id, branch_id or "main")
    if await store.last_sequence(thread_id, branch_id or "main") == 0:
        raise unknown_thread(thread_id, branch_id or "main")
    found = await store.list_branches(thread_id)
    if branch_id is None:
        return found
    return [b for b in found if b.parent_id == branch_id]


def cached_latest(
    services: ThreadServices,
    store: StateStore,
    thread_id: str,
    branch_id: str,
    seq: int,
    event_id: str | None = None,
) -> Latest | None:
    """Return the graph's cached latest position of a branch whose last record is ``seq``.

    The caller has just asked the store for ``seq`` (and the record's id, ``event_id``,
    when the store gives it: ``StateStore.last_record``), so a hit is up to date.

    Raises:
        UnknownThreadError: the branch has no records.
    """
    if seq == 0:
        raise unknown_thread(thread_id, branch_id)
    return services.positions.latest(store, services.schema, thread_id, branch_id, seq, event_id)
