"""Open a call's turn: check it against the thread's status and make its first records.

A call either starts a new turn (input), continues an unfinished superstep (no input), or
answers a paused thread (``resume=``). Which one is allowed depends only on where the thread
stands, so the rules live here, apart from the run loop. Each way of opening advances the
position with the records it returns, the way replay will.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from nodestep._engine.compiled import CompiledGraph
from nodestep._engine.interrupts import Resume
from nodestep._engine.request import RunRequest
from nodestep._errors import GraphConfigError, ResumeError, UnknownThreadError
from nodestep._state.json import to_json_value
from nodestep._superstep import machine
from nodestep._superstep.position import PlannedTask, Position
from nodestep._superstep.records import Checkpoint, HistoryRecord, RunStarted

__all__ = ["Turn", "open_turn", "thread_label"]


@dataclass(slots=True)
class Turn:
    """How a call opens.

    Attributes:
        pos: The position the run starts from, already advanced by ``records``.
        records: The records that open the call, to be stored first.
        continuing: Whether the call continues a pending superstep (its breakpoint
            before was already honoured by the call that stopped there).
    """

    pos: Position
    records: list[HistoryRecord]
    continuing: bool


def open_turn(
    graph: CompiledGraph, pos: Position | None, req: RunRequest, thread_id: str, run_id: str
) -> Turn:
    """Check the call against the thread's status; return where the run starts.

    Raises:
        ResumeError: the call does not fit where the thread stands.
        UnknownThreadError: a continue or resume of a thread with no history.
    """
    if req.resume is not None:
        return _answer(graph, pos, req, thread_id, run_id)
    if req.input is None and req.store is not None:
        if pos is None:
            where = thread_label(thread_id, req.branch_id)
            raise UnknownThreadError(
                f"Thread {where} has no history to continue; pass input to start it.",
                thread_id=thread_id,
                branch_id=req.branch_id,
            )
        if not (req.ends_turn and pos.status == "idle"):
            _check_continue(pos, thread_label(thread_id, req.branch_id))
        return _opened(graph, pos, RunStarted(run_id), continuing=True)
    return _new_turn(graph, pos, req, thread_id, run_id)


def _opened(graph: CompiledGraph, pos: Position, record: RunStarted, *, continuing: bool) -> Turn:
    record.advance(graph.schema, pos)
    return Turn(pos, [record], continuing)


def _answer(
    graph: CompiledGraph, pos: Position | None, req: RunRequest, thread_id: str, run_id: str
) -> Turn:
    if not isinstance(req.resume, Resume):
        raise TypeError(
            f"resume= takes a Resume, got {type(req.resume).__name__}: pass "
            f"resume=Resume(value) or resume=Resume(answers={{key: value}})."
        )
    if req.input is not None:
        raise ResumeError("Pass input=None with resume=: a resumed run takes only answers.")
    if pos is None:
        if req.store is None:
            raise GraphConfigError("resume= needs a state store and the paused thread's thread_id.")
        raise UnknownThreadError(
            f"Thread {thread_label(thread_id, req.branch_id)} has no history to resume.",
            thread_id=thread_id,
            branch_id=req.branch_id,
        )
    answers = _check_answers(req.resume, pos, thread_label(thread_id, req.branch_id))
    return _opened(graph, pos, RunStarted(run_id, answers=answers), continuing=True)


def _new_turn(
    graph: CompiledGraph, pos: Position | None, req: RunRequest, thread_id: str, run_id: str
) -> Turn:
    schema = graph.schema
    if pos is not None and pos.status == "paused":
        raise ResumeError(
            f"Thread {thread_label(thread_id, req.branch_id)} is paused, waiting for answers to "
            f"{_keys(pos)}. Answer with invoke(None, thread_id=..., resume=Resume(...)) on "
            f"the same branch, or fork the thread at an earlier event to start over.",
            pending=list(pos.interrupts),
        )
    records: list[HistoryRecord] = []
    if pos is None:
        pos = machine.new_thread(schema.defaults())
        if req.store is not None:
            # Its own defaults: the checkpoint is stored after the input moved ``pos`` on.
            records.append(Checkpoint(machine.new_thread(schema.defaults())))
    writes = schema.validate_update(req.input if req.input is not None else {}, "input")
    start = graph.flow.start
    turn = _opened(
        graph, pos, RunStarted(run_id, writes, [PlannedTask(start, start)]), continuing=False
    )
    turn.records[:0] = records
    return turn


def thread_label(thread_id: str, branch_id: str = "main") -> str:
    """Return how a message names a thread: with its branch when that is not ``main``.

    A forked branch has its own status: a message that named only the thread would send
    the reader to ``main``, which may stand elsewhere.
    """
    return f"'{thread_id}'" if branch_id == "main" else f"'{thread_id}' (branch '{branch_id}')"


def _keys(pos: Position) -> str:
    return ", ".join(f"'{k}'" for k in pos.interrupts) or "(none)"


def _check_continue(pos: Position, thread: str) -> None:
    if pos.status == "idle":
        raise ResumeError(
            f"Thread {thread} has no unfinished superstep: its last run completed. "
            f"invoke(None) only continues an unfinished run; pass input to start a new turn."
        )
    if pos.status == "paused":
        raise ResumeError(
            f"Thread {thread} is paused, waiting for answers to {_keys(pos)}; answer with "
            f"resume=Resume(...).",
            pending=list(pos.interrupts),
        )
    if pos.status == "blocked":
        raise ResumeError(
            f"Thread {thread} stopped in step {pos.step} because that superstep's writes "
            f"cannot be merged, so it cannot continue. Fork the thread at an earlier event, "
            f"or pass input to start a new turn."
        )


def _nothing_to_answer(pos: Position, thread: str) -> ResumeError:
    """Return the refusal of ``resume=`` on a thread with no open interrupt."""
    if pos.interrupts and pos.status == "running":
        # A resume stored its answers (a fork at its run_started, or a run cut short).
        keys = ", ".join(f"'{k}'" for k in pos.interrupts)
        return ResumeError(
            f"resume= was given, but the interrupts of thread {thread} ({keys}) were already "
            f"answered by a resume, and superstep {pos.step} has not run with those answers "
            f"yet. Continue with them with invoke(None); to answer again, fork the thread at "
            f"the run_paused event before that resume, which state_history(...).last_pause() "
            f"finds on the branch the resume ran on."
        )
    return ResumeError(
        f"resume= was given, but thread {thread} has no pending interrupt. Pass input to "
        f"start a new turn, or invoke(None) to continue an unfinished superstep."
    )


def _unknown_hint(unknown: list[str], pos: Position) -> str:
    """Return why answers to keys that are not pending may have been given, and the fix."""
    hints = []
    closed = [k for k in unknown if k in pos.interrupts]
    if closed:  # asked in this superstep, but the task finished since (see open_interrupts)
        hints.append(
            f" {', '.join(repr(k) for k in closed)} no longer waits: its task finished in "
            f"this superstep, so no answer reaches it; leave it out."
        )
    keys = [k for k in pos.open_interrupts() if k.rsplit(":", 1)[-1] in unknown]
    if keys:
        hints.append(
            f" Answers are keyed '<task_id>:<id>', as in result.interrupts: use "
            f"{', '.join(repr(k) for k in keys)}."
        )
    return "".join(hints)


def _check_answers(resume: Resume, pos: Position, thread: str) -> dict[str, Any]:
    """Return the answers ``resume`` gives to the thread's pending interrupts.

    A thread that failed after its interrupts were all answered (an answer its node could
    not take, say) takes new answers too: they replace the stored ones. Else the only way
    on would be ``invoke(None)``, which gives the node the same answer again.
    """
    pending = list(pos.open_interrupts())
    if not pending:
        raise _nothing_to_answer(pos, thread)
    shown = ", ".join(f"'{k}'" for k in pending)
    if resume.single:
        if len(pending) > 1:
            raise ResumeError(
                f"Thread {thread} has {len(pending)} pending interrupts ({shown}); answer "
                f"each by key with Resume(answers={{key: value}}).",
                pending=pending,
            )
        return {pending[0]: to_json_value(resume.value, what="The resume answer")}
    answers = resume.answers or {}
    unknown = [k for k in answers if k not in pending]
    if unknown:
        raise ResumeError(
            f"Resume answers {', '.join(repr(k) for k in unknown)}, which "
            f"{'is' if len(unknown) == 1 else 'are'} not pending on thread {thread}. "
            f"Pending: {shown}.{_unknown_hint(unknown, pos)}",
            pending=pending,
        )
    missing = [k for k in pending if k not in answers]
    if missing:
        raise ResumeError(
            f"Resume must answer every pending interrupt of thread {thread}; missing: "
            f"{', '.join(repr(k) for k in missing)}. Pending: {shown}.",
            pending=pending,
        )
    return {k: to_json_value(v, what=f"The answer to '{k}'") for k, v in answers.items()}
