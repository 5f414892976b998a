"""Open a call's turn: check it against the thread's status and write its first records.

A call either starts a new turn (input), continues an unfinished superstep (no input), or
answers a paused thread (``resume=``). Which one is allowed depends only on where the thread
stands, so the rules live here, apart from the run loop.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

from nodestep.engine.interrupts import Resume
from nodestep.engine.records import checkpoint_body, tasks_to_json
from nodestep.errors import GraphConfigError, ResumeError, UnknownThreadError
from nodestep.state.json import to_json_value
from nodestep.store.base import Record, StateStore
from nodestep.superstep.position import PlannedTask, Position

if TYPE_CHECKING:
    from nodestep.graph.graph import Graph

__all__ = ["RunRequest", "open_turn"]


@dataclass(slots=True)
class RunRequest:
    """The options of one call."""

    input: Any
    thread_id: str | None
    branch_id: str
    resume: Any
    context: Any
    store: StateStore | None
    modes: frozenset[str]
    interrupt_before: frozenset[str]
    interrupt_after: frozenset[str]


def open_turn(
    graph: Graph[Any], pos: Position | None, req: RunRequest, run_id: str
) -> tuple[Position, list[Record], bool, Any]:
    """Check the call against the thread's status; return the position and first records.

    Returns:
        The position the run starts from, the records that open the call, whether the call
        continues a pending superstep, and the checkpoint that opens a new thread (or None).
    """
    schema = graph.schema
    thread = req.thread_id
    stored = req.store is not None
    if req.resume is not None:
        if not isinstance(req.resume, Resume):
            raise TypeError(
                f"resume= takes a Resume, got {type(req.resume).__name__}: pass "
                f"resume=Resume(value) or resume=Resume(answers={{key: value}})."
            )
        if req.input is not None:
            raise ResumeError("Pass input=None with resume=: a resumed run takes only answers.")
        if pos is None:
            if not stored:
                raise GraphConfigError(
                    "resume= needs a state store and the paused thread's thread_id."
                )
            raise UnknownThreadError(
                f"Thread '{thread}' has no history to resume.",
                thread_id=str(thread),
                branch_id=req.branch_id,
            )
        answers = _check_answers(req.resume, pos, str(thread))
        pos.answers.update(answers)
        pos.status = "running"
        pos.run_id = run_id
        return pos, [{"type": "run_started", "run": run_id, "answers": answers}], True, None
    if req.input is None and stored:
        if pos is None:
            raise UnknownThreadError(
                f"Thread '{thread}' has no history to continue; pass input to start it.",
                thread_id=str(thread),
                branch_id=req.branch_id,
            )
        _check_continue(pos, str(thread))
        pos.run_id = run_id
        return pos, [{"type": "run_started", "run": run_id}], True, None
    if pos is not None and pos.status == "paused":
        raise ResumeError(
            f"Thread '{thread}' is paused, waiting for answers to {_keys(pos)}. Answer with "
            f"invoke(None, thread_id=..., resume=Resume(...)), or fork the thread at an "
            f"earlier event to start over.",
            pending=list(pos.interrupts),
        )
    opening = None
    if pos is None:
        pos = Position(values=schema.defaults())
        if stored:
            opening = checkpoint_body(schema, pos)
    writes = schema.validate_update(req.input if req.input is not None else {}, "input")
    pos.values = dict(pos.values)
    schema.apply(pos.values, writes, "input")
    pos.tasks = [PlannedTask(graph.start, graph.start)]
    pos.step = 0
    pos.status = "running"
    pos.done, pos.interrupts, pos.answers, pos.caches = {}, {}, {}, {}
    pos.run_id = run_id
    records: list[Record] = []
    if stored:
        data, replaced = schema.writes_to_json(writes)
        record: Record = {
            "type": "run_started",
            "run": run_id,
            "input": data,
            "tasks": tasks_to_json(pos.tasks),
        }
        if replaced:
            record["replaced"] = replaced
        records.append(record)
    return pos, records, False, opening


def _keys(pos: Position) -> str:
    return ", ".join(f"'{k}'" for k in pos.interrupts) or "(none)"


def _check_continue(pos: Position, thread: str) -> None:
    if pos.status == "idle":
        raise ResumeError(
            f"Thread '{thread}' has no unfinished superstep: its last run completed. "
            f"invoke(None) only continues an unfinished run; pass input to start a new turn."
        )
    if pos.status == "paused":
        raise ResumeError(
            f"Thread '{thread}' is paused, waiting for answers to {_keys(pos)}; answer with "
            f"resume=Resume(...).",
            pending=list(pos.interrupts),
        )
    if pos.status == "blocked":
        raise ResumeError(
            f"Thread '{thread}' stopped in step {pos.step} because that superstep's writes "
            f"cannot be merged, so it cannot continue. Fork the thread at an earlier event, "
            f"or pass input to start a new turn."
        )


def _check_answers(resume: Resume, pos: Position, thread: str) -> dict[str, Any]:
    pending = list(pos.interrupts)
    if pos.status != "paused" or not pending:
        raise ResumeError(
            f"resume= was given, but thread '{thread}' has no pending interrupt. Pass input to "
            f"start a new turn, or invoke(None) to continue an unfinished superstep."
        )
    shown = ", ".join(f"'{k}'" for k in pending)
    if resume.single:
        if len(pending) > 1:
            raise ResumeError(
                f"Thread '{thread}' has {len(pending)} pending interrupts ({shown}); answer "
                f"each by key with Resume(answers={{key: value}}).",
                pending=pending,
            )
        return {pending[0]: to_json_value(resume.value, what="The resume answer")}
    answers = resume.answers or {}
    unknown = [k for k in answers if k not in pos.interrupts]
    if unknown:
        raise ResumeError(
            f"Resume answers {', '.join(repr(k) for k in unknown)}, which is not pending on "
            f"thread '{thread}'. Pending: {shown}.",
            pending=pending,
        )
    missing = [k for k in pending if k not in answers]
    if missing:
        raise ResumeError(
            f"Resume must answer every pending interrupt of thread '{thread}'; missing: "
            f"{', '.join(repr(k) for k in missing)}. Pending: {shown}.",
            pending=pending,
        )
    return {k: to_json_value(v, what=f"The answer to '{k}'") for k, v in answers.items()}
