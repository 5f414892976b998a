"""Thread states and histories as the API shows them: ``ThreadState`` JSON from snapshots.

A checkpoint is a nodestep history event: its id is the ``checkpoint_id``, its branch the
extra ``branch_id`` field, its parent the event before it on its branch (for a fork's
first event, the event the fork was taken at). ``get_history`` walks every branch of the
thread, so a fork made by time travel is listed with the line it left, and the head the
thread shows comes first: a chat UI takes the head from there, and a wrong one would fork
the thread on its next message.
"""

from __future__ import annotations

from typing import Any

from nodestep import Graph, HistoryEvent, StateSnapshot, UnknownThreadError
from nodestep.serve._registry import ThreadRow
from nodestep.serve._shapes import checkpoint_of, interrupt_json, iso, state_values
from nodestep.store import StateStore

__all__ = ["empty_state", "history_json", "state_json", "thread_state"]


def empty_state(thread_id: str, branch_id: str, at: str | None = None) -> dict[str, Any]:
    """Return the state of a thread that has no history (yet, or at checkpoint ``at``).

    As the reference server answers: no checkpoint for a thread that never ran (a chat UI
    reads that as "no state yet"), the asked one for an unknown checkpoint.
    """
    return {
        "values": {},
        "next": [],
        "tasks": [],
        "checkpoint": checkpoint_of(thread_id, at, branch_id) if at is not None else None,
        "metadata": None,
        "created_at": None,
        "parent_checkpoint": None,
        "interrupts": [],
    }


def _node_of(task_id: str) -> str:
    return task_id.split("[", 1)[0]


def _tasks(snapshot: StateSnapshot[Any]) -> list[dict[str, Any]]:
    by_task: dict[str, list[dict[str, Any]]] = {}
    for pending in snapshot.interrupts.values():
        by_task.setdefault(pending.task_id, []).append(interrupt_json(pending))
    task_ids = list(snapshot.next) + [t for t in by_task if t not in snapshot.next]
    tasks = []
    for task_id in task_ids:
        failed = snapshot.failed_node is not None and _node_of(task_id) == snapshot.failed_node
        tasks.append(
            {
                "id": task_id,
                "name": _node_of(task_id),
                "path": ["__pregel_pull", _node_of(task_id)],
                "error": f"{snapshot.error_type}({snapshot.error_message!r})" if failed else None,
                "interrupts": by_task.get(task_id, []),
                "checkpoint": None,
                "state": None,
                "result": None,
            }
        )
    return tasks


def state_json(
    snapshot: StateSnapshot[Any], event: HistoryEvent | None, parent: str | None
) -> dict[str, Any]:
    """Return one snapshot as ``ThreadState`` JSON at ``event`` (its id, time and kind).

    A later checkpoint repeats the state before it, so the history shows it with the
    snapshot of the event before, under its own id.
    """
    thread_id, branch_id = snapshot.thread_id, snapshot.branch_id
    event_id = event.id if event is not None else snapshot.event_id
    step = event.sequence if event is not None else snapshot.sequence
    return {
        "values": state_values(snapshot.value),
        "next": [_node_of(task) for task in snapshot.next],
        "tasks": _tasks(snapshot),
        "checkpoint": checkpoint_of(thread_id, event_id, branch_id),
        "metadata": {
            "source": event.type if event is not None else None,
            "step": step,
            "branch_id": branch_id,
            "status": snapshot.status,
        },
        "created_at": iso(event.timestamp) if event is not None else None,
        "parent_checkpoint": (
            checkpoint_of(thread_id, parent, branch_id) if parent is not None else None
        ),
        "interrupts": [interrupt_json(i) for i in snapshot.interrupts.values()],
    }


async def _event_and_parent(
    store: StateStore, thread_id: str, branch_id: str, seq: int
) -> tuple[HistoryEvent | None, str | None]:
    records = await store.read(thread_id, branch_id, start=max(seq - 1, 1), stop=seq)
    event = HistoryEvent.from_record(records[-1]) if records else None
    if len(records) == 2:
        return event, records[0]["id"]
    for branch in await store.list_branches(thread_id):
        if branch.id == branch_id:
            return event, branch.from_event_id
    return event, None


async def thread_state(
    graph: Graph[Any] | None, store: StateStore, row: ThreadRow, at: str | None = None
) -> dict[str, Any]:
    """Return the thread's ``ThreadState``: at its head, or at checkpoint ``at``.

    An unknown checkpoint, like a thread that never ran, gives the empty state (200), as
    the reference server answers.
    """
    if graph is None:
        return empty_state(row.thread_id, row.branch, at)
    try:
        if at is None:
            snapshot = await graph.get_state(row.thread_id, branch_id=row.branch, state_store=store)
        else:
            snapshot = await graph.get_state(row.thread_id, at=at, state_store=store)
    except UnknownThreadError:
        return empty_state(row.thread_id, row.branch, at)
    event, parent = await _event_and_parent(
        store, row.thread_id, snapshot.branch_id, snapshot.sequence
    )
    return state_json(snapshot, event, parent)


async def _branch_entries(
    graph: Graph[Any], store: StateStore, thread_id: str, branch_id: str, origin: str | None
) -> list[tuple[float, int, dict[str, Any]]]:
    walked = await graph.state_history(thread_id, branch_id=branch_id, state_store=store)
    snapshots = {step.event.id: step.snapshot for step in walked}
    entries = []
    parent, snapshot = origin, None
    for event in await graph.history(thread_id, branch_id=branch_id, state_store=store):
        snapshot = snapshots.get(event.id, snapshot)
        if snapshot is None:
            continue
        entries.append((event.timestamp, event.sequence, state_json(snapshot, event, parent)))
        parent = event.id
    return entries


async def history_json(
    graph: Graph[Any] | None,
    store: StateStore,
    row: ThreadRow,
    limit: int,
    before: str | None,
    metadata: dict[str, Any] | None = None,
    at: str | None = None,
) -> list[dict[str, Any]]:
    """Return the thread's checkpoints on every branch, newest first, the head first.

    Args:
        before: A checkpoint id: only the entries listed after it.
        metadata: Only the entries whose metadata has these values.
        at: A checkpoint id: only its entry, as LangGraph's history filters by the
            ``checkpoint`` it is given.
    """
    if graph is None:
        return []
    try:
        forks = await store.list_branches(row.thread_id)
        entries = await _branch_entries(graph, store, row.thread_id, "main", None)
        for fork in forks:
            entries += await _branch_entries(
                graph, store, row.thread_id, fork.id, fork.from_event_id
            )
    except UnknownThreadError:
        return []
    entries.sort(key=lambda e: (e[0], e[1]), reverse=True)
    states = [e[2] for e in entries]
    heads = [s for s in states if s["checkpoint"]["branch_id"] == row.branch][:1]
    states = heads + [s for s in states if not any(s is h for h in heads)]
    if before is not None:
        ids = [s["checkpoint"]["checkpoint_id"] for s in states]
        states = states[ids.index(before) + 1 :] if before in ids else []
    if at is not None:
        states = [s for s in states if s["checkpoint"]["checkpoint_id"] == at]
    if metadata:
        wanted = metadata.items()
        states = [s for s in states if all(s["metadata"].get(k) == v for k, v in wanted)]
    return states[:limit]
