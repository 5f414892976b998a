"""Calls with a ``request_key``: a retry never applies its input twice.

A call with a key stores it in its first record (its ``run_started``: a run of input
starts a turn there, a resume or a continuation goes on with one), so the key survives a
crash with the run. Before a keyed call runs, the engine asks the store
for the key (``StateStore.find_request``, an index lookup in the built-in stores), holding
the thread's lease, so no other run can store the same key meanwhile. When the branch has
it, the call is a retry of that run:

* the turn completed: the call returns that turn's result, and runs nothing;
* the turn is the thread's current one and paused: the paused result;
* it is unfinished (a crash, a failure, a conflict): the call continues it, as
  ``invoke(None)`` would; one whose supersteps all ran, its end not stored, gets its end
  (``run_completed``) and runs nothing.

A key given again with other input is refused: it names a request, and one request has
one input. So is a key given to another kind of call (input, resume, continuation) than
the one that stored it.

Why resumes and continuations take keys too: a caller that cannot tell whether its call
was applied (a queue that delivers a job at least once) must not answer the thread's
*next* interrupt with an old answer, nor fail a continuation because its first delivery
already finished the run. Their key is found the same way; "the turn" is then the one the
keyed run went on with, and its end the same ``run_completed``.
"""

from __future__ import annotations

from dataclasses import replace
from typing import Any

import orjson

from nodestep._engine.compiled import CompiledGraph
from nodestep._engine.interrupts import Interrupt
from nodestep._engine.positions import load_position
from nodestep._engine.request import RunRequest
from nodestep._engine.results import FinalEventData, InterruptEventData, StreamEvent
from nodestep._errors import InternalError, ResumeError
from nodestep._state.json import to_json_value
from nodestep._superstep.position import Position
from nodestep.store import Record, StateStore

__all__ = ["keyed_call"]

_CHUNK = 64  # records read at a time while looking for the end of a keyed turn


async def keyed_call(
    graph: CompiledGraph, req: RunRequest, thread_id: str, pos: Position | None
) -> RunRequest | StreamEvent:
    """Return what a call with ``req.request_key`` does: the request to run, or its result.

    Returns:
        ``req`` for a key the branch does not have; the request to continue the keyed
        run (``input=None``, no key: the key is stored) when it is unfinished; else the
        terminal event it ended with.

    Raises:
        ResumeError: the key was stored with other input or answers, or by another kind of
            call; or its turn was left unfinished and a later turn started.
    """
    store, key, branch = req.store, req.request_key, req.branch_id
    if store is None or key is None:
        return req
    seq = await store.find_request(thread_id, branch, key)
    if seq is None:
        return req
    if pos is None:
        raise InternalError(f"request key {key!r} found at event {seq} of an empty branch")
    first = (await store.read(thread_id, branch, start=seq, stop=seq))[0]
    _check_same_call(graph, req, first, thread_id)
    end = await _turn_end(store, thread_id, branch, seq, key)
    schema = graph.schema
    if end is not None:
        done = await load_position(store, schema, thread_id, branch, at=end["seq"])
        if done is None:  # pragma: no cover - the store just read the record
            raise InternalError(f"event {end['seq']} of thread {thread_id!r} cannot be loaded")
        data = FinalEventData(schema.instance(done.values), thread_id)
        return StreamEvent(
            "final", data, step=end["step"], run_id=end["run"], checkpoint_id=done.event_id
        )
    if pos.status == "paused":
        pending = {k: Interrupt.from_json(v) for k, v in pos.interrupts.items()}
        data_ = InterruptEventData(schema.instance(pos.values), thread_id, pending)
        return StreamEvent(
            "interrupt", data_, step=pos.step, run_id=pos.run_id or "", checkpoint_id=pos.event_id
        )
    # Continue it; open_turn says when it cannot. The thread idle with no end after the
    # turn: its supersteps all ran and the end was lost, which the continuation stores.
    return replace(req, input=None, resume=None, request_key=None, ends_turn=True)


