"""Replay a stored thread through the current graph, and find where the new version diverges.

The stored branch is read as a lineage (from the thread's first record, across forks) and
cut into the calls that made it: each run (its input, its answers, or a continuation, with
the breakpoints it stopped at) and each ``update_state``. The calls are made again, in
order, against the current graph on a thread of a fresh in-memory store, and after each
one the records it wrote are compared with the stored ones: the first difference is the
divergence. Ids, times and run ids differ between two runs and are not compared; the
order in which a superstep's parallel tasks finished is not either (their merge order
is fixed, so the state does not depend on it). Checkpoints, retries, circuit breaker
changes and subgraph records are derived or timing-dependent, and not compared either.

With ``recorded=True`` the model nodes take the replies their node stored, and the tool
nodes each call's stored result (see ``_flow.recorded``), instead of calling the model
or the tool.
"""

from __future__ import annotations

from collections.abc import Iterator
from dataclasses import dataclass, field
from typing import Any

from nodestep._engine.interrupts import Resume
from nodestep._engine.lineage import read_lineage, resolve_point
from nodestep._engine.provenance import short_json, thread_branches
from nodestep._engine.sync import call_sync
from nodestep._flow.recorded import Recording, using_recording
from nodestep._graph.graph import Graph
from nodestep._state.reducers import Replace
from nodestep.store import InMemoryStateStore, Record, StateStore

__all__ = ["Divergence", "ReplayReport", "replay", "replay_sync"]

_UNCOMPARED = frozenset({"checkpoint", "subgraph", "task_retried", "breaker_changed"})
_ENVELOPE = frozenset({"id", "seq", "ts", "thread", "branch", "run", "c"})


@dataclass(frozen=True, slots=True, repr=False)
class Divergence:
    """The first event where the new graph version does not do what the stored run did.

    Attributes:
        index: The event's position in the replayed history, counted from 1 (the
            thread's opening checkpoint), so on the main branch it is the sequence
            number; across forks, the parent's events come first.
        event_id: The stored event's id, or ``None`` when the new version recorded an
            event past the stored history's end.
        sequence: The stored event's sequence number in its branch (or ``None``).
        branch_id: The stored event's branch (or ``None``).
        event_type: The stored event's type, e.g. ``"superstep_completed"`` (or the new
            event's, past the stored end).
        node: The node whose task differs, or ``None``.
        field: The state field whose write differs, or ``None`` when something else does
            (the tasks run, the routes, the event's type).
        old: What the stored run recorded (JSON).
        new: What the new version recorded (JSON).
        reason: One sentence saying what differs.
    """

    index: int
    event_id: str | None
    sequence: int | None
    branch_id: str | None
    event_type: str
    node: str | None
    field: str | None
    old: Any
    new: Any
    reason: str

    def to_json(self) -> dict[str, Any]:
        """Return the divergence as a plain JSON-able dict."""
        return {
            "index": self.index,
            "event_id": self.event_id,
            "sequence": self.sequence,
            "branch_id": self.branch_id,
            "event_type": self.event_type,
            "node": self.node,
            "field": self.field,
            "old": self.old,
            "new": self.new,
            "reason": self.reason,
        }

    def __str__(self) -> str:
        where = f"event {self.index} ({self.branch_id}@{self.sequence} {self.event_type})"
        return f"diverges at {where}: {self.reason}"

    def __repr__(self) -> str:
        return (
            f"Divergence(index={self.index}, event_type={self.event_type!r}, "
            f"node={self.node!r}, field={self.field!r})"
        )


@dataclass(frozen=True, slots=True, repr=False)
class ReplayReport:
    """What replaying a stored thread through the current graph found.

    Attributes:
        thread_id: The thread replayed.
        branch_id: Its branch.
        recorded: Whether the model and tool nodes took the stored replies and results.
        calls: How many calls (runs and ``update_state``s) were made again.
        events: How many stored events were compared; a superstep counts once, with the
            results of its tasks.
        divergence: The first event where the new version differs, or ``None``.
        note: Why the replay ended before the stored history did, or ``None``: a stored
            run stopped by a closed stream or a cancellation stopped at a moment a replay
            cannot choose, so the calls from it on are not made.
    """

    thread_id: str
    branch_id: str
    recorded: bool
    calls: int
    events: int
    divergence: Divergence | None = None
    note: str | None = None

    @property
    def clean(self) -> bool:
        """Whether the new version did everything the stored runs did."""
        return self.divergence is None

    def to_json(self) -> dict[str, Any]:
        """Return the report as a plain JSON-able dict."""
        return {
            "thread_id": self.thread_id,
            "branch_id": self.branch_id,
            "recorded": self.recorded,
            "calls": self.calls,
            "events": self.events,
            "clean": self.clean,
            "divergence": None if self.divergence is None else self.divergence.to_json(),
            "note": self.note,
        }

    def __str__(self) -> str:
        mode = ", with the recorded model and tool outputs" if self.recorded else ""
        head = (
            f"replay of thread {self.thread_id!r}, branch {self.branch_id!r}{mode}: "
            f"{self.calls} call(s), {self.events} event(s) compared"
        )
        if self.divergence is None:
            note = f"\n  {self.note}" if self.note else ""
            return f"{head}; no divergence{note}"
        return f"{head}\n  {self.divergence}"

    def __repr__(self) -> str:
        found = "clean" if self.divergence is None else f"diverges at {self.divergence.index}"
        return f"ReplayReport({self.thread_id!r}, branch={self.branch_id!r}, {found})"


