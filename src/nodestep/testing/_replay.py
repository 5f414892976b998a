"""Replay a stored thread through the current graph, and find where the new version diverges.

The stored branch is read in *legs*, one per branch from the thread's root to it: each
leg's records are cut into the calls that made them, each run (its input, its answers,
or a continuation, with the breakpoints it stopped at) and each ``update_state``. The
calls are made again, in order, against the current graph on a thread of a fresh
in-memory store, which forks where the stored thread forked; after each call the records
it wrote are compared with the stored ones (``testing._divergence``), and the first
difference is the divergence.

A fork in the middle of a run cut that run's call in two: the replay makes the whole
call on the parent branch (the stored parent holds its end), then forks after the same
event, so the branch's own calls continue from the same position.

With ``recorded=True`` the model nodes take the replies their node stored, and the tool
nodes each call's stored result (see ``_flow.recorded``), instead of calling the model
or the tool.
"""

from __future__ import annotations

from collections.abc import Iterator
from dataclasses import dataclass, field, replace
from typing import Any

from nodestep._engine.interrupts import Resume
from nodestep._engine.lineage import (
    Point,
    base_kind,
    branch_records,
    parent_readable,
    resolve_point,
)
from nodestep._engine.positions import MIGRATION_KEY
from nodestep._engine.provenance import thread_branches
from nodestep._engine.sync import call_sync
from nodestep._errors import GraphConfigError
from nodestep._flow.recorded import Recording, using_recording
from nodestep._graph.graph import Graph
from nodestep._state.reducers import Replace
from nodestep._state.schema import StateSchema
from nodestep.store import BranchRecord, InMemoryStateStore, Record, StateStore
from nodestep.testing._divergence import (
    Divergence,
    compare,
    divergence_at,
    finished_in,
    opening_divergence,
    units,
)

__all__ = ["ReplayReport", "replay", "replay_sync"]


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

    @property
    def compared(self) -> list[tuple[int, Record]]:
        """The records a replay of the call makes again: those of a run that its process
        left without an end (it crashed) and of the continuations that finished it, as
        one run, whose continuations' ``run_started`` the replayed run does not write."""
        first = self.records[0]
        return [first, *(item for item in self.records[1:] if not _continues(item[1]))]