def _kind(has_input: bool, has_answers: bool) -> str:
    if has_input:
        return "a run of input"
    return "a resume" if has_answers else "a continuation"


def _check_same_call(graph: CompiledGraph, req: RunRequest, first: Record, thread: str) -> None:
    """Refuse a key given again with other input or answers than the run that stored it had.

    Raises:
        ResumeError: the calls differ: in kind, in their input, or in their answers
            (compared in their stored JSON form).
    """
    stored = _kind("input" in first, "answers" in first)
    called = _kind(req.input is not None, req.resume is not None)
    if stored != called:
        raise ResumeError(
            f"request_key {req.request_key!r} was used on thread '{thread}' (branch "
            f"'{req.branch_id}') for {stored}, at event {first['seq']}; this call is "
            f"{called}. A request key names one call: retry the call it was first given "
            f"to, or use a new key."
        )
    if req.resume is not None:
        _check_same_answers(req, first, thread)
        return
    if req.input is None:
        return  # a continuation carries nothing to compare
    data, replaced = graph.schema.writes_to_json(graph.schema.validate_update(req.input, "input"))
    if _json(data) == _json(first.get("input")) and replaced == (first.get("replaced") or []):
        return
    raise ResumeError(
        f"request_key {req.request_key!r} was used on thread '{thread}' (branch "
        f"'{req.branch_id}') for other input: the run that started at event {first['seq']} "
        f"had {_shown(first.get('input'))}, this call has {_shown(data)}. A request key "
        f"names one input: retry with the input it was first given, or use a new key for "
        f"new input."
    )


def _check_same_answers(req: RunRequest, first: Record, thread: str) -> None:
    """Refuse a keyed resume whose answers differ from those the keyed run stored.

    The stored answers are keyed by the interrupts pending then; ``Resume(value)`` names
    none, so only its value is compared.

    Raises:
        ResumeError: the answers differ.
    """
    resume = req.resume
    assert resume is not None  # the caller checked
    stored = first.get("answers") or {}
    if resume.single:
        value = to_json_value(resume.value, what="The resume answer")
        same = len(stored) == 1 and _json(next(iter(stored.values()))) == _json(value)
        given: Any = value
    else:
        answers = resume.answers or {}
        given = {k: to_json_value(v, what=f"The answer to '{k}'") for k, v in answers.items()}
        same = _json(given) == _json(stored)
    if same:
        return
    raise ResumeError(
        f"request_key {req.request_key!r} was used on thread '{thread}' (branch "
        f"'{req.branch_id}') for other answers: the resume that started at event "
        f"{first['seq']} had {_shown(stored)}, this call has {_shown(given)}. A request key "
        f"names one call: retry with the answers it was first given, or use a new key."
    )


def _json(value: Any) -> bytes:
    return orjson.dumps(value, option=orjson.OPT_SORT_KEYS)


def _shown(value: Any) -> str:
    text = _json(value).decode()
    return text if len(text) <= 200 else text[:197] + "..."


async def _turn_end(
    store: StateStore, thread_id: str, branch_id: str, seq: int, key: str
) -> Record | None:
    """Return the ``run_completed`` record that ended the turn started at ``seq``.

    ``None``: the turn has not ended, so it is the branch's current turn. Reads the
    records of that turn only.

    Raises:
        ResumeError: another turn started before this one ended.
    """
    start = seq + 1
    while True:
        chunk = await store.read(thread_id, branch_id, start=start, stop=start + _CHUNK - 1)
        for record in chunk:
            kind = record["type"]
            if kind == "run_completed":
                return record
            if kind == "run_started" and "input" in record:
                raise ResumeError(
                    f"request_key {key!r} names the run that started at event {seq} of "
                    f"thread '{thread_id}'; that turn was left unfinished, and "
                    f"another turn started at event {record['seq']}. Its call was applied "
                    f"once, at event {seq}, and nothing was run again. See where the thread "
                    f"stands with get_state(), and use a new key for new input."
                )
        if len(chunk) < _CHUNK:
            return None
        start += _CHUNK
