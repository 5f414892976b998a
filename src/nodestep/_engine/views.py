"""HTML views of runs and histories, as notebooks show them (``_repr_html_``).

The functions read only public attributes of the objects they are given, so the
classes they draw (in ``history``, ``results``, ``interrupts``) can call them without
an import circle, and a page of another kind (the sandbox) can use them as they are.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from typing import Any

from nodestep._display import html
from nodestep._display.text import plural, readable_time
from nodestep._display.views import interrupts_part

__all__ = [
    "PAGE_SIZE",
    "events_html",
    "history_html",
    "interrupt_html",
    "result_html",
    "snapshot_html",
]

PAGE_SIZE = 25
"""Steps in one page of a history's table."""

_HISTORY_HEADERS = ("seq", "time", "kind", "node", "changed", "branch")


def _changed(before: Any, after: Any) -> list[str]:
    """The fields whose value differs between two states (``is`` first: most are shared)."""
    names = getattr(type(after), "model_fields", None) or {}
    return [
        name
        for name in names
        if getattr(before, name, None) is not getattr(after, name, None)
        and getattr(before, name, None) != getattr(after, name, None)
    ]


def history_html(history: Any, number: int = 1, size: int = PAGE_SIZE) -> str:
    """Return page ``number`` (from 1) of a ``StateHistory`` as a table.

    Why paged: a thread may hold 10,000 steps; the table builds the rows of one page
    only (each compared with the step before it, for the changed fields), and says how
    many there are and how to see the others.
    """
    steps: Sequence[Any] = history.steps
    total = len(steps)
    first = (number - 1) * size
    rows = []
    for index in range(first, min(first + size, total)):
        step = steps[index]
        event = step.event
        changed = _changed(steps[index - 1].snapshot.value, step.snapshot.value) if index else []
        rows.append(
            (
                str(event.sequence),
                html.text(readable_time(event.timestamp)),
                html.text(event.type if event.path is None else f"{event.path}: {event.type}"),
                html.text(", ".join(step.nodes)),
                html.text(", ".join(changed)),
                html.text(event.branch_id),
            )
        )
    title = f"StateHistory of thread {history.thread_id!r}, branch {history.branch_id!r}"
    return html.panel(
        title,
        html.table(_HISTORY_HEADERS, rows),
        html.note(_pager(total, first, len(rows), number, size)),
        kind="nodestep-history",
    )


def _pager(total: int, first: int, shown: int, number: int, size: int) -> str:
    if total == 0:
        return "No steps."
    if shown == 0:
        pages = -(-total // size)
        return html.text(f"{plural(total, 'step')}: page {number} is past the last, {pages}.")
    where = f"Steps {first + 1:,}–{first + shown:,} of {total:,}."
    if first + shown >= total:
        return html.text(where)
    more = total - first - shown
    return html.text(f"{where} {plural(more, 'more step')}: ") + (
        f"<code>.page({number + 1})</code> shows the next {size}, "
        f"<code>.page(n, size=100)</code> any page."
    )


_EVENT_HEADERS = ("seq", "time", "kind", "node", "event")


def events_html(history: Any, nodes: Callable[[Any], Sequence[str]], size: int = PAGE_SIZE) -> str:
    """Return the first ``size`` events of a ``History`` as a table.

    Args:
        history: The ``History``: its thread, branch and events are read.
        nodes: The nodes an event records (``_engine.history.event_nodes``, passed in:
            this module imports none of the classes it draws).
        size: The events shown.

    Why one page: a branch may hold 10,000 events; the table builds the first rows only,
    says how many there are, and which slice of ``events`` holds the next.
    """
    events: Sequence[Any] = history.events
    rows = [
        (
            str(event.sequence),
            html.text(readable_time(event.timestamp)),
            html.text(event.type if event.path is None else f"{event.path}: {event.type}"),
            html.text(", ".join(nodes(event))),
            html.text(event.id),
        )
        for event in events[:size]
    ]
    title = f"History of thread {history.thread_id!r}, branch {history.branch_id!r}"
    return html.panel(
        title,
        html.table(_EVENT_HEADERS, rows),
        html.note(_events_note(len(events), len(rows))),
        kind="nodestep-events",
    )


def _events_note(total: int, shown: int) -> str:
    if total == 0:
        return "No events: the thread has not run on this branch."
    where = f"Events 1–{shown:,} of {total:,}."
    if shown >= total:
        return html.text(where)
    more = total - shown
    if more <= shown:
        hint = f"<code>.events[{shown}:]</code> holds them."
    else:
        hint = f"<code>.events[{shown}:{2 * shown}]</code> holds the next {shown}."
    return html.text(f"{where} {plural(more, 'more event')}: ") + hint


def snapshot_html(snapshot: Any) -> str:
    """Return a ``StateSnapshot``: where it is, its status, what runs next, the state."""
    rows = [
        ("status", html.status(snapshot.status)),
        ("thread", html.text(snapshot.thread_id)),
        ("branch", html.text(snapshot.branch_id)),
        ("event", html.text(f"#{snapshot.sequence} {snapshot.event_id or ''}".strip())),
        ("next", html.text(", ".join(snapshot.next) or "nothing")),
    ]
    if snapshot.error_type:
        failed = f" in node {snapshot.failed_node!r}" if snapshot.failed_node else ""
        rows.append(
            ("error", html.text(f"{snapshot.error_type}{failed}: {snapshot.error_message}"))
        )
    parts = [html.fields(rows), state_part(snapshot.value)]
    if snapshot.interrupts:
        parts.append(interrupts_part(snapshot.interrupts.values()))
    return html.panel("StateSnapshot", *parts, kind="nodestep-snapshot")


def state_part(state: Any) -> str:
    """Return a state's fields and values as a table (each value short)."""
    names = getattr(type(state), "model_fields", None)
    if not names:
        return html.fields([("state", html.code(state))])
    return html.table(
        ("field", "value"), [(html.text(n), html.code(getattr(state, n))) for n in names]
    )


def result_html(result: Any) -> str:
    """Return a ``GraphResult``: status, where it stopped, the state, and what it asks."""
    rows = [
        ("status", html.status(result.status)),
        ("thread", html.text(result.thread_id)),
        ("branch", html.text(result.branch_id)),
        ("step", str(result.step)),
        ("run", html.text(result.run_id)),
    ]
    parts = [html.fields(rows), state_part(result.state)]
    if result.interrupts:
        parts.append(interrupts_part(result.interrupts.values()))
        parts.append(
            html.note("Answer with <code>invoke(None, thread_id=..., resume=Resume(value))</code>.")
        )
    return html.panel("GraphResult", *parts, kind="nodestep-result")


def interrupt_html(interrupt: Any) -> str:
    """Return one ``Interrupt``: which node asks what, and its key."""
    return html.panel("Interrupt", interrupts_part([interrupt]), kind="nodestep-interrupt")
