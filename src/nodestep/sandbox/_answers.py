"""The interrupt form: what a paused thread asks, and the resume its answers make.

A plain interrupt gets one answer box: JSON if the text is JSON (``true``, ``3``,
``{"a": 1}``), else the text as a string. A tool approval (a payload with
``tool_calls``, as ``@tool(approve=True)`` makes) gets, per call, a choice of approve,
edit (its arguments as JSON, prefilled) or reject (with a reason). Answers go by the
interrupt's key, so a thread with several pauses gets each its own.
"""

from __future__ import annotations

import json
from dataclasses import dataclass
from typing import Any

from nodestep.sandbox._forms import FormError

__all__ = ["Question", "questions", "resume_answers"]


@dataclass(frozen=True, slots=True)
class Question:
    """One pending interrupt as the form shows it."""

    key: str
    node: str
    payload: Any
    tool_calls: list[dict[str, Any]]


def questions(interrupts: dict[str, Any]) -> list[Question]:
    """Return the form's questions for a snapshot's pending ``Interrupt``s, by key."""
    found = []
    for key, pending in sorted(interrupts.items()):
        payload = pending.payload
        listed = payload.get("tool_calls") if isinstance(payload, dict) else None
        calls: list[dict[str, Any]] = []
        if isinstance(listed, list) and all(isinstance(c, dict) and "id" in c for c in listed):
            calls = listed
        found.append(Question(key, pending.node, payload, calls))
    return found


def _text_answer(key: str, text: str) -> Any:
    try:
        return json.loads(text)
    except ValueError:
        return text


def _call_answer(key: str, call: dict[str, Any], form: dict[str, str]) -> Any:
    slot = f"{key}.{call['id']}"
    decision = form.get(f"decision.{slot}", "")
    if decision == "approve":
        return "approve"
    if decision == "reject":
        reason = form.get(f"reason.{slot}", "").strip()
        return {"reject": reason} if reason else "reject"
    if decision == "edit":
        text = form.get(f"args.{slot}", "")
        try:
            args = json.loads(text)
        except ValueError:
            args = None
        if not isinstance(args, dict):
            raise FormError(
                f"The edited arguments of tool call {call['id']!r} ({call.get('name')}) must "
                f'be a JSON object; got {text!r}. Write them as {{"name": value}}.'
            )
        return {"edit": args}
    raise FormError(
        f"Choose approve, edit or reject for tool call {call['id']!r} ({call.get('name')})."
    )


def resume_answers(asked: list[Question], form: dict[str, str]) -> dict[str, Any]:
    """Return the answers by interrupt key, read from the posted form.

    Raises:
        FormError: a question has no answer, a tool call no decision, or edited
            arguments that are not a JSON object.
    """
    answers: dict[str, Any] = {}
    for question in asked:
        if question.tool_calls:
            answers[question.key] = {
                call["id"]: _call_answer(question.key, call, form) for call in question.tool_calls
            }
            continue
        text = form.get(f"answer.{question.key}", "").strip()
        if not text:
            raise FormError(f"Interrupt {question.key!r} has no answer; write one and send again.")
        answers[question.key] = _text_answer(question.key, text)
    return answers