@dataclass(slots=True)
class _Call:
    """One stored call: its first record and every record it wrote, with their indexes."""

    records: list[tuple[int, Record]] = field(default_factory=list)

    @property
    def first(self) -> Record:
        return self.records[0][1]


@dataclass(frozen=True, slots=True)
class _Unit:
    """One compared step of a history: a record, or a superstep with its tasks' results."""

    kind: str
    body: dict[str, Any]
    index: int
    record: Record | None
    tasks: dict[str, tuple[int, Record]] = field(default_factory=dict)


async def replay(
    graph: Graph[Any],
    store: StateStore,
    thread_id: str,
    *,
    branch_id: str | None = None,
    recorded: bool = False,
) -> ReplayReport:
    """Re-run a stored thread's calls through ``graph``; report the first divergence.

    Args:
        graph: The graph version to test (its flow declared).
        store: The store that holds the thread; it is only read.
        thread_id: The thread to replay.
        branch_id: Its branch (``"main"`` when ``None``); a fork replays its parent's
            calls up to the fork, then its own.
        recorded: Feed the model and tool nodes the stored replies and tool results
            instead of calling the model and the tools.

    Returns:
        The ``ReplayReport``: clean, or the first event where the new version differs.

    Raises:
        UnknownThreadError: the thread or branch does not exist.
        GraphConfigError: an id is not a non-empty string.
    """
    branches = await thread_branches(store, thread_id)
    point = await resolve_point(store, thread_id, None, branch_id, branches, "branch_id")
    lineage = await read_lineage(store, thread_id, point, branches)
    records = lineage.records
    fresh = InMemoryStateStore()
    if lineage.base != "defaults":  # the thread's start is gone: begin where its history does
        await fresh.append(thread_id, "main", [{**records[0], "seq": 1, "branch": "main"}], after=0)
    calls = list(_calls(records))
    recording = _recording(records) if recorded else None
    done, compared = 0, 0
    with using_recording(recording):
        for call in calls:
            note = _stopped_early(call)
            if note is not None:
                return ReplayReport(
                    thread_id, point.branch_id, recorded, done, compared, None, note
                )
            before = await fresh.last_sequence(thread_id, "main")
            failure = await _make(graph, fresh, thread_id, call)
            done += 1
            new = await fresh.read(thread_id, "main", start=before + 1)
            divergence = _opening(records[0], new) if before == 0 else None
            if divergence is None:
                divergence, count = _compare(_units(call.records), _units(new), failure)
                compared += count
            if divergence is not None:
                return ReplayReport(
                    thread_id, point.branch_id, recorded, done, compared, divergence
                )
    return ReplayReport(thread_id, point.branch_id, recorded, done, compared)


def replay_sync(
    graph: Graph[Any],
    store: StateStore,
    thread_id: str,
    *,
    branch_id: str | None = None,
    recorded: bool = False,
) -> ReplayReport:
    """Run ``replay`` from sync code; see ``replay`` for the arguments."""
    return call_sync(
        lambda: replay(graph, store, thread_id, branch_id=branch_id, recorded=recorded)
    )


def _calls(records: list[Record]) -> Iterator[_Call]:
    """Cut a lineage after its base checkpoint into the calls that wrote it."""
    call: _Call | None = None
    for index, record in enumerate(records[1:], start=1):
        kind = record["type"]
        starts = kind in ("run_started", "state_updated") or (
            kind == "task_finished" and record.get("edited") and call_ended(call)
        )
        if starts or call is None:
            if call is not None:
                yield call
            call = _Call()
        call.records.append((index, record))
    if call is not None:
        yield call


def call_ended(call: _Call | None) -> bool:
    """Tell whether ``call`` holds no run still going (so an edited task is a call)."""
    if call is None or call.first["type"] != "run_started":
        return True
    return call.records[-1][1]["type"] in ("run_paused", "run_stopped", "run_failed")


