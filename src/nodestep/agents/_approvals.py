"""Approval of tool calls: one interrupt for every call that needs a person's yes.

The tool node pauses with ``interrupt(payload, id="approve")``; the payload lists the
calls waiting, each with its ``id``, ``name`` and ``args``. The answer, given with
``Resume(...)``, says for each call id what to do:

- ``"approve"`` (or ``True``): run the call as the model wrote it;
- ``"reject"`` (or ``False``), or ``{"reject": "why"}``: do not run it; the model gets an
  error tool message that says so (and why);
- ``{"edit": {...args}}``: run it with these arguments instead.

The answer is a dict of call id to decision, or, when one call waits, just its decision.
An answer that is neither pauses the node again, with ``id="approve-2"`` (then ``-3``...)
and the same payload plus an ``"error"`` that says what was wrong with the answer.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from nodestep._engine.interrupts import interrupt
from nodestep._errors import ResumeError
from nodestep.agents._messages import AssistantMessage, ToolCall
from nodestep.agents._tools import Tool

__all__ = ["Decision", "ask_approval"]

_KEYS = {"approve", "reject", "edit"}


@dataclass(frozen=True, slots=True)
class Decision:
    """What to do with one call: run it (maybe with edited arguments) or not."""

    rejected: bool = False
    reason: str = ""
    args: dict[str, Any] | None = None


_RUN = Decision()


def _fix(call_id: str) -> str:
    return (
        f"Answer with Resume({{{call_id!r}: 'approve'}}), 'reject', {{'reject': 'why'}} or "
        f"{{'edit': {{...arguments}}}} for each call waiting"
    )


def _decision(answer: Any, call: ToolCall) -> Decision:
    if answer is True or answer == "approve":
        return _RUN
    if answer is False or answer == "reject":
        return Decision(rejected=True)
    if isinstance(answer, dict) and len(answer) == 1 and answer.keys() <= _KEYS:
        ((kind, value),) = answer.items()
        if kind == "reject":
            return Decision(rejected=True, reason=str(value or ""))
        if kind == "edit" and isinstance(value, dict):
            return Decision(args=value)
        if kind == "approve":
            return _RUN
    raise ResumeError(
        f"The approval of tool call {call.id!r} ({call.name}) is {answer!r}, which is not a "
        f"decision. {_fix(call.id)}."
    )


def _decisions(answer: Any, waiting: list[ToolCall]) -> dict[str, Decision]:
    by_id = isinstance(answer, dict) and not (answer.keys() <= _KEYS and len(answer) == 1)
    if not by_id:
        if len(waiting) != 1:
            ids = ", ".join(repr(c.id) for c in waiting)
            raise ResumeError(
                f"{len(waiting)} tool calls wait for approval ({ids}), and the answer "
                f"{answer!r} does not say which it is for. {_fix(waiting[0].id)}."
            )
        return {waiting[0].id: _decision(answer, waiting[0])}
    unknown = set(answer) - {c.id for c in waiting}
    missing = [c.id for c in waiting if c.id not in answer]
    if unknown or missing:
        raise ResumeError(
            f"The approvals name calls {sorted(unknown)!r} that do not wait and leave out "
            f"{missing!r}. {_fix(waiting[0].id)}."
        )
    return {c.id: _decision(answer[c.id], c) for c in waiting}


def ask_approval(
    reply: AssistantMessage, tools: dict[str, Tool], also: frozenset[str] = frozenset()
) -> tuple[tuple[ToolCall, ...], list[Decision]]:
    """Pause for the calls of ``reply`` that need approval; return the calls to run.

    A call needs approval when its tool was made with ``@tool(approve=True)`` or its name
    is in ``also`` (the tools a ``HumanApproval`` middleware names).

    Returns:
        The calls (with edited arguments where the approver edited them) and a decision
        for each, in the reply's order.

    """
    waiting = [
        c
        for c in reply.tool_calls
        if c.name in also or ((t := tools.get(c.name)) is not None and t.approve)
    ]
    if not waiting:
        return reply.tool_calls, [_RUN] * len(reply.tool_calls)
    payload = {
        "question": "Approve these tool calls?",
        "tool_calls": [{"id": c.id, "name": c.name, "args": c.args} for c in waiting],
    }
    answer = interrupt(payload, id="approve")
    attempt = 1
    while True:
        try:
            decided = _decisions(answer, waiting)
            break
        except ResumeError as error:
            # A wrong answer must not cost the pause: ask again, saying what was wrong.
            attempt += 1
            answer = interrupt({**payload, "error": str(error)}, id=f"approve-{attempt}")
    calls: list[ToolCall] = []
    decisions: list[Decision] = []
    for call in reply.tool_calls:
        decision = decided.get(call.id, _RUN)
        if decision.args is not None:
            call = call.model_copy(update={"args": decision.args})
        calls.append(call)
        decisions.append(decision)
    return tuple(calls), decisions