async def replay(
    graph: Graph[Any],
    store: StateStore,
    thread_id: str,
    *,
    branch_id: str | None = None,
    recorded: bool = False,
    context: Any = None,
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
        context: The ``context=`` of every replayed call. The calls' own context was
            never stored; without it the calls run without one (a node that reads
            ``ctx.context`` raises, except an ``Agent``'s, which reads it as empty).

    Returns:
        The ``ReplayReport``: clean, or the first event where the new version differs.

    Raises:
        UnknownThreadError: the thread or branch does not exist.
        GraphConfigError: an id is not a non-empty string, or ``graph`` is no graph or
            has no flow yet.
    """
    if not isinstance(graph, Graph):
        raise GraphConfigError(
            f"replay takes the graph to test (a Graph with its flow declared), got "
            f"{type(graph).__name__}; pass the new version of the graph that wrote the thread."
        )
    graph.nodes  # noqa: B018 - raises the error that names the missing flow, before any run
    branches = await thread_branches(store, thread_id)
    point = await resolve_point(store, thread_id, None, branch_id, branches, "branch_id")
    legs = await _legs(store, thread_id, point, branches)
    base = legs[0].records[0]
    report = ReplayReport(thread_id, point.branch_id, recorded, 0, 0)
    if base_kind(base, branches) == "defaults":
        report = _opened(graph, base, report)
        if not report.clean:
            return report
    tally = _Tally(report, context=context, shift=base["seq"] - 1)
    fresh = await _opening(thread_id, legs[0], tally)
    every = [record for leg in legs for record in leg.records]
    with using_recording(_recording(every) if recorded else None):
        fresh_branch = "main"
        for leg in legs:
            if leg is not legs[0]:
                fresh_branch = await _fork(graph, fresh, thread_id, fresh_branch, leg, tally)
            cut = leg is legs[0] and tally.taken > 0
            if not await _replay_leg(graph, fresh, thread_id, fresh_branch, leg, tally, cut):
                break
            tally.offset += len(leg.records)
    return tally.report


async def _opening(thread_id: str, first: _Leg, tally: _Tally) -> InMemoryStateStore:
    """Return a fresh store whose thread opens as the stored one did.

    That is where its kept history starts (a migration, a prune), numbered from 1:
    ``tally.shift`` tells the two numberings apart. A prune may cut a call: its end is
    taken as stored (a call made before the kept history cannot be made again), counted
    in ``tally.taken``, and the replay goes on from the next call.
    """
    opening = [first.records[0], *_rest_of_call(first.records[1:])]
    renumbered = [{**r, "seq": n, "branch": "main"} for n, r in enumerate(opening, start=1)]
    fresh = InMemoryStateStore()
    await fresh.append(thread_id, "main", renumbered, after=0)
    tally.taken = len(opening) - 1
    if tally.taken:
        tally.report = replace(
            tally.report,
            note=f"the kept history starts inside a call: its first {tally.taken} event(s), "
            f"the end of that call, are taken as stored, not made again",
        )
    return fresh


def _opened(graph: Graph[Any], base: Record, report: ReplayReport) -> ReplayReport:
    """Return ``report`` with the divergence of a thread opened with other defaults."""
    schema = StateSchema.of(graph.state)
    defaults = schema.values_to_json(schema.defaults())
    return replace(report, divergence=opening_divergence(base, defaults))


@dataclass(slots=True)
class _Tally:
    """The report so far, where the leg being replayed starts in the whole history, and
    what every replayed call is given (``context``)."""

    report: ReplayReport
    offset: int = 0
    context: Any = None
    runs: dict[str, str] = field(default_factory=dict)  # stored run id -> replayed run id
    shift: int = 0  # a stored sequence number less the replayed one
    taken: int = 0  # records of the first leg after its base taken as stored (a cut call)
    # The stored continuations of crashed runs along the lineage, by sequence number: the
    # replayed run that makes a crashed run and its continuation writes no record for them.
    dropped: list[int] = field(default_factory=list)

    def replayed_seq(self, seq: int) -> int:
        """Return the replayed thread's number of the stored record ``seq``."""
        return seq - self.shift - sum(1 for dropped in self.dropped if dropped <= seq)


@dataclass(frozen=True, slots=True)
class _Leg:
    """The records one branch adds to a replayed history, its base or opening first.

    ``fork_seq`` is the record of this branch that the next leg forks after; the leg
    then holds the records through the end of the call that wrote it, since a call
    cut by the fork is made whole again.
    """

    branch_id: str
    records: list[Record]
    fork_seq: int | None


async def _legs(
    store: StateStore, thread_id: str, point: Point, branches: dict[str, BranchRecord]
) -> list[_Leg]:
    """Return the branches a replay of ``point``'s branch goes through, root first."""
    legs: list[_Leg] = []
    branch, cut = point.branch_id, None
    while True:
        last = point.sequence if cut is None else cut
        records = await branch_records(store, thread_id, branch, last)
        if cut is not None:
            records += _rest_of_call(await store.read(thread_id, branch, start=cut + 1), records)
        legs.append(_Leg(branch, records, cut))
        fork, first = branches.get(branch), records[0]
        if fork is None or first["seq"] != fork.from_sequence + 1 or MIGRATION_KEY in first:
            break
        if not await parent_readable(store, thread_id, fork.parent_id, fork.from_sequence):
            break
        branch, cut = fork.parent_id, fork.from_sequence
    legs.reverse()
    return legs


def _rest_of_call(after: list[Record], before: list[Record] | None = None) -> list[Record]:
    """Return the records before the next call starts: the end of a call a fork cut.

    ``before``: the lineage up to the cut, from its base. A run it leaves without an end
    (a crash) goes on through the continuations that finished it, one call with them
    (``_calls``), so a fork inside it makes the whole again.
    """
    rest = _before_next_call(after)
    while before is not None and len(rest) < len(after) and _continues(after[len(rest)]):
        calls = list(_calls([*before, *rest]))
        if not calls or not _unended(calls[-1]):
            break
        more = _before_next_call(after[len(rest) + 1 :])
        rest = after[: len(rest) + 1 + len(more)]
    return rest


def _before_next_call(after: list[Record]) -> list[Record]:
    for index, record in enumerate(after):
        if _starts_call(record, running=True):
            return after[:index]
    return after


async def _fork(
    graph: Graph[Any], fresh: StateStore, thread_id: str, parent: str, leg: _Leg, tally: _Tally
) -> str:
    """Fork the replayed thread where the stored branch of ``leg`` was forked."""
    point = leg.records[0]["seq"] - 1
    tally.dropped = [seq for seq in tally.dropped if seq <= point]  # not the parent's rest
    after = tally.replayed_seq(point)
    at = await fresh.read(thread_id, parent, start=after, stop=after)
    made = await graph.fork(thread_id, from_=at[0]["id"], name=leg.branch_id, state_store=fresh)
    return made.id


async def _replay_leg(
    graph: Graph[Any],
    fresh: StateStore,
    thread_id: str,
    branch: str,
    leg: _Leg,
    tally: _Tally,
    cut: bool = False,
) -> bool:
    """Make a leg's calls again on ``branch``; return whether the replay goes on.

    ``cut``: the leg's first call began before its kept history (``tally.taken``).
    """
    report = tally.report
    calls = _calls(leg.records)
    before = await fresh.last_sequence(thread_id, branch)
    # The tasks a fork's opening checkpoint holds as finished, on each side: which ones
    # they are depends on the order the stored and the replayed tasks finished in.
    stored_done, new_done = {}, {}
    if not cut:
        stored_done = finished_in(leg.records[0], 0)
        opening = await fresh.read(thread_id, branch, start=before, stop=before)
        new_done = finished_in(opening[0], 0)
    if cut:
        next(calls)  # the end of a call the kept history cut: in the replayed thread as stored
    for call in calls:
        note = _stopped_early(call)
        if note is not None:
            tally.report = replace(report, note=note)
            return False
        before = await fresh.last_sequence(thread_id, branch)
        failure = await _make(graph, fresh, thread_id, branch, call, tally.context)
        new = await fresh.read(thread_id, branch, start=before + 1)
        stored = _as_run(call.compared, _run_of(new), tally.runs)
        tally.dropped += [r["seq"] for _, r in call.records[1:] if _continues(r)]
        divergence, count = compare(units(stored, stored_done), units(new, new_done), failure)
        if divergence is not None:
            divergence = replace(divergence, index=divergence.index + tally.offset)
        report = replace(report, calls=report.calls + 1, events=report.events + count)
        tally.report = replace(report, divergence=divergence)
        if divergence is not None:
            return False
    made = await fresh.last_sequence(thread_id, branch)
    if leg.fork_seq is None or made >= tally.replayed_seq(leg.fork_seq):
        return True  # the replayed thread can fork where the stored one did
    at = next(n for n, r in enumerate(leg.records) if r["seq"] == leg.fork_seq)
    reason = (
        f"branch {leg.branch_id!r} was forked after its event {leg.fork_seq}; the new "
        f"version's history ends before it"
    )
    found = divergence_at(
        at + tally.offset, leg.records[at], None, None, leg.fork_seq, None, reason
    )
    tally.report = replace(report, divergence=found)
    return False


def _run_of(records: list[Record]) -> str | None:
    """Return the run id of the first record of a run among ``records``, if any."""
    for record in records:
        run = record.get("run")
        if isinstance(run, str):
            return run
    return None


def _as_run(
    records: list[tuple[int, Record]], run: str | None, runs: dict[str, str]
) -> list[tuple[int, Record]]:
    """Return a stored call's records as if its runs had had the replayed runs' ids.

    A run's id is new each time, and a node may write it into the state (``ctx.run_id``;
    an ``Agent`` marks its step's output with it): a stored run's id, wherever it stands
    as a whole value, reads as its replayed run's, so that only what the new version does
    differently diverges. ``runs`` maps the stored ids met so far to the replayed ones;
    this call's is added (``run``: the replayed call's run id).
    """
    if run is not None:  # a crashed run and its continuations were one replayed run
        for _, record in records:
            if record["type"] == "run_started" and isinstance(record.get("run"), str):
                runs[record["run"]] = run
    if all(old == new for old, new in runs.items()):
        return records
    return [(index, _swapped(record, runs)) for index, record in records]


def _swapped(value: Any, runs: dict[str, str]) -> Any:
    if isinstance(value, str):
        return runs.get(value, value)
    if isinstance(value, dict):
        return {key: _swapped(item, runs) for key, item in value.items()}
    if isinstance(value, list):
        return [_swapped(item, runs) for item in value]
    return value


def replay_sync(
    graph: Graph[Any],
    store: StateStore,
    thread_id: str,
    *,
    branch_id: str | None = None,
    recorded: bool = False,
    context: Any = None,
) -> ReplayReport:
    """Run ``replay`` from sync code; see ``replay`` for the arguments."""
    return call_sync(
        lambda: replay(
            graph, store, thread_id, branch_id=branch_id, recorded=recorded, context=context
        )
    )


def _calls(records: list[Record]) -> Iterator[_Call]:
    """Cut a lineage after its base checkpoint into the calls that wrote it.

    A run with no end record (its process stopped: a crash) and the continuation that
    finished it are one call: the replayed run cannot stop where the process did, so it
    runs on to where the continuation ended.
    """
    call: _Call | None = None
    for index, record in enumerate(records[1:], start=1):
        joined = call is not None and _continues(record) and _unended(call)
        if call is None or (not joined and _starts_call(record, running=not call_ended(call))):
            if call is not None:
                yield call
            call = _Call()
        call.records.append((index, record))
    if call is not None:
        yield call


def _starts_call(record: Record, *, running: bool) -> bool:
    """Tell whether ``record`` starts a call: a run, an edit, or an edit ``as_node=``.

    ``update_state(as_node=...)`` on an unfinished task stores a ``task_finished``; it is
    a call of its own only when no run is going on (``running``).
    """
    kind = record["type"]
    if kind in ("run_started", "state_updated"):
        return True
    return kind == "task_finished" and bool(record.get("edited")) and not running


def _continues(record: Record) -> bool:
    """Tell whether ``record`` starts a continuation: a run with no input and no answers."""
    return record["type"] == "run_started" and not ({"input", "answers"} & record.keys())


def _unended(call: _Call) -> bool:
    """Tell whether ``call`` is a run whose records stop without an end (a crash)."""
    ends = ("run_paused", "run_stopped", "run_failed", "run_completed")
    return call.first["type"] == "run_started" and _last(call)["type"] not in ends


def _last(call: _Call) -> Record:
    """Return the call's last record that is not a checkpoint (one may follow its end)."""
    return next(r for _, r in reversed(call.records) if r["type"] != "checkpoint")


def call_ended(call: _Call | None) -> bool:
    """Tell whether ``call`` holds no run still going (so an edited task is a call).

    A run whose records stop without an end holds none: an edit after it was made once
    its process had stopped, since a running run's lease keeps every edit out.
    """
    if call is None or call.first["type"] != "run_started" or _unended(call):
        return True
    return _last(call)["type"] in ("run_paused", "run_stopped", "run_failed")


def _stopped_early(call: _Call) -> str | None:
    """Return why ``call`` cannot be made again, or ``None``: it stopped at no fixed place."""
    for _, record in call.records:
        if record["type"] == "run_stopped" and not record["reason"].startswith("interrupt_"):
            return (
                f"the replay ends at event {record['branch']}@{record['seq']}: the stored run "
                f"stopped there ({record['reason']}), where a replay cannot choose to stop"
            )
    if _unended(call):  # no continuation finished it: it is running, or its process died
        last = _last(call)
        return (
            f"the replay ends at event {last['branch']}@{last['seq']}: the stored run has "
            f"no end after it (its process stopped there, or it is still running), and no "
            f"continuation follows it at once"
        )
    return None


def _recording(records: list[Record]) -> Recording:
    """Collect the stored model replies (by node), tool messages (by call id), what a tool
    node wrote besides its messages (by call id), and an ``Agent``'s ToolNode tasks' updates
    (by call id)."""
    replies: dict[str, list[dict[str, Any]]] = {}
    tool_results: dict[str, dict[str, Any]] = {}
    tool_updates: dict[str, dict[str, Any]] = {}
    call_updates: dict[str, dict[str, Any]] = {}
    for node, update in _task_updates(records):
        calls: list[str] = []
        holders: set[str] = set()
        for name, value in update.items():
            for item in value if isinstance(value, list) else ():
                if not isinstance(item, dict):
                    continue
                if item.get("role") == "assistant":
                    replies.setdefault(node, []).append(item)
                elif item.get("role") == "tool" and item.get("tool_call_id"):
                    tool_results[str(item["tool_call_id"])] = item
                    calls.append(str(item["tool_call_id"]))
                    holders.add(name)
        # A tool node's other writes (a workspace's files) come back with its calls'
        # results: the replay does not run the tools that made them.
        others = {name: value for name, value in update.items() if name not in holders}
        for call_id in calls if others else ():
            tool_updates[call_id] = others
        for call_id in _agent_calls(node, update):
            call_updates[call_id] = update
    return Recording(replies, tool_results, tool_updates, call_updates)


def _agent_calls(node: str, update: dict[str, Any]) -> list[str]:
    """Return the call ids whose results ``update`` holds, when it is the update of a call's
    task of an ``Agent``'s ToolNode: its node's record says ``ToolNode``, and its
    ``results`` hold each call's result by call id."""
    records, results = update.get("nodes"), update.get("results")
    record = records.get(node) if isinstance(records, dict) else None
    if not isinstance(record, dict) or record.get("kind") != "ToolNode":
        return []
    if not isinstance(results, dict):
        return []
    return [str(call_id) for call_id, result in results.items() if isinstance(result, dict)]


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


async def _make(
    graph: Graph[Any],
    store: StateStore,
    thread_id: str,
    branch: str,
    call: _Call,
    context: Any = None,
) -> str | None:
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
                branch_id=branch,
                state_store=store,
                **_breakpoints(call),
                **_resume(first),
                **({} if context is None else {"context": context}),
            )
        else:
            key = "values" if first["type"] == "state_updated" else "update"
            node = first.get("node")
            await graph.update_state(
                thread_id, _values(first, key), branch_id=branch, state_store=store, as_node=node
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