def _stopped_early(call: _Call) -> str | None:
    """Return why ``call`` cannot be made again, or ``None``: it stopped at no fixed place."""
    for _, record in call.records:
        if record["type"] == "run_stopped" and not record["reason"].startswith("interrupt_"):
            return (
                f"the replay ends at event {record['branch']}@{record['seq']}: the stored run "
                f"stopped there ({record['reason']}), where a replay cannot choose to stop"
            )
    return None


def _recording(records: list[Record]) -> Recording:
    """Collect the stored model replies (by node) and tool messages (by call id)."""
    replies: dict[str, list[dict[str, Any]]] = {}
    tool_results: dict[str, dict[str, Any]] = {}
    for node, update in _task_updates(records):
        for value in update.values():
            for item in value if isinstance(value, list) else ():
                if not isinstance(item, dict):
                    continue
                if item.get("role") == "assistant":
                    replies.setdefault(node, []).append(item)
                elif item.get("role") == "tool" and item.get("tool_call_id"):
                    tool_results[str(item["tool_call_id"])] = item
    return Recording(replies, tool_results)


def _task_updates(records: list[Record]) -> Iterator[tuple[str, dict[str, Any]]]:
    """Yield each task result's node and update, in the order they were stored."""
    for record in records:
        if record["type"] == "task_finished" and not record.get("edited"):
            yield str(record["node"]), record.get("update") or {}
        elif record["type"] == "superstep_completed":
            for task_id, entry in record.get("tasks", {}).items():
                if "update" in entry:
                    yield str(entry.get("node") or task_id), entry["update"] or {}


def _values(body: dict[str, Any], key: str) -> dict[str, Any]:
    """Return a record's stored writes as an update: ``Replace`` for the replaced ones."""
    replaced = set(body.get("replaced", ()))
    return {k: Replace(v) if k in replaced else v for k, v in body[key].items()}


async def _make(graph: Graph[Any], store: StateStore, thread_id: str, call: _Call) -> str | None:
    """Make ``call`` again on ``store``; return the error it raised, if it raised one.

    A run whose node fails raises, as the stored one did (its ``run_failed`` is compared);
    any other error (say, a resume the thread does not wait for) is reported with the
    divergence it causes.
    """
    first = call.first
    try:
        if first["type"] == "run_started":
            await graph.ainvoke(
                _values(first, "input") if "input" in first else None,
                thread_id=thread_id,
                state_store=store,
                **_breakpoints(call),
                **_resume(first),
            )
        else:
            key = "values" if first["type"] == "state_updated" else "update"
            node = first.get("node")
            await graph.update_state(
                thread_id, _values(first, key), state_store=store, as_node=node
            )
    except Exception as error:  # the comparison reports it
        return f"{type(error).__name__}: {error}"
    return None


def _breakpoints(call: _Call) -> dict[str, Any]:
    """Return the breakpoints the stored run stopped at, as run options."""
    options: dict[str, Any] = {}
    for _, record in call.records:
        if record["type"] == "run_stopped" and record["reason"].startswith("interrupt_"):
            options[record["reason"]] = list(record.get("nodes") or ())
    return options


def _resume(first: Record) -> dict[str, Any]:
    answers = first.get("answers")
    return {"resume": Resume(answers=dict(answers))} if answers else {}


def _units(records: list[tuple[int, Record]] | list[Record]) -> list[_Unit]:
    """Read records as compared units: a superstep gathers its tasks' results."""
    units: list[_Unit] = []
    pending: dict[str, tuple[int, Record]] = {}
    for position, item in enumerate(records):
        index, record = item if isinstance(item, tuple) else (position, item)
        kind = record["type"]
        if kind in _UNCOMPARED:
            continue
        if kind == "task_finished" and not record.get("edited"):
            pending[str(record.get("task") or record["node"])] = (index, record)
            continue
        if kind != "superstep_completed":
            units.append(_Unit(kind, _plain(record), index, record))
            continue
        tasks: dict[str, tuple[int, Record]] = {}
        body: dict[str, Any] = {}
        for task_id, entry in record["tasks"].items():
            holder = (index, record) if "update" in entry else pending.get(task_id, (index, record))
            result = entry if "update" in entry else holder[1]
            tasks[task_id] = holder
            body[task_id] = {
                "node": result.get("node") or task_id,
                "update": result.get("update") or {},
                "replaced": result.get("replaced", []),
                "routes": entry.get("routes", []),
                "failed": result.get("failed"),
            }
        pending.clear()
        units.append(_Unit(kind, {"step": record["step"], "tasks": body}, index, record, tasks))
    return units


def _plain(record: Record) -> dict[str, Any]:
    """Return a record's compared keys: not its ids, times, run or checksum; no message."""
    body = {k: v for k, v in record.items() if k not in _ENVELOPE}
    if record["type"] == "run_failed":  # a message may hold addresses or times
        body.pop("message", None)
    return body


def _opening(stored: Record, new: list[Record]) -> Divergence | None:
    """Compare the stored opening checkpoint's values with the new thread's defaults."""
    if not new or new[0]["type"] != "checkpoint":
        return None
    old_values, new_values = stored.get("values", {}), new[0].get("values", {})
    for name in [*old_values, *(n for n in new_values if n not in old_values)]:
        if old_values.get(name) != new_values.get(name):
            return _at(
                0,
                stored,
                None,
                name,
                old_values.get(name),
                new_values.get(name),
                f"the thread opens with {name} = {short_json(old_values.get(name))}; the new "
                f"version's default is {short_json(new_values.get(name))}",
            )
    return None


def _at(
    index: int,
    record: Record | None,
    node: str | None,
    name: str | None,
    old: Any,
    new: Any,
    reason: str,
    new_type: str | None = None,
) -> Divergence:
    index += 1  # positions count from 0, a history's events from 1
    if record is None:
        return Divergence(index, None, None, None, new_type or "", node, name, old, new, reason)
    return Divergence(
        index,
        record["id"],
        record["seq"],
        record["branch"],
        record["type"],
        node,
        name,
        old,
        new,
        reason,
    )


def _compare(
    stored: list[_Unit], new: list[_Unit], failure: str | None
) -> tuple[Divergence | None, int]:
    """Return the first difference between a call's stored and new units, and the count."""
    for count, (old, made) in enumerate(zip(stored, new, strict=False), start=1):
        found = _differ(old, made)
        if found is not None:
            return found, count
    if len(stored) > len(new):
        old = stored[len(new)]
        raised = f" (it raised {failure})" if failure else ""
        reason = f"the stored run recorded a {old.kind} here; the new version stops{raised}"
        return _at(old.index, old.record, None, None, old.kind, None, reason), len(new) + 1
    if len(new) > len(stored):
        made = new[len(stored)]
        last = stored[-1] if stored else None
        index = last.index + 1 if last else 0
        reason = f"the new version goes on with a {made.kind} where the stored run stopped"
        return _at(index, None, None, None, None, made.kind, reason, made.kind), len(stored)
    return None, len(stored)


def _differ(old: _Unit, made: _Unit) -> Divergence | None:
    if old.kind != made.kind:
        reason = f"the stored run recorded a {old.kind} here; the new version a {made.kind}"
        node = old.body.get("node") if isinstance(old.body.get("node"), str) else None
        return _at(old.index, old.record, node, None, old.kind, made.kind, reason)
    if old.kind == "superstep_completed":
        return _differ_tasks(old, made)
    for key in [*old.body, *(k for k in made.body if k not in old.body)]:
        before, after = old.body.get(key), made.body.get(key)
        if before != after:
            node = old.body.get("node") if isinstance(old.body.get("node"), str) else None
            reason = f"its {key} was {short_json(before)}; the new version's is {short_json(after)}"
            name = key if key in ("values", "input") else None
            return _at(old.index, old.record, node, name, before, after, reason)
    return None


def _differ_tasks(old: _Unit, made: _Unit) -> Divergence | None:
    step = old.body["step"]
    before, after = old.body["tasks"], made.body["tasks"]
    if list(before) != list(after):
        node = next(
            iter([t for t in before if t not in after] + [t for t in after if t not in before]),
            None,
        )
        reason = f"superstep {step} ran tasks {list(before)}; the new version runs {list(after)}"
        return _at(old.index, old.record, node, None, list(before), list(after), reason)
    for task_id, was in before.items():
        now = after[task_id]
        index, record = old.tasks[task_id]
        node = str(was["node"])
        for name in [*was["update"], *(k for k in now["update"] if k not in was["update"])]:
            if was["update"].get(name) != now["update"].get(name):
                old_value, new_value = was["update"].get(name), now["update"].get(name)
                reason = (
                    f"node {node} wrote {name} = {short_json(old_value)}; the new version "
                    f"writes {short_json(new_value)}"
                )
                return _at(index, record, node, name, old_value, new_value, reason)
        for key in ("replaced", "routes", "failed"):
            if was[key] != now[key]:
                reason = (
                    f"node {node}'s {key} were {short_json(was[key])}; the new version's are "
                    f"{short_json(now[key])}"
                )
                return _at(index, record, node, None, was[key], now[key], reason)
    return None
